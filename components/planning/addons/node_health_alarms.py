"""The health loop's CloudWatch alarms, for Container Insights stacks (pure, no Pulumi): what the Prometheus rules of
`node_monitoring.node_health_rules` say on the other path, read from what the loop publishes
(`programs.node_health.cloudwatch`) with the same thresholds. How to read and tune them: docs/operations.md,
"Detecting failed GPU nodes".

One alarm per condition per stack, on a Metrics Insights query grouped by `Pool`: each pool's series is a contributor
with its own state and notification, and a pool added later is watched without a new alarm ([CWMIALARM]). A query
reads one schema (`SCHEMA(namespace, dimensions...)` matches the metrics with exactly those dimensions, [CWMIQL]), so
each reads the per-pool series the loop publishes and nothing else. An hour-long period is the last hour at each
evaluation ([CWEVALWIN]). A series with no data is no contributor, and no datum is no event (`notBreaching`); the
heartbeat alarm, on one metric, covers a loop that stopped. Limits and cost: docs/operations.md ([CWMILIMITS]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from components.planning.addons.alarms import METRIC_PERIOD_SECONDS, MetricAlarmPlan, QueryAlarmPlan
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
#: The most data a Metrics Insights alarm evaluates: the latest 3 hours ([CWMILIMITS]); every query alarm's period
#: times its evaluation periods stays within it.
METRICS_INSIGHTS_ALARM_SECONDS = 3 * HOUR_SECONDS
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


def identifier(name: str) -> str:
    """A namespace, metric name or dimension name as a query names it: in double quotes, always. A name that is one
    of Metrics Insights' reserved keywords (hundreds of SQL words) must be, or the query is refused, and a quoted
    name that is not one reads the same ([CWMIQL])."""
    return f'"{name}"'


def per_pool_query(function: str, metric: str, where: Mapping[str, str] | None = None) -> str:
    """A Metrics Insights query for one series per pool of this cluster: `function` of `metric` in the schema of
    the cluster, the pool and the `where` dimensions, grouped by pool, highest first (past 500 series a query
    returns the 500 its `ORDER BY` puts first, [CWMILIMITS]: the breaching pools). Names are quoted (`identifier`),
    values in single quotes."""
    where = dict(where or {})
    schema = ", ".join(
        identifier(name)
        for name in [CLOUDWATCH_NAMESPACE, CLOUDWATCH_CLUSTER_DIMENSION, CLOUDWATCH_POOL_DIMENSION, *sorted(where)]
    )
    filters = " AND ".join(
        f"{identifier(name)} = '{value}'"
        for name, value in {CLOUDWATCH_CLUSTER_DIMENSION: CLUSTER_NAME, **where}.items()
    )
    return (
        f"SELECT {function}({identifier(metric)}) FROM SCHEMA({schema}) WHERE {filters} "
        f"GROUP BY {identifier(CLOUDWATCH_POOL_DIMENSION)} ORDER BY {function}() DESC"
    )


def watched_pools(plans: Sequence[PoolPlan]) -> dict[str, list[PoolPlan]]:
    """The pools whose series each alarm reads, by alarm suffix: every pool for repairs held and failed too long,
    the gated ones for gate failures, the EC2 ones for the agent's conditions (one series each, at most)."""
    return {
        "node-health-repairs-held": repaired_pools(plans),
        "node-health-failed-too-long": repaired_pools(plans),
        "node-health-gate-failures": gated_pools(plans),
        "node-health-conditions": condition_pools(plans),
    }


def pool_alarms(plans: Sequence[PoolPlan]) -> list[QueryAlarmPlan]:
    """One alarm per condition, each pool a contributor: repairs held in the last hour (the hourly cap hit: a storm;
    a Capacity Block or the unhealthy threshold holding), a node labelled failed all through
    `FAILED_TOO_LONG_MINUTES` (the `MIN` of the pool's failed count over that period: the loop sends it as 0 when
    none is, so a repair that finished reads 0), gate failures in the last hour (when a pool is gated), an agent
    condition False for `CONDITION_FALSE_MINUTES` (when a pool has EC2 nodes: the `MIN` of the pool's count over
    that period is above 0 only if it never fell to 0). An alarm that would watch no pool is left out."""
    alarms = [
        QueryAlarmPlan(
            suffix="node-health-repairs-held",
            description=(
                "the health loop held back a repair of the pool in the last hour (its hourly cap: a repair storm; or "
                "a Capacity Block or too many unhealthy nodes at once): held nodes stay cordoned "
                "(docs/operations.md, Detecting failed GPU nodes)"
            ),
            query=per_pool_query("SUM", CLOUDWATCH_REPAIRS_HELD),
            comparison="GreaterThanThreshold",
            threshold=0,
            period=HOUR_SECONDS,
            evaluation_periods=1,
            treat_missing_data="notBreaching",
        ),
        QueryAlarmPlan(
            suffix="node-health-failed-too-long",
            description=(
                f"the pool has had a node labelled failed all through the last {FAILED_TOO_LONG_MINUTES} min: its "
                "repair has not finished (held, a drain or SetInstanceHealth failing, or an on-prem server awaiting "
                "its runbook): kubectl get nodes -l gpu-clusters/node-health=failed, and the node's "
                "gpu-clusters/node-health-repair annotation"
            ),
            query=per_pool_query("MIN", CLOUDWATCH_NODES, STATE_FAILED),
            comparison="GreaterThanThreshold",
            threshold=0,
            period=FAILED_TOO_LONG_MINUTES * 60,
            evaluation_periods=1,
            treat_missing_data="notBreaching",
        ),
        QueryAlarmPlan(
            suffix="node-health-gate-failures",
            description=(
                f"{GATE_FAILURES_PER_HOUR} or more new nodes of the pool failed the health gate in the last hour: "
                "suspect the AMI, the launch template or the capacity"
            ),
            query=per_pool_query("SUM", CLOUDWATCH_CHECKS, GATE_FAILED),
            comparison="GreaterThanOrEqualToThreshold",
            threshold=GATE_FAILURES_PER_HOUR,
            period=HOUR_SECONDS,
            evaluation_periods=1,
            treat_missing_data="notBreaching",
        ),
        QueryAlarmPlan(
            suffix="node-health-conditions",
            description=(
                "a node of the pool has reported a node monitoring agent condition False for "
                f"{CONDITION_FALSE_MINUTES} min (AcceleratedHardwareReady: a GPU, NVLink or fabric fault): "
                "blueprint verify --only conditions names the node and the reason"
            ),
            query=per_pool_query("MIN", CLOUDWATCH_CONDITIONS_FALSE),
            comparison="GreaterThanThreshold",
            threshold=0,
            period=CONDITION_FALSE_MINUTES * 60,
            evaluation_periods=1,
            treat_missing_data="notBreaching",
        ),
    ]
    watched = watched_pools(plans)
    return [alarm for alarm in alarms if watched[alarm.suffix]]


def heartbeat_alarm() -> MetricAlarmPlan:
    """The loop's heartbeat missing for `LOOP_ABSENT_MINUTES` (missing data breaches: the loop beats only after a
    finished pass, so a loop that is down and one that cannot finish a pass both page)."""
    return MetricAlarmPlan(
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
