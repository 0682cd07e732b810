"""The GPU-utilization rule of a serving workload, derived once (pure, no Pulumi): the KEDA ScaledObject that applies it
in the cluster and the simulation that replays a utilization series through it come from the same `ServingRule`, so
the documented behaviour, the deployed behaviour and the tests cannot drift apart.

Invariants: the metric averages the workload's own GPUs only; each step is judged on the average of full windows of
one-minute averages at the current replica count; no data reads as "hold", never as idle. How and sources:
docs/design-notes.md#the-serving-autoscaling-rule; the user view: docs/addons.md#serving-autoscaling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from math import ceil
from typing import Any

from components.config import GpuUtilizationScaling, ServingWorkload
from components.planning.mig import advertised_gpus, mig_devices
from components.planning.pools import PoolPlan

#: The metric (DCGM field 203, GPU utilization in %) and the exporter's labels as Prometheus stores them.
GPU_UTILIZATION_METRIC = "DCGM_FI_DEV_GPU_UTIL"
#: The one for MIG devices, which have no field 203: graphics engine activity, a ratio (0..1) ([DCGMMIG]).
MIG_UTILIZATION_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
#: kube-state-metrics: a Deployment's `spec.replicas`, labelled `namespace` and `deployment`.
REPLICAS_METRIC = "kube_deployment_spec_replicas"
#: Its scrape job: kube-prometheus-stack's ServiceMonitor takes `job` from the Service's `app.kubernetes.io/name`
#: ([KPS] 88.5.3 kube-state-metrics ServiceMonitor `jobLabel`). It honors the exporter's labels, so its `namespace`
#: is the Deployment's, not the target's.
REPLICAS_JOB = "kube-state-metrics"
POD_LABEL = "exported_pod"
NAMESPACE_LABEL = "exported_namespace"
#: Resolution of the windows: one sample a minute, as the rule is written ("15 minutes above 85%").
SAMPLE_SECONDS = 60
#: How often KEDA asks Prometheus (its default `pollingInterval`, seconds).
POLLING_SECONDS = 30
HOLD, SCALE_IN = 1, 0


@dataclass(frozen=True)
class ScrapeTarget:
    """The `job` and `namespace` Prometheus gives every sample of one scrape target: its Service's name and
    namespace. A target cannot set them itself (its own `namespace` label is renamed `exported_namespace`) unless its
    ServiceMonitor honors its labels, so selecting them keeps another target's samples out of a query."""

    job: str
    namespace: str

    @property
    def selector(self) -> str:
        return f'job="{self.job}",namespace="{self.namespace}"'


@dataclass(frozen=True)
class ServingRule:
    """The rule with its steps in replicas and its bounds: what the ScaledObject and the simulation both read."""

    scale_out_above_percent: float
    scale_out_after_minutes: int
    scale_out_replicas: int
    scale_in_below_percent: float
    scale_in_after_minutes: int
    scale_in_replicas: int
    cooldown_seconds: int
    min_replicas: int
    max_replicas: int
    replicas_per_node: int
    #: The pool's own node bounds (the simulation's node count stays within them).
    min_nodes: int
    max_nodes: int
    #: The DCGM exporter that reports the pool's GPUs: only its samples count.
    exporter: ScrapeTarget
    #: The replicas hold MIG devices: their utilization is `MIG_UTILIZATION_METRIC`, not `GPU_UTILIZATION_METRIC`.
    mig_devices: bool = False

    @property
    def scale_out_value(self) -> int:
        """What the query returns to scale out: above `max`, so the HPA's policy sets the step."""
        return 1 + self.max_replicas


def replicas_per_node(workload: ServingWorkload, plan: PoolPlan) -> int:
    """Replicas one node holds: the `nvidia.com/gpu` it advertises over the GPUs a replica requests."""
    return advertised_gpus(plan) // workload.gpus_per_replica


