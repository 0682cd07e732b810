"""The loop's counters, its gauges (agent conditions False, nodes by health state) and its heartbeat sent to
CloudWatch with PutMetricData, for stacks whose metrics path is Container Insights (no Prometheus scrapes `/metrics`
there); the stack's CloudWatch alarms and dashboard read them. Counters go as the increase since the last publish,
so a Sum over an alarm's period counts events, and a restarted loop (its counters back at zero) sends what it
counted since it started: the first event after a restart is seen. Gauges go as their value. Each series goes with
its labels as dimensions and, for the counters and the conditions when they have labels besides `pool`, once more
summed per pool (dimensions `ClusterName` and `Pool` only): the per-pool series the alarms read. The heartbeat is
one `LoopPasses` datum per finished pass: an alarm on it that treats missing data as breaching pages when the loop
stops. docs/operations.md, "Detecting failed GPU nodes"; the API (at most 1000 metrics and 1 MB a call; the loop
sends 20 a call, well within): CloudWatch API reference, PutMetricData ([CWPUT])."""

from __future__ import annotations

from typing import Any, Protocol

from programs.node_health import aws_calls, names
from programs.node_health.metrics import Labels, Metrics

#: The CloudWatch names of the counters the loop publishes (the Prometheus names carry the metric prefix).
COUNTERS = {
    names.CHECKS_METRIC: names.CLOUDWATCH_CHECKS,
    names.REPAIRS_METRIC: names.CLOUDWATCH_REPAIRS,
    names.REPAIRS_HELD_METRIC: names.CLOUDWATCH_REPAIRS_HELD,
}
#: And of the gauges, sent as their value on every publish.
GAUGES = {names.CONDITIONS_FALSE_METRIC: names.CLOUDWATCH_CONDITIONS_FALSE}
#: Gauges sent by their labels only, with no per-pool sum (the sum of a pool's nodes by state is no alarm's).
STATE_GAUGES = {names.NODES_METRIC: names.CLOUDWATCH_NODES}
HEARTBEAT = names.CLOUDWATCH_HEARTBEAT
#: Data per PutMetricData call: the API's limit was 20 and is now 1000 metrics a call ([CWPUT]); 20 keeps a call far
#: below its 1 MB and works against either.
BATCH = 20


class PutMetricData(Protocol):
    def put_metric_data(self, **kwargs: Any) -> Any: ...


def with_pool_sums(series: dict[Labels, float]) -> dict[Labels, float]:
    """The series, plus per pool the sum of those that carry labels besides `pool` (`Checks` by pool, kind and
    result also goes as `Checks` by pool)."""
    sums: dict[Labels, float] = {}
    for labels, value in series.items():
        pool = tuple(item for item in labels if item[0] == "pool")
        if pool and pool != labels:
            sums[pool] = sums.get(pool, 0.0) + value
    return {**sums, **series}


class CloudWatchPublisher:
    """Sends the deltas of the loop's counters and its gauges, by their labels as dimensions plus the cluster's
    name."""

    def __init__(self, client: PutMetricData, namespace: str, cluster: str) -> None:
        self._client = client
        self._namespace = namespace
        self._cluster = cluster
        self._sent: dict[tuple[str, Labels], float] = {}

    def _datum(self, name: str, labels: Labels, value: float) -> dict[str, Any]:
        dimensions = [{"Name": names.CLOUDWATCH_CLUSTER_DIMENSION, "Value": self._cluster}] + [
            {"Name": key.capitalize(), "Value": label} for key, label in labels
        ]
        return {"MetricName": name, "Dimensions": dimensions, "Value": value, "Unit": "Count"}

    def publish(self, metrics: Metrics) -> None:
        """One PutMetricData call per `BATCH` data; a counter's delta counts as sent once its call succeeded, so a
        call that fails (and raises) leaves its deltas for the next publish and none is sent twice."""
        # each datum with the counter value it sends up to (None: not a counter's)
        data: list[tuple[dict[str, Any], tuple[tuple[str, Labels], float] | None]] = [
            (self._datum(HEARTBEAT, (), 1.0), None)
        ]
        for name, cloudwatch_name in COUNTERS.items():
            for labels, value in sorted(with_pool_sums(metrics.snapshot(name)).items()):
                delta = value - self._sent.get((name, labels), 0.0)
                data.append((self._datum(cloudwatch_name, labels, delta), ((name, labels), value)))
        for name, cloudwatch_name in GAUGES.items():
            for labels, value in sorted(with_pool_sums(metrics.snapshot(name)).items()):
                data.append((self._datum(cloudwatch_name, labels, value), None))
        for name, cloudwatch_name in STATE_GAUGES.items():
            for labels, value in sorted(metrics.snapshot(name).items()):
                data.append((self._datum(cloudwatch_name, labels, value), None))
        for start in range(0, len(data), BATCH):
            batch = data[start : start + BATCH]
            self._client.put_metric_data(Namespace=self._namespace, MetricData=[datum for datum, _ in batch])
            self._sent.update(taken for _, taken in batch if taken is not None)


def from_settings(
    raw: dict[str, Any], region: str | None, client: PutMetricData | None = None
) -> CloudWatchPublisher | None:
    """The publisher the loop's `config.json` asks for (`cloudWatch`: `namespace`, `clusterName`; the stack plans it
    on Container Insights stacks and leaves it out on the others, where only Prometheus reads the loop), with
    `client` or boto3's (credentials from EKS Pod Identity)."""
    target = raw.get("cloudWatch")
    if not target:
        return None
    if client is None:
        # bounded timeouts: an unreachable CloudWatch delays a pass by seconds, never blocks the gate or a repair
        client = aws_calls.client("cloudwatch", region)
    return CloudWatchPublisher(client, str(target["namespace"]), str(target["clusterName"]))
