"""The Kubernetes API calls the health loop makes, as a protocol, so the gate and repair code run against a fake API
in tests and against the cluster through the in-cluster adapter. Objects are dicts in the API's JSON shape."""

from __future__ import annotations

from typing import Any, Protocol


class KubeError(Exception):
    """The API refused a call or could not be reached; `status` is the HTTP status (0 when unreachable)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class KubeApi(Protocol):
    """The calls the loop makes."""

    def list_nodes(self, label_selector: str = "") -> list[dict[str, Any]]: ...
    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """A strategic-merge patch of the node (labels, annotations, `spec.unschedulable`, `spec.taints`)."""
        ...

    def json_patch_node(self, name: str, operations: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON patch (RFC 6902) of the node: how the loop edits `spec.taints`, a list with no merge key, so a
        `test` operation guards each change; a failed `test` raises KubeError and changes nothing."""
        ...

    def list_pods(
        self, namespace: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]: ...
    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...
    def delete_pod(self, namespace: str, name: str) -> None: ...
    def evict_pod(self, namespace: str, name: str) -> None:
        """The Eviction API: honours PodDisruptionBudgets; a refusal raises KubeError with status 429."""
        ...

    def read_config_map(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def write_config_map(self, namespace: str, name: str, data: dict[str, str]) -> None: ...