def scale_down_gpu_threshold(replicas_per_node: int) -> float | None:
    """cluster-autoscaler's GPU scale-down threshold for a serving pool: just above `(n - 1) / n`, so a node holding
    fewer replicas than it can is a candidate whenever its replicas fit on the other nodes ([CA] FAQ, "How does
    scale-down work?": a node is removed when the GPU requests of its pods are below the threshold and they can move).

    Why: the ReplicaSet removes replicas from the nodes holding the most first, so a scale-in spreads the gaps; at
    the global default of 0.5 a 4-slot node keeping 2 replicas is never removed and the pool keeps paying for the
    nodes the rule gave back. With 1 replica per node a node is either full or empty, and the default already works.
    """
    if replicas_per_node <= 1:
        return None
    return round((replicas_per_node - 1) / replicas_per_node + 0.01, 2)


def with_serving_scale_down(plans: list[PoolPlan], workloads: Sequence[ServingWorkload]) -> list[PoolPlan]:
    """The pool plans, each `aws` pool a serving workload runs on carrying its GPU scale-down threshold (the highest
    when several workloads share a pool), which its Auto Scaling group gets as a per-group autoscaling option."""
    thresholds: dict[str, float] = {}
    by_name = {plan.name: plan for plan in plans}
    for workload in workloads:
        plan = by_name.get(workload.pool)
        if plan is None or plan.kind != "aws" or workload.gpus_per_replica <= 0:
            continue
        threshold = scale_down_gpu_threshold(replicas_per_node(workload, plan))
        if threshold is not None:
            thresholds[plan.name] = max(threshold, thresholds.get(plan.name, 0.0))
    return [
        replace(plan, scale_down_gpu_utilization=thresholds[plan.name]) if plan.name in thresholds else plan
        for plan in plans
    ]


def rule_settings(workload: ServingWorkload, plan: PoolPlan) -> GpuUtilizationScaling:
    """The pool's `scaling.gpuUtilization` on a `gpu-utilization` pool, else the workload's own (or the default)."""
    if plan.kind == "aws" and plan.pool.scaling.mode == "gpu-utilization":
        return plan.pool.scaling.gpu_utilization
    return workload.autoscaling or GpuUtilizationScaling()


def serving_rule(workload: ServingWorkload, plan: PoolPlan, exporter: ScrapeTarget) -> ServingRule:
    """The rule of one serving workload on its pool, read from the pool's DCGM exporter (`exporter`); default max
    replicas: as many as the pool's nodes hold."""
    g = rule_settings(workload, plan)
    per_node = replicas_per_node(workload, plan)
    return ServingRule(
        scale_out_above_percent=g.scale_out_above_percent,
        scale_out_after_minutes=g.scale_out_after_minutes,
        scale_out_replicas=g.scale_out_by * per_node,
        scale_in_below_percent=g.scale_in_below_percent,
        scale_in_after_minutes=g.scale_in_after_minutes,
        scale_in_replicas=g.scale_in_by * per_node,
        cooldown_seconds=g.cooldown_seconds,
        min_replicas=workload.replicas.min,
        max_replicas=workload.replicas.max or plan.max_nodes * per_node,
        replicas_per_node=per_node,
        min_nodes=plan.min_nodes,
        max_nodes=plan.max_nodes,
        exporter=exporter,
        mig_devices=bool(mig_devices(plan)),
    )


# --------------------------------------------------------------------------------------------------- in cluster
#: The characters Kubernetes draws a ReplicaSet's `pod-template-hash` (`rand.SafeEncodeString` of a 32-bit hash: at
#: most 10) and a pod's generated 5-character suffix (`rand.String`) from: no vowels, no 0, 1 or 3 ([K8SRAND]).
NAME_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def deployment_pods(deployment: str) -> str:
    """A regex (PromQL's are anchored) that matches the Deployment's pods only, `<deployment>-<hash>-<suffix>`:
    not a pod of another Deployment named `<deployment>-x`, nor a Job's or bare pod's `<deployment>-<word>-<word>`
    (a weights loader), whose words carry vowels. It still matches the pods of a Job (or a Deployment) named
    `<deployment>-<up to 10 of those characters>` in the same namespace (`chat-x2b` for `chat`): do not name
    one so."""
    return f"{deployment}-[{NAME_SUFFIX_CHARS}]{{1,10}}-[{NAME_SUFFIX_CHARS}]{{5}}"


