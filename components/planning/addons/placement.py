"""Where add-on pods run: facts every add-on shares (pure, no Pulumi).

The namespace system add-ons live in, the system-pool node selector, the CriticalAddonsOnly toleration, the
priority class of node agents, and the helpers that turn pool plans into tolerations and node affinities. Each
add-on module builds its Helm values from these, so the pools' taints and labels are read one way for all of them.
Sources: [NVDP] NVIDIA/k8s-device-plugin chart, [EKSCH] aws/eks-charts aws-efa-k8s-device-plugin
(docs/sources.md: aws-gpu-facts.md §8).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from components import tags
from components.planning.pools import DEFAULT_SYSTEM_TAINT, PoolPlan
from components.planning.tolerations import toleration

#: Lets an add-on onto nodes reserved for cluster-critical pods (the system pool's default taint,
#: `components.planning.pools.DEFAULT_SYSTEM_TAINT`); the NVIDIA and EFA device plugin charts tolerate it by default
#: ([NVDP], [EKSCH] §8), and we keep it when we replace their lists.
CRITICAL_ADDONS_ONLY: dict[str, str] = {"key": DEFAULT_SYSTEM_TAINT.key, "operator": "Exists"}
#: Controllers (cluster-autoscaler, the termination handler, Prometheus) run on the system pool, never on a GPU
#: node that may be scaled away or interrupted; `components.planning.pools.node_labels` sets this label.
SYSTEM_NODE_SELECTOR: dict[str, str] = {tags.ROLE: "system"}
#: Device plugins must not be evicted before the workloads that use their devices.
NODE_CRITICAL = "system-node-critical"
#: The namespace of the add-ons that serve the whole cluster (device plugins, autoscaler, termination handler).
KUBE_SYSTEM = "kube-system"


def tolerations_for(
    plans: Iterable[PoolPlan], critical_addons: bool = True, startup: bool = True
) -> list[dict[str, str]]:
    """Tolerations for every taint of `plans`, each once, in a stable order (plus CriticalAddonsOnly). `startup`:
    the health gate's startup taint too, as node agents need (device plugins, exporters: the check needs them
    running); work passes `startup=False`, so it waits for the gate."""
    found: dict[tuple[str, str, str], dict[str, str]] = {}
    for plan in plans:
        for taint in plan.registration_taints if startup else plan.taints:
            found.setdefault((taint.key, taint.value, taint.effect), toleration(taint))
    out = [found[k] for k in sorted(found)]
    return ([dict(CRITICAL_ADDONS_ONLY)] if critical_addons else []) + out


def gpu_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """Pools whose nodes have NVIDIA GPUs: cloud GPU pools and hybrid (on-prem, e.g. A40) pools alike."""
    return [p for p in plans if p.is_gpu]


def system_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    return [p for p in plans if p.role == "system"]


def node_affinity(key: str, values: Sequence[str], operator: Literal["In", "NotIn"] = "In") -> dict[str, Any]:
    """A required node affinity `key In values` (or `NotIn`), one term."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}
                ]
            }
        }
    }
