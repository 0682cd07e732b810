"""KEDA: the event autoscaler that turns each serving workload's GPU-utilization rule into its HPA (pure, no
Pulumi).

Invariant: the operator, the metrics API server and the webhooks run on the system pool ([KEDA] chart 2.20.2: each
takes the root `nodeSelector` and `tolerations`); the control plane reaches them on 6443 and 9443, inside the node
security group's 1025-65535 rule. Why KEDA and not prometheus-adapter: docs/addons.md#serving-autoscaling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.pools import PoolPlan

KEDA_RELEASE = "keda"
KEDA_NAMESPACE = "keda"


def keda_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Helm values: every KEDA pod on the system pool, tolerating its CriticalAddonsOnly taint."""
    return {"nodeSelector": dict(SYSTEM_NODE_SELECTOR), "tolerations": tolerations_for(system_plans(plans))}
