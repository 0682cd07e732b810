"""An in-memory Kubernetes API implementing `programs.node_health.kube.KubeApi`, for the health loop's scenarios.

Nodes, pods, ConfigMaps and PodDisruptionBudgets live in dicts. An eviction is refused with 429 while a budget that
selects the pod allows no disruption (the Eviction API's answer), and otherwise deletes the pod at once and uses up
one of the budget's disruptions. Every write is recorded in `calls`, so a scenario can assert what the loop did.
"""

from __future__ import annotations

import copy
from typing import Any

from programs.node_health.kube import KubeError
from tests.node_health_fake import apply_json_patch


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """A merge patch on maps (what the loop sends: labels, annotations, `spec.unschedulable`, taint lists)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _selected(labels: dict[str, str], selector: str) -> bool:
    """`a=b,c=d` label selectors (equality only)."""
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class FakeKube:
    """The protocol's calls over in-memory objects."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.config_maps: dict[tuple[str, str], dict[str, str]] = {}
        #: name -> {"namespace", "selector" (labels), "disruptionsAllowed"}
        self.budgets: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []

    # ---------------------------------------------------------------------------------------------- test set-up
    def add_node(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        provider_id: str = "",
        conditions: list[dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        node = {
            "metadata": {"name": name, "labels": dict(labels or {}), "annotations": {}},
            "spec": {"providerID": provider_id} if provider_id else {},
            "status": {"conditions": list(conditions or [])},
        }
        self.nodes[name] = node
        return node

    def add_pod(
        self, namespace: str, name: str, node: str, labels: dict[str, str] | None = None, owner_kind: str = ""
    ) -> None:
        metadata: dict[str, Any] = {"namespace": namespace, "name": name, "labels": dict(labels or {})}
        if owner_kind:
            metadata["ownerReferences"] = [{"kind": owner_kind, "name": f"{name}-owner"}]
        pod = {"metadata": metadata, "spec": {"nodeName": node}, "status": {"phase": "Running"}}
        self.pods[(namespace, name)] = pod

    def add_budget(self, name: str, namespace: str, selector: dict[str, str], disruptions_allowed: int) -> None:
        self.budgets[name] = {"namespace": namespace, "selector": selector, "disruptionsAllowed": disruptions_allowed}

    def pods_on(self, node: str) -> list[str]:
        return sorted(f"{ns}/{name}" for (ns, name), pod in self.pods.items() if pod["spec"]["nodeName"] == node)

    # -------------------------------------------------------------------------------------------------- protocol
    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]:
        return [copy.deepcopy(n) for n in self.nodes.values() if _selected(n["metadata"]["labels"], label_selector)]

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        if name not in self.nodes:
            raise KubeError(f"node {name} not found", 404)
        self.calls.append(("patch_node", name))
        _merge(self.nodes[name], patch)
        return copy.deepcopy(self.nodes[name])

    def json_patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        if name not in self.nodes:
            raise KubeError(f"node {name} not found", 404)
        self.calls.append(("json_patch_node", name))
        self.nodes[name] = apply_json_patch(self.nodes[name], operations)
        return copy.deepcopy(self.nodes[name])

    def list_pods(
        self, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        node = field_selector.removeprefix("spec.nodeName=") if field_selector.startswith("spec.nodeName=") else None
        if field_selector and node is None:
            raise KubeError(f"field selector {field_selector!r} is not supported by the fake", 400)
        return [
            copy.deepcopy(pod)
            for (ns, _), pod in sorted(self.pods.items())
            if (namespace is None or ns == namespace)
            and (node is None or pod["spec"]["nodeName"] == node)
            and _selected(pod["metadata"]["labels"], label_selector)
        ]

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["name"]
        if (namespace, name) in self.pods:
            raise KubeError(f"pod {namespace}/{name} exists", 409)
        self.calls.append(("create_pod", f"{namespace}/{name}"))
        pod = copy.deepcopy(body)
        pod["metadata"]["namespace"] = namespace
        pod["metadata"].setdefault("labels", {})
        pod.setdefault("status", {"phase": "Pending"})
        self.pods[(namespace, name)] = pod
        return copy.deepcopy(pod)

    def delete_pod(self, namespace: str, name: str) -> None:
        if self.pods.pop((namespace, name), None) is None:
            raise KubeError(f"pod {namespace}/{name} not found", 404)
        self.calls.append(("delete_pod", f"{namespace}/{name}"))

    def evict_pod(self, namespace: str, name: str) -> None:
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise KubeError(f"pod {namespace}/{name} not found", 404)
        labels = pod["metadata"]["labels"]
        budgets = [
            b
            for b in self.budgets.values()
            if b["namespace"] == namespace and all(labels.get(k) == v for k, v in b["selector"].items())
        ]
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
