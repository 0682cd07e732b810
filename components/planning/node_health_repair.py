"""The repair path of the node health loop, planned (pure, no Pulumi): the settings the loop reads from its
ConfigMap (which pool a node belongs to, what kind, its Capacity Block, its hourly cap) and the IAM policy of the
loop's Pod Identity role.

The loop (`programs.node_health.repair`) cannot import the project; this module writes what it needs as JSON under
`REPAIR_CONFIG_KEY`, and a test holds the two sides to the same keys. Why each guard exists and how to tune it:
docs/operations.md, "Repair"; the role: docs/security.md, "The health loop's role".
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from datetime import timedelta
from typing import Any

from components import tags
from components.planning.drain import hook_timeout_seconds
from components.planning.pools import PoolPlan
from components.planning.reservations import scale_in_lead

#: The key of the loop's ConfigMap holding these settings (`programs.node_health.repair.CONFIG_KEY`).
REPAIR_CONFIG_KEY = "repair.json"
#: The name of the loop's Pod Identity role (and its association) in `ClusterContext.pod_identity_role`.
ROLE_NAME = "node-health"
#: The one call that changes anything: mark an instance Unhealthy, so its Auto Scaling group terminates it (its
#: terminate lifecycle hook still runs) and launches a replacement ([ASGHEALTH]). The Service Authorization
#: Reference lists it on the `autoScalingGroup` resource with the `aws:ResourceTag/${TagKey}` and
#: `autoscaling:ResourceTag/${TagKey}` condition keys ([SARASG]), so the grant is held to groups tagged with this
#: cluster.
REPLACE_ACTIONS: tuple[str, ...] = ("autoscaling:SetInstanceHealth",)
#: Reads: a Capacity Block's state, free count and end ([EC2CB]). DescribeCapacityReservations takes no resource
#: ARN (a Describe call lists across the account; [SAREC2] gives it no resource type), so it is granted on `*`.
DESCRIBE_ACTIONS: tuple[str, ...] = ("ec2:DescribeCapacityReservations",)
#: How long a replacement must have in a Capacity Block, after the pool's own scale-in lead, to be worth taking a
#: node off it: a policy choice, not an AWS figure (a replacement waits out the terminated instance's clean-up,
#: "several minutes" [EC2CB], then boots, joins and runs its gate before it takes work).
REPLACEMENT_WORTH = timedelta(hours=1)
#: How long an agent condition stays `False` before the loop acts: EKS node auto-repair's "Repair after" column,
#: 10 minutes for AcceleratedHardwareReady and 30 for the agent's other conditions ([EKSREPAIR]), so a transient
#: condition (an agent or DCGM restart) clears before anything is cordoned. `default` is the others' wait.
CONDITION_WAITS = {"AcceleratedHardwareReady": timedelta(minutes=10), "default": timedelta(minutes=30)}
#: Repairs of a pool stop while more than this percentage of its nodes is unhealthy at once: EKS node auto-repair's
#: default for managed node groups (more than 20 % of a group of more than five nodes, [EKSREPAIR]). A fault that
#: broad is the stack's (a driver, a DaemonSet, the network), and replacing the pool would not fix it.
MAX_UNHEALTHY_PERCENT = 20


#: Publishing the loop's metrics on a Container Insights stack. PutMetricData takes no resource ARN, so it is granted
#: on `*` and held to the loop's namespace by the `cloudwatch:namespace` condition key ([CWNSKEY]).
PUBLISH_ACTIONS: tuple[str, ...] = ("cloudwatch:PutMetricData",)


def repair_policy(cluster_name: str, metrics_namespace: str | None = None) -> dict[str, Any]:
    """SetInstanceHealth on this cluster's Auto Scaling groups only (they carry `gpu-clusters/cluster`, like every
    resource of the stack), DescribeCapacityReservations on `*`, and, when the loop publishes to CloudWatch,
    PutMetricData into `metrics_namespace` only; nothing else."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ReplaceOwnNodes",
            "Effect": "Allow",
            "Action": list(REPLACE_ACTIONS),
            "Resource": "*",
            "Condition": {"StringEquals": {f"aws:ResourceTag/{tags.CLUSTER}": cluster_name}},
        },
        {"Sid": "ReadCapacityBlocks", "Effect": "Allow", "Action": list(DESCRIBE_ACTIONS), "Resource": "*"},
    ]
    if metrics_namespace is not None:
        statements.append(
            {
                "Sid": "PublishHealthMetrics",
                "Effect": "Allow",
                "Action": list(PUBLISH_ACTIONS),
                "Resource": "*",
                "Condition": {"StringEquals": {"cloudwatch:namespace": metrics_namespace}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def capacity_block_lead(drain_timeout_seconds: int) -> timedelta:
    """How long before a block's end the loop stops replacing its nodes: the pool's scale-in lead (the block's
    nodes are drained and gone by then, components.planning.reservations) plus `REPLACEMENT_WORTH`."""
    return scale_in_lead(hook_timeout_seconds(drain_timeout_seconds)) + REPLACEMENT_WORTH


def pool_settings(plan: PoolPlan, managed: bool) -> dict[str, Any]:
    """One pool in the loop's map."""
    capacity = plan.pool.capacity
    block = capacity.reservation_id if plan.kind == "aws" and capacity.type == "capacity-block" else None
    # A managed pool's own thresholds (given for EKS node auto-repair) hold the loop's repairs of it too.
    eks = plan.pool.repair.eks if managed else None
    threshold = eks.max_unhealthy if eks is not None else None
    count = threshold.count if threshold is not None else None
    percent = threshold.percentage if threshold is not None else None
    return {
        "kind": plan.kind,
        "management": "managed" if managed else "self-managed",
        "capacityBlockId": block,
        "maxRepairsPerHour": plan.pool.repair.max_per_hour,
        "maxUnhealthy": count,
        "maxUnhealthyPercent": percent if (count or percent) else MAX_UNHEALTHY_PERCENT,
    }


def repair_settings(
    plans: Iterable[PoolPlan], drain_timeout_seconds: int, managed_pools: Collection[str] = ()
) -> dict[str, Any]:
    """Everything the repair path reads: the pools by name (a node's `gpu-clusters/pool` label), the drain deadline
    (the node termination handler's, `addons.nodeTerminationHandler.drainTimeoutSeconds`, so a repair drains as long
    as a scale-in does) and the Capacity Block lead. `managed_pools` names the pools that are EKS managed node
    groups, whose agent conditions EKS node auto-repair acts on. The condition waits and the unhealthy threshold
    are EKS node auto-repair's defaults (`CONDITION_WAITS`, `MAX_UNHEALTHY_PERCENT`)."""
    return {
        "pools": {p.name: pool_settings(p, p.name in managed_pools) for p in plans},
        "drainTimeoutSeconds": drain_timeout_seconds,
        "capacityBlockLeadSeconds": int(capacity_block_lead(drain_timeout_seconds).total_seconds()),
        "conditionWaitSeconds": {k: int(v.total_seconds()) for k, v in CONDITION_WAITS.items()},
    }


def repair_config_data(
    plans: Iterable[PoolPlan], drain_timeout_seconds: int, managed_pools: Collection[str] = ()
) -> dict[str, str]:
    """The ConfigMap entry (`REPAIR_CONFIG_KEY`) the loop's Deployment mounts."""
    settings = repair_settings(plans, drain_timeout_seconds, managed_pools)
    return {REPAIR_CONFIG_KEY: json.dumps(settings, sort_keys=True)}