def utilization_query(namespace: str, deployment: str, exporter: ScrapeTarget, mig: bool = False) -> str:
    """The last minute's GPU utilization in % of the Deployment's pods (`<deployment>-<replicaset hash>-<pod hash>`)
    as the pool's own exporter reports it (its `job` and `namespace`: a sample from any other target, claiming the
    same pod, is not counted): each GPU's average over the minute (every scrape in it, not the last one alone), then
    the average over the GPUs; on MIG devices the graphics engine's active ratio x 100, in parentheses so a subquery
    range applies to the whole. A minute without a sample has no value."""
    pods = deployment_pods(deployment)
    selector = f'{{{exporter.selector},{NAMESPACE_LABEL}="{namespace}",{POD_LABEL}=~"{pods}"}}'
    metric = MIG_UTILIZATION_METRIC if mig else GPU_UTILIZATION_METRIC
    minute = f"avg(avg_over_time({metric}{selector}[{SAMPLE_SECONDS}s]))"
    return f"({minute} * 100)" if mig else minute


def _held(utilization: str, replicas: str, comparison: str, percent: float, minutes: int) -> str:
    """1 when the average of the last `minutes` one-minute averages compares true, the window is full (a value for
    every minute) and the replica count did not change in it, else 0; nothing (no series) when the pods publish no
    utilization or kube-state-metrics is missing, which the query reads as 0. Averaging the window, not requiring
    every minute to pass, keeps one noisy minute from restarting it."""
    window = f"[{minutes}m:1m]"
    return (
        f"((avg_over_time({utilization}{window}) {comparison} bool {percent:g})"
        f" * (count_over_time({utilization}{window}) >= bool {minutes})"
        f" * (max(changes({replicas}[{minutes}m])) == bool 0))"
    )


def scaling_query(rule: ServingRule, namespace: str, deployment: str) -> str:
    """`1 + (1 + max) * out - in`: 1 holds, `1 + max` scales out, 0 scales in (out and in exclude each other, as
    validation keeps the scale-in threshold below the scale-out one). Always one sample without labels."""
    u = utilization_query(namespace, deployment, rule.exporter, rule.mig_devices)
    r = f'{REPLICAS_METRIC}{{job="{REPLICAS_JOB}",namespace="{namespace}",deployment="{deployment}"}}'
    out = _held(u, r, ">", rule.scale_out_above_percent, rule.scale_out_after_minutes)
    scale_in = _held(u, r, "<", rule.scale_in_below_percent, rule.scale_in_after_minutes)
    return f"{HOLD} + {rule.scale_out_value} * ({out} or vector(0)) - ({scale_in} or vector(0))"


def hpa_behavior(rule: ServingRule) -> dict[str, Any]:
    """HPA `behavior` ([HPA]): one policy per direction, steps in replicas per `cooldownSeconds`, no stabilization
    window (the query holds the windows), so a step is exactly the rule's."""

    def direction(replicas: int) -> dict[str, Any]:
        return {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": replicas, "periodSeconds": rule.cooldown_seconds}],
        }

    return {"scaleUp": direction(rule.scale_out_replicas), "scaleDown": direction(rule.scale_in_replicas)}


def scaled_object(rule: ServingRule, namespace: str, deployment: str, prometheus_url: str) -> dict[str, Any]:
    """The `keda.sh/v1alpha1` ScaledObject spec on the Deployment ([KEDA] ScaledObject spec, Prometheus scaler):
    `metricType: Value`, threshold 1, `ignoreNullValues: false` (an empty answer is an error, which holds, never a
    0, which would scale in), no `fallback` (an unreachable Prometheus holds the count)."""
    return {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment},
        "pollingInterval": POLLING_SECONDS,
        "minReplicaCount": rule.min_replicas,
        "maxReplicaCount": rule.max_replicas,
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": hpa_behavior(rule)}},
        "triggers": [
            {
                "type": "prometheus",
                "metricType": "Value",
                "metadata": {
                    "serverAddress": prometheus_url,
                    "query": scaling_query(rule, namespace, deployment),
                    "threshold": "1",
                    "ignoreNullValues": "false",
                },
            }
        ],
    }


# --------------------------------------------------------------------------------------------------- simulation
@dataclass(frozen=True)
class Step:
    """One minute of a simulation: the serving pods' utilization, what the rule decided, replicas and nodes."""

    minute: int
    utilization: float | None
    action: str
    replicas: int
    nodes: int


