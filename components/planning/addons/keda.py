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


#: Secret reads of the operator and the metrics API server limited to KEDA's own namespace ([KEDA] chart 2.20.2,
#: values.yaml `permissions.operator.restrict.secret`: "KEDA operator will be able to read only secrets in
#: {{ .Release.Namespace }} namespace"; templates/manager/clusterrole.yaml drops the cluster-wide `secrets`
#: list/watch rule and minimal-rbac.yaml grants them in the release namespace instead; both set
#: KEDA_RESTRICT_SECRET_ACCESS). The stack's triggers read Prometheus without credentials, so nothing needs more.
RESTRICTED_SECRET_ACCESS: dict[str, Any] = {
    "operator": {"restrict": {"secret": True}},
    "metricServer": {"restrict": {"secret": True}},
}


def keda_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Helm values: every KEDA pod on the system pool, tolerating its CriticalAddonsOnly taint; Secret reads only in
    KEDA's namespace, so a compromised operator cannot read every Secret of the cluster."""
    return {
        "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
        "tolerations": tolerations_for(system_plans(plans)),
        "permissions": RESTRICTED_SECRET_ACCESS,
    }
