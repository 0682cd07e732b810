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

from components.catalog import serving_capacity
from components.config import ServingWorkload
from components.planning.pools import PoolPlan
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


#: In-flight requests per replica at rated throughput when no benchmark gives it for the model on the GPU: the
#: concurrency of every figure the catalog holds (serving_capacity.yaml), not a measurement for that pair.
UNMEASURED_CONCURRENCY = 50


def in_flight_target(concurrency: int) -> float:
    """Requests in flight per replica the queue rule aims for."""
    return concurrency * IN_FLIGHT_TARGET_SHARE


def benchmark_concurrency(workload: ServingWorkload, plan: PoolPlan) -> int:
    """The catalog's concurrency for the workload's model on the pool's GPU, else `UNMEASURED_CONCURRENCY`."""
    figure = serving_capacity.throughput(workload.model, plan.gpu_model) if plan.gpu_model else None
    return figure.concurrency if figure is not None else UNMEASURED_CONCURRENCY


@dataclass(frozen=True)
class QueueRule:
    """The queue rule of one serving workload: its replica bounds and requests in flight per replica."""

    min_replicas: int
    max_replicas: int
    target_in_flight: float


def queue_rule(workload: ServingWorkload, plan: PoolPlan, replicas_per_node: int) -> QueueRule | None:
    """The workload's queue rule, or None when it scales on GPU utilization (the pool's `gpu-utilization` mode, or
    `autoscaling.rule: gpu-utilization`). Default max replicas: as many as the pool's nodes hold."""
    on_pool_rule = plan.kind == "aws" and plan.pool.scaling.mode == "gpu-utilization"
    settings = workload.autoscaling
    if on_pool_rule or (settings is not None and settings.rule != "queue"):
        return None
    given = settings.target_in_flight_per_replica if settings is not None else None
    return QueueRule(
        min_replicas=workload.replicas.min,
        max_replicas=workload.replicas.max or plan.max_nodes * replicas_per_node,
        target_in_flight=given if given is not None else in_flight_target(benchmark_concurrency(workload, plan)),
    )


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


def scrape_job(namespace: str, deployment: str) -> str:
    """The `job` Prometheus gives the samples of the workload's PodMonitor (named after the Deployment): the
    operator sets it to `<namespace>/<PodMonitor name>` when the PodMonitor sets no `jobLabel` ([PROMOP])."""
    return f"{namespace}/{deployment}"


def in_flight_query(namespace: str, deployment: str) -> str:
    """The trigger's query: requests running and waiting on the Deployment's vLLM servers (`<deployment>-<replicaset
    hash>-<pod hash>`), as the workload's own PodMonitor scrapes them (its `job`: another target claiming the same
    pods is not counted). No ready server publishes them: the query then has no value, which holds."""
    pods = f"{deployment}-[a-z0-9]+-[a-z0-9]+"
    selector = f'{{job="{scrape_job(namespace, deployment)}",namespace="{namespace}",pod=~"{pods}"}}'
    return f"sum({VLLM_RUNNING_METRIC}{selector}) + sum({VLLM_WAITING_METRIC}{selector})"


def queue_scaled_object(rule: QueueRule, namespace: str, deployment: str, prometheus_url: str) -> dict[str, Any]:
    """The `keda.sh/v1alpha1` ScaledObject spec of the queue rule ([KEDA]): KEDA's Prometheus trigger on the
    Deployment's running + waiting requests, `metricType: AverageValue` with the per-replica in-flight target, so the
    HPA asks for `ceil(total / target)` replicas; `ignoreNullValues: false` (an empty answer is an error, which
    holds, never a 0); no `fallback` (an unreachable Prometheus holds the count); no `behavior`, so the HPA's
    defaults apply as simulated. Prometheus scrapes the servers through the workload's PodMonitor."""
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "pollingInterval": POLLING_SECONDS,
        "minReplicaCount": rule.min_replicas,
        "maxReplicaCount": rule.max_replicas,
        "triggers": [
            {
                "type": "prometheus",
                "metricType": "AverageValue",
                "metadata": {
                    "serverAddress": prometheus_url,
                    "query": in_flight_query(namespace, deployment),
                    "threshold": f"{rule.target_in_flight:g}",
                    "ignoreNullValues": "false",
                },
            }
        ],
    }