def _held_for(samples: Sequence[float | None], minutes: int, steady: int | None, test: Any) -> bool:
    """The simulation's reading of `_held`: the last `minutes` samples (one-minute averages) all exist, their average
    passes, and the replica count has been steady (`steady` minutes since it last changed, None: never) for the
    whole window."""
    if len(samples) < minutes or (steady is not None and steady < minutes):
        return False
    window = samples[-minutes:]
    present = [s for s in window if s is not None]
    return len(present) == minutes and bool(test(sum(present) / minutes))


def decide(rule: ServingRule, samples: Sequence[float | None], steady: int | None = None) -> int:
    """The query's value for the samples so far (newest last) with the replica count unchanged for `steady` minutes
    (None: since the start): `HOLD`, `rule.scale_out_value` or `SCALE_IN`."""
    if _held_for(samples, rule.scale_out_after_minutes, steady, lambda s: s > rule.scale_out_above_percent):
        return rule.scale_out_value
    if _held_for(samples, rule.scale_in_after_minutes, steady, lambda s: s < rule.scale_in_below_percent):
        return SCALE_IN
    return HOLD


def hpa_step(rule: ServingRule, value: int, replicas: int, changes: Sequence[tuple[int, int]], now: int) -> int:
    """The HPA's new replica count ([HPACALC]) for a query value, with the behaviour policies over the changes of
    the last `cooldownSeconds` (`(second, delta)` pairs), clamped to min/max replicas."""
    if value == HOLD:
        return replicas
    recent = [delta for at, delta in changes if now - at < rule.cooldown_seconds]
    if value > HOLD:
        added = sum(d for d in recent if d > 0)
        limit = replicas - added + rule.scale_out_replicas
        return max(replicas, min(limit, rule.max_replicas))
    removed = -sum(d for d in recent if d < 0)
    limit = replicas + removed - rule.scale_in_replicas
    return min(replicas, max(limit, rule.min_replicas))


def simulate(
    rule: ServingRule,
    utilization: Sequence[float | None],
    start_replicas: int | None = None,
    scale_down_unneeded_minutes: int = 10,
) -> list[Step]:
    """Replay one utilization sample a minute (None: no data) through the rule; replicas and nodes over time.

    Replicas: the query's value each minute (its windows restart when the replica count changes) and the HPA step
    above. Nodes: cluster-autoscaler adds nodes for
    replicas that do not fit at once (boot time is not modelled) and removes a node once it has been unneeded for
    `scale_down_unneeded_minutes` (its `--scale-down-unneeded-time`); always within the pool's node bounds. The
    utilization is replayed as given: it does not react to the replicas (a what-if on a recorded series)."""
    replicas = max(rule.min_replicas, min(rule.max_replicas, start_replicas or rule.min_replicas))
    nodes = _nodes_for(rule, replicas)
    changes: list[tuple[int, int]] = []
    unneeded_since: int | None = None
    seen: list[float | None] = []
    timeline: list[Step] = []
    for minute, sample in enumerate(utilization):
        seen.append(sample)
        now = minute * SAMPLE_SECONDS
        steady = minute - changes[-1][0] // SAMPLE_SECONDS if changes else None
        value = decide(rule, seen, steady)
        new = hpa_step(rule, value, replicas, changes, now)
        action = "scale-out" if new > replicas else "scale-in" if new < replicas else "hold"
        if new != replicas:
            changes.append((now, new - replicas))
            replicas = new
        needed = _nodes_for(rule, replicas)
        if needed > nodes:
            nodes, unneeded_since = needed, None
        elif needed < nodes:
            unneeded_since = minute if unneeded_since is None else unneeded_since
            if minute - unneeded_since >= scale_down_unneeded_minutes:
                nodes, unneeded_since = needed, None
        else:
            unneeded_since = None
        timeline.append(Step(minute, sample, action, replicas, nodes))
    return timeline


def _nodes_for(rule: ServingRule, replicas: int) -> int:
    return max(rule.min_nodes, min(rule.max_nodes, ceil(replicas / rule.replicas_per_node)))
