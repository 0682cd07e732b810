"""Taints and tolerations, read one way by add-ons, storage drivers, Cilium and the policy pack (pure, no Pulumi).

GPU pools are tainted (`nvidia.com/gpu=true:NoSchedule` unless they say otherwise, `components.planning.pools`),
so every DaemonSet that must run on them (device plugins, CSI node plugins, metrics agents, the CNI on hybrid
nodes) carries tolerations built here from the pools' taints, and the policy pack checks them with the same
matching rule (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from components.planning.pools import PoolPlan


class TaintLike(Protocol):
    """A taint: the config's `Taint` and the policy pack's deployed-pool taint alike."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str: ...
    @property
    def effect(self) -> str: ...


def toleration(taint: TaintLike) -> dict[str, str]:
    """The toleration that matches exactly one taint (key, value and effect)."""
    if taint.value:
        return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
    return {"key": taint.key, "operator": "Exists", "effect": taint.effect}


def key_tolerations(pool_plans: Iterable[PoolPlan]) -> list[dict[str, str]]:
    """Tolerations of every taint key and effect the pools carry, whatever the value: CSI node plugins must run on
    every node a claim's pod may land on. Sorted and without repeats, so a change of pool order changes nothing."""
    seen = sorted({(t.key, t.effect) for pool in pool_plans for t in pool.taints})
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in seen]


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: TaintLike) -> bool:
    """Whether a pod with `tolerations` may run on a node with `taint` (Kubernetes matching): an empty key with
    Exists tolerates everything; otherwise keys match, effects match (or the toleration has none), and the operator
    is Exists or Equal (the default) with the same value."""
    for t in tolerations:
        if not isinstance(t, Mapping):
            continue
        key, operator = t.get("key") or "", t.get("operator") or "Equal"
        effect = t.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        if not key and operator == "Exists":
            return True
        if key == taint.key and (operator == "Exists" or str(t.get("value") or "") == taint.value):
            return True
    return False
