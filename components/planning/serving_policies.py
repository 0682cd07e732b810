"""The two scaling rules the seed rule is compared with (pure, no Pulumi): a plain HPA on the serving pods' GPU
utilization and a KEDA trigger on vLLM's own request counts. Each is written as what Kubernetes' HPA controller does
with its metric ([HPA], [HPACALC]): `desired = ceil(current * metric / target)` (for an `AverageValue` external
metric `ceil(metric / target)`), no change while the ratio is within the 10% tolerance, scale-up limited to
`max(2 x current, 4)` replicas per 15 s sync period ([HPACTL] `calculateScaleUpLimit`) and scale-down to the
highest recommendation of the last 300 s, the controller's defaults when `behavior` is not set. The comparison:
docs/serving-simulation.md; the seed rule: serving_autoscaling.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import ceil
from typing import Any

from components.planning.serving_autoscaling import POLLING_SECONDS

#: vLLM's Prometheus gauges per server ([VLLMMETRICS]): requests in the running batch and requests waiting for it.
VLLM_RUNNING_METRIC = "vllm:num_requests_running"
VLLM_WAITING_METRIC = "vllm:num_requests_waiting"
#: `--horizontal-pod-autoscaler-tolerance` default ([HPA]).
HPA_TOLERANCE = 0.1
#: Default scale-down stabilization window, seconds (`--horizontal-pod-autoscaler-downscale-stabilization`, [HPA]).
HPA_DOWNSCALE_STABILIZATION_SECONDS = 300
#: Scale-up without `behavior`: each sync may raise the count to at most `max(2 x current, 4)`
#: ([HPACTL] pkg/controller/podautoscaler/horizontal.go `scaleUpLimitFactor`, `scaleUpLimitMinimum`), once per
#: `--horizontal-pod-autoscaler-sync-period`, 15 s by default ([HPA]).
HPA_SCALE_UP_LIMIT_FACTOR = 2
HPA_SCALE_UP_LIMIT_MINIMUM = 4
HPA_SYNC_PERIOD_SECONDS = 15
#: The plain HPA's utilization target: our choice for the comparison (below the seed rule's 85% scale-out
#: threshold, so it reacts before the seed rule does), not an upstream default.
UTILIZATION_TARGET_PERCENT = 70.0
#: The queue rule's target: requests in flight per replica at this share of the benchmark's concurrency (the
#: concurrency at which one replica delivers its rated throughput), the same headroom as the utilization target.
IN_FLIGHT_TARGET_SHARE = UTILIZATION_TARGET_PERCENT / 100


def in_flight_target(concurrency: int) -> float:
    """Requests in flight per replica the queue rule aims for."""
    return concurrency * IN_FLIGHT_TARGET_SHARE


@dataclass(frozen=True)
class Bounds:
    min_replicas: int
    max_replicas: int

    def clamp(self, replicas: int) -> int:
        return max(self.min_replicas, min(self.max_replicas, replicas))


def within_tolerance(ratio: float) -> bool:
    """The HPA keeps the current count while `|ratio - 1| <= tolerance` ([HPACALC])."""
    return abs(ratio - 1.0) <= HPA_TOLERANCE


def scale_up_limit(current: int, seconds: int = 60) -> int:
    """The most replicas the controller's default limit allows `seconds` after `current`: `max(2 x n, 4)` at each
    15 s sync (a per-minute step is four syncs)."""
    most = current
    for _ in range(max(1, seconds // HPA_SYNC_PERIOD_SECONDS)):
        most = max(HPA_SCALE_UP_LIMIT_FACTOR * most, HPA_SCALE_UP_LIMIT_MINIMUM)
    return most


def stabilized(current: int, recommendation: int, recent: Sequence[int], bounds: Bounds, seconds: int = 60) -> int:
    """The new count `seconds` after this recommendation: scale-up limited by the controller's default limit,
    scale-down to the highest recommendation within the stabilization window (`recent` holds the window's earlier
    recommendations)."""
    if recommendation > current:
        return bounds.clamp(min(recommendation, scale_up_limit(current, seconds)))
    return bounds.clamp(min(current, max([recommendation, *recent])))


def utilization_recommendation(current: int, utilization: float | None, target: float) -> int:
    """Plain HPA on the pods' average GPU utilization (a `Utilization`-like average target): hold on no data."""
    if utilization is None or current == 0:
        return current
    ratio = utilization / target
    return current if within_tolerance(ratio) else ceil(current * ratio)


def in_flight_recommendation(current: int, in_flight: float | None, per_replica: float) -> int:
    """KEDA's Prometheus trigger with `metricType: AverageValue` on `sum(running) + sum(waiting)`: the HPA asks for
    `ceil(total / per_replica)` replicas, holding within the tolerance and on no data (`ignoreNullValues: false`)."""
    if in_flight is None:
        return current
    if current > 0 and within_tolerance(in_flight / (per_replica * current)):
        return current
    return ceil(in_flight / per_replica)


def in_flight_query(namespace: str, deployment: str) -> str:
    """The trigger's query: requests running and waiting on the Deployment's vLLM servers."""
    selector = f'{{namespace="{namespace}",pod=~"{deployment}-[a-z0-9]+-[a-z0-9]+"}}'
    return f"sum({VLLM_RUNNING_METRIC}{selector}) + sum({VLLM_WAITING_METRIC}{selector})"


def queue_scaled_object(
    namespace: str,
    deployment: str,
    prometheus_url: str,
    min_replicas: int,
    max_replicas: int,
    concurrency: int,
) -> dict[str, Any]:
    """The `keda.sh/v1alpha1` ScaledObject spec of the queue rule ([KEDA]): KEDA's Prometheus trigger on the
    Deployment's running + waiting requests, `metricType: AverageValue` with the per-replica in-flight target, so the
    HPA asks for `ceil(total / target)` replicas; `ignoreNullValues: false` (no ready server: an error, which holds);
    no `behavior`, so the HPA's defaults apply as simulated. Needs Prometheus to scrape the vLLM servers' `/metrics`."""
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "pollingInterval": POLLING_SECONDS,
        "minReplicaCount": min_replicas,
        "maxReplicaCount": max_replicas,
        "triggers": [
            {
                "type": "prometheus",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": prometheus_url,
                    "query": in_flight_query(namespace, deployment),
                    "threshold": f"{in_flight_target(concurrency):g}",
                    "ignoreNullValues": "false",
                },
            }
        ],
    }
