"""KEDA: the event autoscaler that turns each serving workload's GPU-utilization rule into its HPA (pure, no
Pulumi).

Why KEDA and not an HPA with prometheus-adapter: the rule is a band with two windows ("above 85% for 15 minutes",
"below 30% for 30 minutes"), which one PromQL query per workload can state and KEDA's Prometheus scaler can read as
it is ([KEDA] Prometheus scaler), next to the HPA `behavior` KEDA passes through unchanged ([KEDA] controllers/keda
/hpa.go). prometheus-adapter would need a cluster-wide rule file naming every workload's query and owns the
`external.metrics.k8s.io` API for the whole cluster, as KEDA does; KEDA needs no AWS permission (it reads the
in-cluster Prometheus) and its ScaledObject lives with the workload.

Placement ([KEDA] chart 2.20.2 templates/manager/deployment.yaml, metrics-server/deployment.yaml,
webhooks/deployment.yaml: each takes the root `nodeSelector` and `tolerations` when its own are empty): the
operator, the metrics API server and the admission webhooks run on the system pool. The control plane reaches the
metrics API server on 6443 and the webhooks on 9443 (chart `service.portHttpsTarget`, `webhooks.port` default), both
inside the node security group's 1025-65535 rule from the control plane.
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
