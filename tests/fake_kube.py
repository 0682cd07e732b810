"""An in-memory Kubernetes API implementing `programs.node_health.kube.KubeApi`: the one fake the health loop's and
the repair path's scenarios share, so the loop and its repair run together against it.

Nodes, pods, ConfigMaps and PodDisruptionBudgets live in dicts, in the API's JSON shape. What it does as the API
server does it:
- `patch_node` merges maps (labels, annotations, `spec`), replaces lists and scalars, and deletes a key set to null;
- `json_patch_node` applies RFC 6902 `test`, `remove`, `replace` and `add`, all or nothing (`apply_json_patch`);
- `before_write` plays another controller writing a node between the loop's list and its next write of that node;
- label selectors (`key`, `!key`, `key=value`, `key!=value`) on nodes and pods, and the field selectors the loop
  sends on pods (`spec.nodeName=`, `status.phase=` / `!=`); any other field selector is refused, as a 400;
- the Eviction API answers as "API-initiated Eviction" (kubernetes.io) says: 429 while the budget that selects the
  pod allows no disruption, 500 when more than one budget selects it, and otherwise deletes the pod and uses up one
  of its budget's disruptions.
Every write (and every refused eviction) is recorded in `calls`, so a scenario can assert what was done. Helpers
play the scheduler and the kubelet for the loop's check pods (`bind`, `end`, `unschedulable`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from programs.node_health import names
from programs.node_health.kube import KubeError
from tests.json_documents import fresh

CREATED = "2026-11-27T04:00:00Z"


def _selected(labels: dict[str, str], selector: str) -> bool:
    """Whether `labels` match a label selector of equality and existence terms."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, _, value = term.partition("!=")
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, _, value = term.replace("==", "=").partition("=")
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


#: The pod fields the fake selects on, and where each is in the pod.
POD_FIELDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "spec.nodeName": lambda pod: str((pod.get("spec") or {}).get("nodeName") or ""),
    "status.phase": lambda pod: str((pod.get("status") or {}).get("phase") or ""),
}


