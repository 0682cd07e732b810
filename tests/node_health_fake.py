"""An in-memory Kubernetes API for the health loop's scenarios: the `programs.node_health.kube.KubeApi` protocol over
dicts, with strategic-merge patches of the fields the loop writes (labels and annotations merged, `spec` fields
replaced), and helpers that play the scheduler and the kubelet (bind a pod, end it)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from programs.node_health.kube import KubeError

CREATED = "2026-11-27T04:00:00Z"


def _selected(obj: dict[str, Any], label_selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, label_selector.split(",")):
        key, _, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    return True


def apply_json_patch(stored: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """The node after an RFC 6902 patch of `test`, `remove`, `replace` and `add` operations, all or nothing, as the API
    server applies them: a failed `test` or a missing element raises KubeError (422) and `stored` is left as it was."""
    node = copy.deepcopy(stored)
    for op in operations:
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]]
        target: Any = node
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            index = len(target) if last == "-" else int(last)
            if op["op"] != "add" and index >= len(target):
                raise KubeError(f"{op['path']}: no such element", 422)
            if op["op"] == "test" and target[index] != op["value"]:
                raise KubeError(f"test of {op['path']} failed", 422)
            if op["op"] == "remove":
                del target[index]
            elif op["op"] == "replace":
                target[index] = copy.deepcopy(op["value"])
            elif op["op"] == "add":
                target.insert(index, copy.deepcopy(op["value"]))
        elif op["op"] == "test":
            if target.get(last) != op["value"]:
                raise KubeError(f"test of {op['path']} failed", 422)
        elif op["op"] == "remove":
            del target[last]
        else:
            target[last] = copy.deepcopy(op["value"])
    return node


class FakeKube:
    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.config_maps: dict[tuple[str, str], dict[str, str]] = {}
        self.calls: list[tuple[str, str]] = []
        self.evictions: list[tuple[str, str]] = []
        #: Called once with the stored node before the next write of a node: another controller's write that lands
        #: after the loop listed the node.
        self.before_write: Callable[[dict[str, Any]], None] | None = None

    # ------------------------------------------------------------------------------------------------ fixtures
    def add_node(
        self, name: str, pool: str, taints: list[dict[str, str]] | None = None, labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        node = {
            "metadata": {
                "name": name,
                "creationTimestamp": CREATED,
                "labels": {"gpu-clusters/pool": pool, **(labels or {})},
                "annotations": {},
            },
            "spec": {"taints": list(taints or [])},
        }
        self.nodes[name] = node
        return node

    def add_pod(self, namespace: str, name: str, node: str, gpus: int = 0, phase: str = "Running") -> None:
        resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
        self.pods[(namespace, name)] = {
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": CREATED, "labels": {}},
            "spec": {"nodeName": node, "containers": [{"name": "main", "resources": resources}]},
            "status": {"phase": phase},
        }

    def check_pods(self) -> list[dict[str, Any]]:
        return [p for (ns, _), p in self.pods.items() if ns == "node-health"]

    def bind(self, pod: dict[str, Any], started: str) -> None:
        """The scheduler binds the pod to its node and the kubelet starts it."""
        node = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ][0]["matchFields"][0]["values"][0]
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "startTime": started}

    def end(self, pod: dict[str, Any], exit_code: int, message: str) -> None:
        phase = "Succeeded" if exit_code == 0 else "Failed"
        terminated = {"exitCode": exit_code, "message": message}
        pod["status"] = {
            **pod.get("status", {}),
            "phase": phase,
            "containerStatuses": [{"state": {"terminated": terminated}}],
        }

    def unschedulable(self, pod: dict[str, Any], message: str) -> None:
        pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
        }

    # ----------------------------------------------------------------------------------------------- protocol
    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        self.calls.append(("list_nodes", label_selector))
        return [copy.deepcopy(n) for n in self.nodes.values() if _selected(n, label_selector)]

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("patch_node", name))
        if name not in self.nodes:
            raise KubeError(f"node {name} not found", 404)
        self._another_writer(name)
        node = self.nodes[name]
        for key, value in patch.items():
            if key == "metadata":
                for part in ("labels", "annotations"):
                    node["metadata"].setdefault(part, {}).update(value.get(part) or {})
            else:
                node.setdefault(key, {}).update(copy.deepcopy(value))
        return copy.deepcopy(node)

    def _another_writer(self, name: str) -> None:
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook(self.nodes[name])

    def json_patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """RFC 6902 `test`, `remove`, `replace` and `add` on the node, all or nothing, as the API server applies them;
        `before_write` plays another controller writing the node between the loop's list and its patch."""
        self.calls.append(("json_patch_node", name))
        if name not in self.nodes:
            raise KubeError(f"node {name} not found", 404)
        self._another_writer(name)
        node = apply_json_patch(self.nodes[name], operations)
        self.nodes[name] = node
        return copy.deepcopy(node)

    def list_pods(
        self, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        self.calls.append(("list_pods", namespace or ""))
        found = []
        for (ns, _), pod in self.pods.items():
            if namespace is not None and ns != namespace:
                continue
            if not _selected(pod, label_selector):
                continue
            if "status.phase!=" in field_selector and pod["status"].get("phase") in ("Succeeded", "Failed"):
                continue
            found.append(copy.deepcopy(pod))
        return found

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create_pod", body["metadata"]["name"]))
        key = (namespace, body["metadata"]["name"])
        if key in self.pods:
            raise KubeError(f"pod {key} exists", 409)
        pod = copy.deepcopy(body)
        pod["metadata"].setdefault("creationTimestamp", self.now)
        pod["status"] = {"phase": "Pending"}
        self.pods[key] = pod
        return copy.deepcopy(pod)

    def delete_pod(self, namespace: str, name: str) -> None:
        self.calls.append(("delete_pod", name))
        if self.pods.pop((namespace, name), None) is None:
            raise KubeError(f"pod {namespace}/{name} not found", 404)

    def evict_pod(self, namespace: str, name: str) -> None:
        self.evictions.append((namespace, name))
        self.delete_pod(namespace, name)

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        data = self.config_maps.get((namespace, name))
        return None if data is None else {"metadata": {"name": name}, "data": dict(data)}

    def write_config_map(self, namespace: str, name: str, data: dict[str, str]) -> None:
        self.config_maps[(namespace, name)] = dict(data)

    #: What the API server stamps as a new pod's creation time (tests move it with their clock).
    now = CREATED
