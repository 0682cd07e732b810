"""The health loop's CloudWatch alarms, for Container Insights stacks (pure, no Pulumi): what the Prometheus rules of
`node_monitoring.node_health_rules` say on the other path, read from what the loop publishes
(`programs.node_health.cloudwatch`) with the same thresholds. How to read and tune them: docs/operations.md,
"Detecting failed GPU nodes".

Every alarm reads the `CLOUDWATCH_NAMESPACE` series of one pool (dimensions `ClusterName` and `Pool`), so each pool
alarms on its own, as the rules group by pool. The counters' alarms sum an hour-long period: alarms evaluate a
sliding window by default, so that is the last hour at each evaluation ([CWEVALWIN]). A counter sends a datum only
while the loop runs; no data is no event (`notBreaching`), and the heartbeat alarm covers a loop that stopped.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.planning.addons.alarms import METRIC_PERIOD_SECONDS, MetricAlarmPlan
from components.planning.addons.monitoring import CLUSTER_NAME
from components.planning.addons.node_monitoring import (
    CONDITION_FALSE_MINUTES,
    FAILED_TOO_LONG_MINUTES,
    GATE_FAILURES_PER_HOUR,
    LOOP_ABSENT_MINUTES,
)
from components.planning.node_health import (
    CLOUDWATCH_CHECKS,
    CLOUDWATCH_CLUSTER_DIMENSION,
    CLOUDWATCH_CONDITIONS_FALSE,
    CLOUDWATCH_HEARTBEAT,
    CLOUDWATCH_KIND_DIMENSION,
    CLOUDWATCH_NAMESPACE,
    CLOUDWATCH_NODES,
    CLOUDWATCH_POOL_DIMENSION,
    CLOUDWATCH_REPAIRS_HELD,
    CLOUDWATCH_RESULT_DIMENSION,
    CLOUDWATCH_STATE_DIMENSION,
)
from components.planning.pools import PoolPlan

#: The counters' window: repairs held and gate failures are counted per hour, as the Prometheus rules count them.
HOUR_SECONDS = 3600
#: The checks series of gate failures: its dimensions besides the cluster and the pool.
GATE_FAILED = {CLOUDWATCH_KIND_DIMENSION: "gate", CLOUDWATCH_RESULT_DIMENSION: "failed"}
#: The nodes series of those whose health label reads `failed`.
STATE_FAILED = {CLOUDWATCH_STATE_DIMENSION: "failed"}


def repaired_pools(plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """Pools whose failed nodes the repair path takes (every pool of its map, `node_health_repair.repair_settings`)."""
    return list(plans)


def gated_pools(plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """Pools whose new nodes pass the health gate (the loop checks them)."""
    return [p for p in plans if p.health_gated]


def condition_pools(plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """Pools of EC2 nodes, where the node monitoring agent sets its conditions (never on on-prem servers,
    `node_monitoring.monitored_gpu_plans`)."""
    return [p for p in plans if p.kind == "aws"]


def _pool(pool: str, **more: str) -> dict[str, str]:
    return {CLOUDWATCH_CLUSTER_DIMENSION: CLUSTER_NAME, CLOUDWATCH_POOL_DIMENSION: pool, **more}


def node_health_alarms(plans: Sequence[PoolPlan]) -> list[MetricAlarmPlan]:
    """Per pool: repairs held in the last hour (the hourly cap hit: a storm; a Capacity Block or the unhealthy
    threshold holding), a node labelled failed all through `FAILED_TOO_LONG_MINUTES` (the `Minimum` of the pool's
    failed count over that period: the loop sends it as 0 when none is, so a repair that finished reads 0), gate
    failures in the last hour (gated pools), an agent condition False for `CONDITION_FALSE_MINUTES` (pools of EC2
    nodes: the `Minimum` of the pool's count over that period is above 0 only if it never fell to 0); and the
    loop's heartbeat missing for `LOOP_ABSENT_MINUTES` (missing data breaches: the loop beats only after a finished
    pass, so a loop that is down and one that cannot finish a pass both page)."""
    alarms: list[MetricAlarmPlan] = []
    for plan in repaired_pools(plans):
        alarms.append(
            MetricAlarmPlan(
                suffix=f"node-health-{plan.name}-repairs-held",
                description=(
                    f"the health loop held back a repair of pool {plan.name} in the last hour (its hourly cap: a "
                    "repair storm; or a Capacity Block or too many unhealthy nodes at once): held nodes stay "
                    "cordoned (docs/operations.md, Detecting failed GPU nodes)"
                ),
                namespace=CLOUDWATCH_NAMESPACE,
                metric_name=CLOUDWATCH_REPAIRS_HELD,
                statistic="Sum",
                comparison="GreaterThanThreshold",
                threshold=0,
                period=HOUR_SECONDS,
                evaluation_periods=1,
                dimensions=_pool(plan.name),
                treat_missing_data="notBreaching",
            )
        )
        alarms.append(
            MetricAlarmPlan(
                suffix=f"node-health-{plan.name}-failed-too-long",
                description=(
                    f"pool {plan.name} has had a node labelled failed all through the last "
                    f"{FAILED_TOO_LONG_MINUTES} min: its repair has not finished (held, a drain or SetInstanceHealth "
                    "failing, or an on-prem server awaiting its runbook): kubectl get nodes -l "
                    "gpu-clusters/node-health=failed, and the node's gpu-clusters/node-health-repair annotation"
                ),
                namespace=CLOUDWATCH_NAMESPACE,
                metric_name=CLOUDWATCH_NODES,
                statistic="Minimum",
                comparison="GreaterThanThreshold",
                threshold=0,
                period=FAILED_TOO_LONG_MINUTES * 60,
                evaluation_periods=1,
                dimensions=_pool(plan.name, **STATE_FAILED),
                treat_missing_data="notBreaching",
            )
        )
    for plan in gated_pools(plans):
        alarms.append(
            MetricAlarmPlan(
                suffix=f"node-health-{plan.name}-gate-failures",
                description=(
                    f"{GATE_FAILURES_PER_HOUR} or more new nodes of pool {plan.name} failed the health gate in the "
                    "last hour: suspect the AMI, the launch template or the capacity"
                ),
                namespace=CLOUDWATCH_NAMESPACE,
                metric_name=CLOUDWATCH_CHECKS,
                statistic="Sum",
                comparison="GreaterThanOrEqualToThreshold",
                threshold=GATE_FAILURES_PER_HOUR,
                period=HOUR_SECONDS,
                evaluation_periods=1,
                dimensions=_pool(plan.name, **GATE_FAILED),
                treat_missing_data="notBreaching",
            )
        )
    for plan in condition_pools(plans):
        alarms.append(
            MetricAlarmPlan(
                suffix=f"node-health-{plan.name}-conditions",
                description=(
                    f"a node of pool {plan.name} has reported a node monitoring agent condition False for "
                    f"{CONDITION_FALSE_MINUTES} min (AcceleratedHardwareReady: a GPU, NVLink or fabric fault): "
                    "blueprint verify --only conditions names the node and the reason"
                ),
                namespace=CLOUDWATCH_NAMESPACE,
                metric_name=CLOUDWATCH_CONDITIONS_FALSE,
                statistic="Minimum",
                comparison="GreaterThanThreshold",
                threshold=0,
                period=CONDITION_FALSE_MINUTES * 60,
                evaluation_periods=1,
                dimensions=_pool(plan.name),
                treat_missing_data="notBreaching",
            )
        )
    alarms.append(
        MetricAlarmPlan(
            suffix="node-health-heartbeat",
            description=(
                f"the health loop has finished no pass for {LOOP_ABSENT_MINUTES} min: new GPU nodes stay tainted and "
                "failed nodes are not repaired (kubectl -n node-health get pods; logs deploy/node-health)"
            ),
            namespace=CLOUDWATCH_NAMESPACE,
            metric_name=CLOUDWATCH_HEARTBEAT,
            statistic="Sum",
            comparison="LessThanThreshold",
            threshold=1,
            period=METRIC_PERIOD_SECONDS,
            evaluation_periods=LOOP_ABSENT_MINUTES,
            dimensions={CLOUDWATCH_CLUSTER_DIMENSION: CLUSTER_NAME},
            treat_missing_data="breaching",
        )
    )
    return alarms
