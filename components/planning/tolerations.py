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
    seen = sorted({(t.key, t.effect) for pool in pool_plans for t in pool.registration_taints})
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


#: The NoExecute taints the node lifecycle controller puts on a node whose kubelet stops reporting (Ready Unknown:
#: `unreachable`, a site-link outage) or reports NotReady (`not-ready`). Kubernetes gives every pod that does not
#: tolerate them a toleration of `KUBERNETES_DEFAULT_TOLERATION_SECONDS` (the API server's
#: `default-unreachable-toleration-seconds` and `default-not-ready-toleration-seconds`, 300 on EKS and not
#: configurable there: EKS Best Practices, "Kubernetes pod failover through network disconnections").
NODE_UNREACHABLE = "node.kubernetes.io/unreachable"
NODE_NOT_READY = "node.kubernetes.io/not-ready"
KUBERNETES_DEFAULT_TOLERATION_SECONDS = 300
#: How long pods that only hybrid nodes can run stay bound through an outage, unless the pool says otherwise
#: (`nodePools[].unreachableTolerationSeconds`): AWS's hybrid nodes pod-failover guidance ("Tune Kubernetes pod failover
#: behavior", option 2) sets 1800 (30 minutes) for the unreachable taint in its example (docs/sources.md [EKSBPHYB]).
DEFAULT_UNREACHABLE_TOLERATION_SECONDS = 1800


def unreachable_toleration_seconds(plan: PoolPlan) -> int:
    """The pool's outage toleration: its own setting, else the default (hybrid pools; EC2 pools keep Kubernetes')."""
    seconds = plan.pool.unreachable_toleration_seconds
    return DEFAULT_UNREACHABLE_TOLERATION_SECONDS if seconds is None else seconds


def outage_tolerations(seconds: int, keys: Iterable[str] = (NODE_UNREACHABLE, NODE_NOT_READY)) -> list[dict[str, Any]]:
    """NoExecute tolerations of the node-health taints for `seconds`: a pod keeps running on a server the control
    plane cannot reach for that long before it is evicted. Stated on the pod, they replace the 300 s the API server
    would add (its DefaultTolerationSeconds admission adds a toleration only for a taint the pod does not tolerate)."""
    return [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds} for key in keys]


def hybrid_outage_tolerations(
    pool_plans: Iterable[PoolPlan], keys: Iterable[str] = (NODE_UNREACHABLE, NODE_NOT_READY)
) -> list[dict[str, Any]]:
    """Outage tolerations of pods that serve every hybrid pool (the on-prem CoreDNS replica, the Cilium operator):
    the longest of the pools' settings, so they outlast the workloads they serve. None without hybrid pools."""
    seconds = [unreachable_toleration_seconds(p) for p in pool_plans if p.kind == "hybrid"]
    return outage_tolerations(max(seconds), keys) if seconds else []
