"""The loop's counters and heartbeat sent to CloudWatch with PutMetricData, for stacks whose metrics path is Container
Insights (no Prometheus scrapes `/metrics` there). Counters go as the increase since the last publish, so a Sum over
an alarm's period counts events, and a restarted loop (its counters back at zero) sends what it counted since it
started: the first event after a restart is seen. The heartbeat is one `LoopPasses` datum per finished pass: an alarm
on it that treats missing data as breaching pages when the loop stops. docs/operations.md, "Detecting failed GPU
nodes"; the API and its 20-datum batches: CloudWatch API reference, PutMetricData."""

from __future__ import annotations

from typing import Any, Protocol

from programs.node_health import names
from programs.node_health.metrics import Labels, Metrics

#: The CloudWatch names of the counters the loop publishes (the Prometheus names carry the metric prefix).
COUNTERS = {
    names.CHECKS_METRIC: "Checks",
    names.REPAIRS_METRIC: "Repairs",
    names.REPAIRS_HELD_METRIC: "RepairsHeld",
}
HEARTBEAT = "LoopPasses"
#: Data per PutMetricData call (the API's batch limit as documented for the datum list).
BATCH = 20


class PutMetricData(Protocol):
    def put_metric_data(self, **kwargs: Any) -> Any: ...


class CloudWatchPublisher:
    """Sends the deltas of the loop's counters, by their labels as dimensions plus the cluster's name."""

    def __init__(self, client: PutMetricData, namespace: str, cluster: str) -> None:
        self._client = client
        self._namespace = namespace
        self._cluster = cluster
        self._sent: dict[tuple[str, Labels], float] = {}

    def _dimensions(self, labels: Labels) -> list[dict[str, str]]:
        return [{"Name": "ClusterName", "Value": self._cluster}] + [
            {"Name": key.capitalize(), "Value": value} for key, value in labels
        ]

    def publish(self, metrics: Metrics) -> None:
        data: list[dict[str, Any]] = [
            {"MetricName": HEARTBEAT, "Dimensions": self._dimensions(()), "Value": 1.0, "Unit": "Count"}
        ]
        taken: dict[tuple[str, Labels], float] = {}
        for name, cloudwatch_name in COUNTERS.items():
            for labels, value in sorted(metrics.snapshot(name).items()):
                delta = value - self._sent.get((name, labels), 0.0)
                taken[(name, labels)] = value
                data.append(
                    {
                        "MetricName": cloudwatch_name,
                        "Dimensions": self._dimensions(labels),
                        "Value": delta,
                        "Unit": "Count",
                    }
                )
        for start in range(0, len(data), BATCH):
            self._client.put_metric_data(Namespace=self._namespace, MetricData=data[start : start + BATCH])
        self._sent.update(taken)


def from_settings(raw: dict[str, Any], region: str | None) -> CloudWatchPublisher | None:
    """The publisher the loop's `config.json` asks for (`cloudWatch`: `namespace`, `clusterName`; absent on stacks
    whose Prometheus scrapes the loop), with boto3's client (credentials from EKS Pod Identity)."""
    target = raw.get("cloudWatch")
    if not target:
        return None
    import boto3

    return CloudWatchPublisher(
        boto3.client("cloudwatch", region_name=region), str(target["namespace"]), str(target["clusterName"])
    )
