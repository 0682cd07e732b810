"""The stack's plan, built once: `plan_stack(spec) -> StackPlan` (pure, no Pulumi).

The flow is `validate(raw) -> StackConfig -> plan_stack() -> StackPlan -> GpuCluster(stack_plan) -> outputs`; the plan
summary, `blueprint verify`'s expectations, the cost estimate and `blueprint simulate` read the same `StackPlan`. The
steps run in the order below, each reading what the earlier ones decided: the pools, then which of them mount Lustre
and how, then the serving workloads' scale-down thresholds, then the add-ons, storage and serving rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.config import StackConfig
from components.planning.addons.monitoring import dcgm_exporter_target
from components.planning.addons.selection import AddonSelection, select_addons
from components.planning.hybrid import hybrid_plans
from components.planning.inference_routes import InferenceRouting, plan_inference_routing
from components.planning.lustre_clients import with_lustre_clients
from components.planning.namespaces import NamespacePlan, plan_namespaces
from components.planning.pools import PoolPlan, plan_each_pool
from components.planning.queues import QueuePlan, plan_queues
from components.planning.serving_autoscaling import (
    ServingRule,
    replicas_per_node,
    serving_rule,
    with_serving_scale_down,
)
from components.planning.serving_policies import QueueRule, queue_rule
from components.planning.storage import storage_summary, with_nfs_labels
from components.planning.training_job import TrainingJobPlan, plan_training_job


@dataclass(frozen=True)
class StackPlan:
    """Everything decided about a stack before any resource is registered."""

    spec: StackConfig
    #: Every pool's plan, in config order, with its Lustre client and serving scale-down threshold set.
    pools: list[PoolPlan]
    #: Which add-ons the stack gets (`auto` switches resolved from the pools and the workloads).
    addons: AddonSelection
    #: One entry per file system (the plan summary's `storage`).
    storage: list[dict[str, Any]]
    #: The GPU-utilization rule's parameters of each serving workload, by workload name (the rule it scales on when
    #: it has no queue rule, and the simulation's seed rule).
    serving: Mapping[str, ServingRule]
    #: The hybrid pools' plans.
    hybrid: list[PoolPlan]
    #: Every namespace the stack creates or installs into, with its Pod Security level and, for a workload
    #: namespace, its GPU quota.
    namespaces: list[NamespacePlan]
    #: The queue rule of each serving workload that scales on vLLM's requests in flight (the default), by name.
    queue_rules: Mapping[str, QueueRule] = field(default_factory=dict)
    #: Kueue's flavors, ClusterQueues and LocalQueues (components.planning.queues); None without Kueue.
    job_queues: QueuePlan | None = None
    #: The reference training job (`workloads.training`), rendered for the user to submit; None without one.
    training: TrainingJobPlan | None = None
    #: The inference Gateway's namespace, routes and clients (components.planning.inference_routes); None when no
    #: serving workload is exposed through it.
    inference_routing: InferenceRouting | None = None

    def pool(self, name: str) -> PoolPlan:
        return next(p for p in self.pools if p.name == name)


def plan_pools(spec: StackConfig) -> list[PoolPlan]:
    """The pool step: each pool planned, then the Lustre clients and NFS node labels, then the serving scale-down
    thresholds."""
    plans = with_nfs_labels(with_lustre_clients(plan_each_pool(spec), spec.storage.lustre), spec.storage.nfs)
    return with_serving_scale_down(plans, spec.workloads.serving)


def serving_rules(spec: StackConfig, pools: Sequence[PoolPlan]) -> dict[str, ServingRule]:
    by_name = {p.name: p for p in pools}
    return {
        w.name: serving_rule(w, by_name[w.pool], dcgm_exporter_target(by_name[w.pool])) for w in spec.workloads.serving
    }


def queue_rules(spec: StackConfig, pools: Sequence[PoolPlan]) -> dict[str, QueueRule]:
    by_name = {p.name: p for p in pools}
    rules = {}
    for w in spec.workloads.serving:
        plan = by_name[w.pool]
        rule = queue_rule(w, plan, replicas_per_node(w, plan))
        if rule is not None:
            rules[w.name] = rule
    return rules


def plan_stack(spec: StackConfig) -> StackPlan:
    """The stack's plan from a validated config."""
    pools = plan_pools(spec)
    addons = select_addons(spec.addons, pools, spec.workloads)
    job_queues = plan_queues(spec, pools, addons)
    topology_flavors = frozenset(f.name for f in job_queues.flavors if f.topology) if job_queues else frozenset()
    return StackPlan(
        spec=spec,
        pools=pools,
        addons=addons,
        storage=storage_summary(spec.storage, spec.network.zones, pools),
        serving=serving_rules(spec, pools),
        hybrid=hybrid_plans(pools),
        namespaces=plan_namespaces(spec, pools, addons),
        queue_rules=queue_rules(spec, pools),
        job_queues=job_queues,
        training=plan_training_job(spec, pools, topology_flavors),
        inference_routing=plan_inference_routing(
            spec.workloads, spec.storage.nfs.kubernetes.namespace if spec.storage.nfs is not None else None
        ),
    )
