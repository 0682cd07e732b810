"""The Kubernetes API as `blueprint verify` uses it: a small protocol, and its adapter over the official client.

Checks talk to `KubeApi` only, with objects as plain dicts shaped like the API's JSON, so tests inject a fake API.
The kubeconfig comes from `--kubeconfig`, else `$KUBECONFIG` or `~/.kube/config`, else the stack output (Pulumi
CLI); it authenticates with `aws eks get-token`. See docs/operations.md#verifying-a-deploy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


class KubeError(Exception):
    """The API refused a call or could not be reached; the message says which call and why."""


class KubeApi(Protocol):
    """The calls the checks make. Objects are dicts in the API's JSON shape."""

    def list_nodes(self) -> list[dict[str, Any]]: ...
    def list_pods(self, namespace: str | None = None, label_selector: str = "") -> list[dict[str, Any]]: ...
    def read_pod(self, namespace: str, name: str) -> dict[str, Any]: ...
    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...
    def delete_pod(self, namespace: str, name: str) -> None: ...
    def pod_log(self, namespace: str, name: str) -> str: ...
    def create_secret(self, namespace: str, body: dict[str, Any]) -> None: ...
    def delete_secret(self, namespace: str, name: str) -> None: ...
    def read_claim(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def list_resource_slices(self) -> list[dict[str, Any]]: ...
    def cordon(self, node: str) -> None: ...
    def label_node(self, node: str, key: str, value: str | None) -> None: ...


class KubernetesApi:
    """`KubeApi` over the official Kubernetes Python client (`kubernetes.client.CoreV1Api`)."""

    def __init__(self, core: Any, serializer: Any, resource: Any = None) -> None:
        self._core = core
        self._resource = resource
        self._to_dict = serializer.sanitize_for_serialization

    @classmethod
    def from_kubeconfig(cls, path: Path) -> KubernetesApi:
        from kubernetes import client, config

        try:
            api_client = config.new_client_from_config(config_file=str(path))
        except Exception as error:  # the loader raises ConfigException, TypeError or OSError on a bad file
            raise KubeError(f"cannot load kubeconfig {path}: {error}") from error
        return cls(client.CoreV1Api(api_client), api_client, client.ResourceV1Api(api_client))

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, **kwargs)
        except ApiException as error:
            raise KubeError(f"{what}: {error.status} {error.reason}") from error
        except (HTTPError, OSError) as error:  # unreachable endpoint, TLS, retries exhausted
            raise KubeError(f"{what}: {error}") from error

    def list_nodes(self) -> list[dict[str, Any]]:
        items = self._call("list nodes", self._core.list_node).items
        return [self._to_dict(n) for n in items]

    def list_pods(self, namespace: str | None = None, label_selector: str = "") -> list[dict[str, Any]]:
        if namespace is None:
            result = self._call("list pods", self._core.list_pod_for_all_namespaces, label_selector=label_selector)
        else:
            result = self._call(
                f"list pods in {namespace}", self._core.list_namespaced_pod, namespace, label_selector=label_selector
            )
        return [self._to_dict(p) for p in result.items]

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(
            self._to_dict(self._call(f"read pod {namespace}/{name}", self._core.read_namespaced_pod, name, namespace))
        )

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        pod = self._call(f"create pod in {namespace}", self._core.create_namespaced_pod, namespace, body)
        return dict(self._to_dict(pod))

    def delete_pod(self, namespace: str, name: str) -> None:
        self._delete(f"delete pod {namespace}/{name}", self._core.delete_namespaced_pod, name, namespace)

    def pod_log(self, namespace: str, name: str) -> str:
        return str(self._call(f"read log of {namespace}/{name}", self._core.read_namespaced_pod_log, name, namespace))

    def create_secret(self, namespace: str, body: dict[str, Any]) -> None:
        self._call(f"create secret in {namespace}", self._core.create_namespaced_secret, namespace, body)

    def delete_secret(self, namespace: str, name: str) -> None:
        self._delete(f"delete secret {namespace}/{name}", self._core.delete_namespaced_secret, name, namespace)

    def read_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            claim = self._core.read_namespaced_persistent_volume_claim(name, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise KubeError(f"read claim {namespace}/{name}: {error.status} {error.reason}") from error
        return dict(self._to_dict(claim))

    def list_resource_slices(self) -> list[dict[str, Any]]:
        """Every ResourceSlice (`resource.k8s.io/v1`); none when the cluster does not serve that API."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        if self._resource is None:
            return []
        try:
            items = self._resource.list_resource_slice().items
        except ApiException as error:
            if error.status == 404:
                return []
            raise KubeError(f"list resource slices: {error.status} {error.reason}") from error
        except (HTTPError, OSError) as error:
            raise KubeError(f"list resource slices: {error}") from error
        return [self._to_dict(s) for s in items]

    def cordon(self, node: str) -> None:
        self._call(f"cordon {node}", self._core.patch_node, node, {"spec": {"unschedulable": True}})

    def label_node(self, node: str, key: str, value: str | None) -> None:
        """Set a node label, or remove it (`None`: a null in the patch deletes the key)."""
        patch = {"metadata": {"labels": {key: value}}}
        self._call(f"label {node} {key}={value}", self._core.patch_node, node, patch)

    def _delete(self, what: str, fn: Any, name: str, namespace: str) -> None:
        """Delete now (grace period 0: test pods hold GPUs) and treat "already gone" as done."""
        from kubernetes.client.exceptions import ApiException

        try:
            fn(name, namespace, grace_period_seconds=0)
        except ApiException as error:
            if error.status != 404:
                raise KubeError(f"{what}: {error.status} {error.reason}") from error


@dataclass(frozen=True)
class KubeconfigSource:
    """Where the kubeconfig was found, said on stderr so nobody wonders which cluster was verified."""

    path: Path
    origin: str
    #: A file written from the stack output, deleted when the command ends (the client keeps what it read).
    temporary: bool = False


def kubeconfig_source(
    flag: Path | None, stack: str | None, environ: dict[str, str] | None = None, home: Path | None = None
) -> KubeconfigSource:
    """`--kubeconfig`, else `$KUBECONFIG` (its first file) or `~/.kube/config`, else the stack output through the
    Pulumi CLI. Raises KubeError when none is there."""
    env = os.environ if environ is None else environ
    if flag is not None:
        if not flag.is_file():
            raise KubeError(f"--kubeconfig {flag}: no such file")
        return KubeconfigSource(flag, f"--kubeconfig {flag}")
    listed = env.get("KUBECONFIG", "")
    for entry in listed.split(os.pathsep):
        if entry and Path(entry).is_file():
            return KubeconfigSource(Path(entry), f"KUBECONFIG={entry}")
    default = (home or Path.home()) / ".kube" / "config"
    if default.is_file():
        return KubeconfigSource(default, str(default))
    if stack and shutil.which("pulumi"):
        origin = f"pulumi stack output kubeconfig --stack {stack}"
        return KubeconfigSource(_stack_output_kubeconfig(stack), origin, temporary=True)
    raise KubeError(
        "no kubeconfig: pass --kubeconfig FILE, set KUBECONFIG, or install the Pulumi CLI so the stack output "
        "`kubeconfig` can be read (`pulumi stack output kubeconfig --show-secrets --stack NAME`)"
    )


def _stack_output_kubeconfig(stack: str) -> Path:
    """The stack's `kubeconfig` output written to a private temporary file (it holds no token: `aws eks get-token`
    is run by the client for each connection)."""
    done = subprocess.run(
        ["pulumi", "stack", "output", "kubeconfig", "--show-secrets", "--stack", stack],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise KubeError(f"pulumi stack output kubeconfig --stack {stack}: {done.stderr.strip() or 'no output'}")
    handle, name = tempfile.mkstemp(prefix=f"kubeconfig-{stack}-", suffix=".yaml")
    with os.fdopen(handle, "w") as out:
        out.write(done.stdout)
    return Path(name)
