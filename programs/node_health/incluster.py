"""The `KubeApi` of the loop's pod: the API server's REST calls over urllib, authenticated with the pod's service
account token and its CA (the files Kubernetes mounts at `SERVICE_ACCOUNT_DIR`; "Accessing the Kubernetes API from
a Pod", kubernetes.io). Standard library only. The token is re-read on every call: the kubelet rotates it."""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from programs.node_health.kube import KubeError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class InClusterApi:
    """The protocol's calls against the API server the pod runs under."""

    def __init__(
        self, server: str | None = None, account_dir: Path = SERVICE_ACCOUNT_DIR, timeout: float = 30.0
    ) -> None:
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        self.server = server or f"https://{host}:{port}"
        self.account_dir = account_dir
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=str(account_dir / "ca.crt"))

    def _call(
        self, method: str, path: str, body: Any = None, content_type: str = "application/json", **query: str
    ) -> Any:
        wanted = {k: v for k, v in query.items() if v}
        url = self.server + path + (f"?{urllib.parse.urlencode(wanted)}" if wanted else "")
        data = None if body is None else json.dumps(body).encode()
        token = (self.account_dir / "token").read_text().strip()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as answer:
                text = answer.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:500]
            raise KubeError(f"{method} {path}: HTTP {error.code}: {detail}", error.code) from error
        except (urllib.error.URLError, OSError) as error:
            raise KubeError(f"{method} {path}: {error}") from error
        return json.loads(text) if text else {}

    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        return list(self._call("GET", "/api/v1/nodes", labelSelector=label_selector).get("items") or [])

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/api/v1/nodes/{name}", patch, STRATEGIC_MERGE))

    def json_patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        return dict(self._call("PATCH", f"/api/v1/nodes/{name}", operations, JSON_PATCH))

    def list_pods(
        self, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
        answer = self._call("GET", path, labelSelector=label_selector, fieldSelector=field_selector)
        return list(answer.get("items") or [])

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", f"/api/v1/namespaces/{namespace}/pods", body))

    def delete_pod(self, namespace: str, name: str) -> None:
        self._call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def evict_pod(self, namespace: str, name: str) -> None:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        self._call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body)

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return dict(self._call("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}"))
        except KubeError as error:
            if error.status == 404:
                return None
            raise

    def write_config_map(self, namespace: str, name: str, data: dict[str, str]) -> None:
        if self.read_config_map(namespace, name) is None:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
            self._call("POST", f"/api/v1/namespaces/{namespace}/configmaps", body)
        else:
            self._call("PATCH", f"/api/v1/namespaces/{namespace}/configmaps/{name}", {"data": data}, MERGE)