def _fields_match(pod: dict[str, Any], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        negated = "!=" in term
        field, _, value = term.partition("!=" if negated else "=")
        if field not in POD_FIELDS:
            raise KubeError(f"field selector {term!r} is not supported by the fake", 400)
        if (POD_FIELDS[field](pod) == value) == negated:
            return False
    return True


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """A merge patch of maps: nested maps merged, other values replaced, a null value deletes its key."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = fresh(value)


def apply_json_patch(stored: dict[str, Any], operations: list[dict[str, Any]]) -> dict[str, Any]:
    """The node after an RFC 6902 patch of `test`, `remove`, `replace` and `add` operations, all or nothing, as the API
    server applies them: a failed `test` or a missing element raises KubeError (422) and `stored` is left as it was."""
    node = fresh(stored)
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
                target[index] = fresh(op["value"])
            elif op["op"] == "add":
                target.insert(index, fresh(op["value"]))
        elif op["op"] == "test":
            if target.get(last) != op["value"]:
                raise KubeError(f"test of {op['path']} failed", 422)
        elif op["op"] == "remove":
            del target[last]
        else:
            target[last] = fresh(op["value"])
    return node


class FakeKube:
    """The protocol's calls over in-memory objects."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.config_maps: dict[tuple[str, str], dict[str, str]] = {}
        #: (namespace, name) -> {"selector" (labels), "disruptionsAllowed"}: a PodDisruptionBudget and its status.
        self.budgets: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        #: Called once with the stored node before the next write of a node: another controller's write that lands
        #: after the loop listed the node.
        self.before_write: Callable[[dict[str, Any]], None] | None = None
        #: What the API server stamps as a new pod's creation time (a scenario moves it with its clock).
        self.now = CREATED

    # ------------------------------------------------------------------------------------------------ fixtures
    def add_node(
        self,
        name: str,
        pool: str,
        taints: list[dict[str, str]] | None = None,
        *,
        labels: dict[str, str] | None = None,
        provider_id: str = "",
        conditions: list[dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """A node of `pool` (its `gpu-clusters/pool` label), created at `CREATED`."""
        spec: dict[str, Any] = {"taints": list(taints or [])}
        if provider_id:
            spec["providerID"] = provider_id
        node = {
            "metadata": {
                "name": name,
                "creationTimestamp": CREATED,
                "labels": {names.POOL_LABEL: pool, **(labels or {})},
                "annotations": {},
            },
            "spec": spec,
            "status": {"conditions": list(conditions or [])},
        }
        self.nodes[name] = node
        return node

    def add_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        labels: dict[str, str] | None = None,
        *,
        owner_kind: str = "",
        gpus: int = 0,
        phase: str = "Running",
    ) -> dict[str, Any]:
        """A pod bound to `node`, asking for `gpus` GPUs, owned by an `owner_kind` controller when given."""
        metadata: dict[str, Any] = {
            "namespace": namespace,
            "name": name,
            "creationTimestamp": CREATED,
            "labels": dict(labels or {}),
        }
        if owner_kind:
            metadata["ownerReferences"] = [{"kind": owner_kind, "name": f"{name}-owner"}]
        resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
        pod = {
            "metadata": metadata,
            "spec": {"nodeName": node, "containers": [{"name": "main", "resources": resources}]},
            "status": {"phase": phase},
        }
        self.pods[(namespace, name)] = pod
        return pod

    def add_budget(
        self, namespace: str, name: str, selector: dict[str, str], disruptions_allowed: int
    ) -> dict[str, Any]:
        """A PodDisruptionBudget; the returned dict is its status, which a scenario changes as replicas come up."""
        budget = {"selector": dict(selector), "disruptionsAllowed": disruptions_allowed}
        self.budgets[(namespace, name)] = budget
        return budget

    def pods_on(self, node: str) -> list[str]:
        return sorted(f"{ns}/{name}" for (ns, name), pod in self.pods.items() if pod["spec"].get("nodeName") == node)

    def check_pods(self) -> list[dict[str, Any]]:
        """The loop's check pods (the stored objects: a scenario moves them on as the scheduler and kubelet would)."""
        return [p for (ns, _), p in sorted(self.pods.items()) if ns == names.NODE_HEALTH_NAMESPACE]

    def bind(self, pod: dict[str, Any], started: str) -> None:
        """The scheduler binds the pod to the node of its affinity and the kubelet starts it."""
        node = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ][0]["matchFields"][0]["values"][0]
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running", "startTime": started}

    def end(self, pod: dict[str, Any], exit_code: int, message: str) -> None:
        """The pod's container exits with `exit_code` and its termination message."""
        terminated = {"exitCode": exit_code, "message": message}
        pod["status"] = {
            **pod.get("status", {}),
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "containerStatuses": [{"state": {"terminated": terminated}}],
        }

    def unschedulable(self, pod: dict[str, Any], message: str) -> None:
        pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
        }

    # ----------------------------------------------------------------------------------------------- protocol
    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        return [fresh(n) for n in self.nodes.values() if _selected(_labels(n), label_selector)]

    def _stored_node(self, name: str) -> dict[str, Any]:
        if name not in self.nodes:
            raise KubeError(f"node {name} not found", 404)
        hook, self.before_write = self.before_write, None
        if hook is not None:
            hook(self.nodes[name])
        return self.nodes[name]

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        node = self._stored_node(name)
        self.calls.append(("patch_node", name))
        _merge(node, patch)
        return fresh(node)

    def json_patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        node = apply_json_patch(self._stored_node(name), operations)
        self.calls.append(("json_patch_node", name))
        self.nodes[name] = node
        return fresh(node)

    def list_pods(
        self, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        return [
            fresh(pod)
            for (ns, _), pod in sorted(self.pods.items())
            if (namespace is None or ns == namespace)
            and _selected(_labels(pod), label_selector)
            and _fields_match(pod, field_selector)
        ]

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if (namespace, name) in self.pods:
            raise KubeError(f"pod {namespace}/{name} exists", 409)
        self.calls.append(("create_pod", f"{namespace}/{name}"))
        pod = fresh(body)
        pod["metadata"]["namespace"] = namespace
        pod["metadata"].setdefault("labels", {})
        pod["metadata"].setdefault("creationTimestamp", self.now)
        pod["status"] = {"phase": "Pending"}
        self.pods[(namespace, name)] = pod
        return fresh(pod)

    def delete_pod(self, namespace: str, name: str) -> None:
        if self.pods.pop((namespace, name), None) is None:
            raise KubeError(f"pod {namespace}/{name} not found", 404)
        self.calls.append(("delete_pod", f"{namespace}/{name}"))

    def evict_pod(self, namespace: str, name: str) -> None:
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise KubeError(f"pod {namespace}/{name} not found", 404)
        labels = _labels(pod)
        budgets = [
            budget
            for (ns, _), budget in self.budgets.items()
            if ns == namespace and all(labels.get(k) == v for k, v in budget["selector"].items())
        ]
        if len(budgets) > 1:
            raise KubeError(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.", 500
            )
        if any(b["disruptionsAllowed"] <= 0 for b in budgets):
            self.calls.append(("evict_refused", f"{namespace}/{name}"))
            raise KubeError("Cannot evict pod as it would violate the pod's disruption budget.", 429)
        for budget in budgets:
            budget["disruptionsAllowed"] -= 1
        self.calls.append(("evict_pod", f"{namespace}/{name}"))
        del self.pods[(namespace, name)]

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        data = self.config_maps.get((namespace, name))
        if data is None:
            return None
        return {"metadata": {"namespace": namespace, "name": name}, "data": dict(data)}

    def write_config_map(self, namespace: str, name: str, data: dict[str, str]) -> None:
        self.calls.append(("write_config_map", f"{namespace}/{name}"))
        self.config_maps[(namespace, name)] = dict(data)
