"""Rules on `workloads.queues`, Kueue's ClusterQueues (components.planning.queues, docs/training.md#queues-and-quotas):
each queue is named once, takes workload namespaces no other queue takes, admits onto GPU pools of the stack, and
asks for no more GPUs or EFA devices than those pools hold at their maximum size, over every queue."""

from __future__ import annotations

from collections.abc import Iterator

from components.config import ClusterQueueConfig, PoolQuota, QueuesConfig, StorageConfig
from components.errors import Problem
from components.planning.pools import PoolPlan
from components.planning.queues import pool_capacity, queue_pools
from components.planning.tenants import workload_namespace_names
from components.validation.namespaces import _plans
from components.validation.parse import Parsed, did_you_mean, shown_text

QUEUES = "workloads.queues"


def _queues(p: Parsed) -> QueuesConfig | None:
    return p.workloads.queues if p.workloads is not None else None


def _configured(p: Parsed) -> list[tuple[str, ClusterQueueConfig]]:
    queues = _queues(p)
    if queues is None:
        return []
    return [(f"{QUEUES}.clusterQueues[{i}]", c) for i, c in enumerate(queues.cluster_queues)]


def queues_need_kueue(p: Parsed) -> Iterator[Problem]:
    """`workloads.queues` configures Kueue's queues, so it cannot go with `addons.kueue.enabled: off`."""
    if _queues(p) is not None and p.addons is not None and p.addons.kueue.enabled == "off":
        yield Problem(
            "addons.kueue.enabled",
            "off, but workloads.queues configures Kueue's queues; set it to `auto` or `on`, or leave workloads.queues "
            "out",
        )


def cluster_queues_are_named_once(p: Parsed) -> Iterator[Problem]:
    """Each ClusterQueue name is used once (Kueue names are cluster-wide), and at most one ClusterQueue leaves its
    `namespaces` out (it takes the namespaces no other names; two cannot both)."""
    seen: dict[str, str] = {}
    open_queues: list[str] = []
    for path, config in _configured(p):
        first = seen.get(config.name)
        if first is not None:
            yield Problem(f"{path}.name", f"{config.name} names {first} already; give each ClusterQueue its own name")
        seen.setdefault(config.name, path)
        if config.namespaces is None:
            open_queues.append(path)
    for path in open_queues[1:]:
        yield Problem(
            f"{path}.namespaces",
            f"missing, and {open_queues[0]} leaves its namespaces out too; only one ClusterQueue can take the "
            "namespaces no other names: list this one's",
        )


def queue_namespaces_are_workload_namespaces(p: Parsed) -> Iterator[Problem]:
    """A ClusterQueue's namespaces are workload namespaces of the stack (the claim namespaces of `storage` and the
    team namespaces of `workloads.namespaces`, where the stack creates a LocalQueue), each in one ClusterQueue only
    (its LocalQueue points to one), and every workload namespace is in one (or it would get no LocalQueue)."""
    configured = _configured(p)
    if not configured or p.damaged_at("storage", "workloads.namespaces"):
        return
    known = workload_namespace_names(p.storage or StorageConfig(), p.workloads) if p.workloads is not None else []
    owner: dict[str, str] = {}
    for path, config in configured:
        for j, namespace in enumerate(config.namespaces or []):
            where = f"{path}.namespaces[{j}]"
            if namespace not in known:
                yield Problem(
                    where,
                    f"{shown_text(namespace)} is not a workload namespace of this stack"
                    f"{did_you_mean(namespace, known)}; a ClusterQueue takes the claim namespaces of `storage` and "
                    f"the team namespaces of `workloads.namespaces` ({', '.join(known) or 'none here'})",
                )
            elif namespace in owner:
                yield Problem(
                    where,
                    f"{namespace} is in ClusterQueue {owner[namespace]} already; a namespace's LocalQueue points to "
                    "one ClusterQueue: list it once",
                )
            else:
                owner[namespace] = config.name
    if all(config.namespaces is not None for _, config in configured):
        left = [ns for ns in known if ns not in owner]
        if left:
            yield Problem(
                f"{QUEUES}.clusterQueues",
                f"{', '.join(left)} {'is' if len(left) == 1 else 'are'} in no ClusterQueue, so jobs there could not "
                "be queued; add them to one, or leave one ClusterQueue's `namespaces` out to give it every namespace "
                "no other names",
            )


def queue_pools_are_gpu_pools(p: Parsed) -> Iterator[Problem]:
    """A ClusterQueue's pools (and the pools its `quotas` name) are GPU pools of the stack it admits onto: only
    their GPUs make up its quota, one ResourceFlavor each."""
    configured = _configured(p)
    if not configured or not p.pools_complete:
        return
    plans = _plans(p)
    if plans is None:
        return
    gpus = {plan.name: plan.is_gpu for plan in plans}
    with_gpus = [name for name, has in gpus.items() if has]
    for path, config in configured:
        for j, name in enumerate(config.pools or []):
            yield from _gpu_pool(f"{path}.pools[{j}]", name, gpus, with_gpus)
        admitted = {plan.name for plan in queue_pools(config, plans)}
        for name in config.quotas:
            if name in gpus and name not in admitted:
                yield Problem(
                    f"{path}.quotas.{name}",
                    f"{name} is not one of this ClusterQueue's pools ({', '.join(sorted(admitted)) or 'none'}); "
                    "add it to `pools` or drop its quota",
                )
            elif name not in gpus:
                yield from _gpu_pool(f"{path}.quotas.{name}", name, gpus, with_gpus)


def _gpu_pool(path: str, name: str, gpus: dict[str, bool], with_gpus: list[str]) -> Iterator[Problem]:
    if name not in gpus:
        yield Problem(
            path,
            f"{shown_text(name)} is not a node pool of this stack{did_you_mean(name, list(gpus))}; its GPU pools: "
            f"{', '.join(with_gpus) or 'none'}",
        )
    elif not gpus[name]:
        yield Problem(
            path,
            f"{name} has no GPUs, so a ClusterQueue has nothing to admit onto it; name GPU pools "
            f"({', '.join(with_gpus) or 'none here'})",
        )


def queue_quotas_fit_the_pools(p: Parsed) -> Iterator[Problem]:
    """A quota is one its pool can hold at its maximum size (`scaling.max`, or `nodes` on hybrid pools): per
    ClusterQueue no more GPUs or EFA devices than the pool has (none on a pool without EFA), and over every
    ClusterQueue no more than the pool has in all, or Kueue admits jobs no node can run. Borrowing and lending limits
    need a `cohort`, and a queue lends at most its own quota."""
    configured = _configured(p)
    if not configured or not p.pools_complete:
        return
    plans = _plans(p)
    if plans is None:
        return
    by_name = {plan.name: plan for plan in plans if plan.is_gpu}
    used: dict[str, list[tuple[str, int]]] = {}
    for path, config in configured:
        for plan in queue_pools(config, plans):
            if not plan.is_gpu:
                continue
            gpu_capacity, efa_capacity = pool_capacity(plan)
            quota = config.quotas.get(plan.name)
            where = f"{path}.quotas.{plan.name}"
            gpus = quota.gpus if quota is not None and quota.gpus is not None else gpu_capacity
            used.setdefault(plan.name, []).append((config.name, gpus))
            if quota is None:
                continue
            yield from _within(where, plan, quota.gpus, gpu_capacity, quota.efa_devices, efa_capacity)
            yield from _limits(where, plan, quota, gpus, config.cohort)
    yield from _shared_pools(by_name, used)


def _limits(where: str, plan: PoolPlan, quota: PoolQuota, gpus: int, cohort: str | None) -> Iterator[Problem]:
    for key, limit in (
        ("borrowingLimitGpus", quota.borrowing_limit_gpus),
        ("lendingLimitGpus", quota.lending_limit_gpus),
    ):
        if limit is not None and cohort is None:
            yield Problem(
                f"{where}.{key}",
                "set, but the ClusterQueue has no `cohort` to borrow from or lend to; add a cohort or drop it",
            )
    if quota.lending_limit_gpus is not None and quota.lending_limit_gpus > gpus:
        yield Problem(
            f"{where}.lendingLimitGpus",
            f"{quota.lending_limit_gpus}, above the queue's own {gpus} GPUs on {plan.name}; lend at most {gpus}",
        )


def _within(
    where: str, plan: PoolPlan, gpus: int | None, gpu_capacity: int, efa: int | None, efa_capacity: int
) -> Iterator[Problem]:
    if gpus is not None and gpus > gpu_capacity:
        yield Problem(
            f"{where}.gpus",
            f"{gpus} GPUs, but {plan.name} holds {gpu_capacity} at its maximum size; ask for at most {gpu_capacity} "
            "or raise the pool's maximum",
        )
    if efa is not None and efa > efa_capacity:
        what = f"wires {efa_capacity} EFA devices at its maximum size" if efa_capacity else "wires no EFA devices"
        yield Problem(
            f"{where}.efaDevices",
            f"{efa} EFA devices, but {plan.name} {what}; ask for at most {efa_capacity}",
        )


def _shared_pools(by_name: dict[str, PoolPlan], used: dict[str, list[tuple[str, int]]]) -> Iterator[Problem]:
    for name, shares in used.items():
        if len(shares) < 2 or name not in by_name:
            continue
        capacity, _ = pool_capacity(by_name[name])
        total = sum(gpus for _, gpus in shares)
        if total > capacity:
            parts = ", ".join(f"{queue} {gpus}" for queue, gpus in shares)
            yield Problem(
                f"{QUEUES}.clusterQueues",
                f"pool {name} holds {capacity} GPUs at its maximum size, but its ClusterQueues' quotas add up to "
                f"{total} ({parts}; a queue without a quota on it takes all of it); give each queue on {name} a "
                f"`quotas.{name}.gpus` so they add up to at most {capacity} (a cohort lets them borrow the rest)",
            )


def backoff_is_ordered(p: Parsed) -> Iterator[Problem]:
    """The requeue backoff grows from `backoffBaseSeconds` to `backoffMaxSeconds`, so the base is not above the max."""
    queues = _queues(p)
    if queues is None:
        return
    admission = queues.admission
    if admission.backoff_base_seconds > admission.backoff_max_seconds:
        yield Problem(
            f"{QUEUES}.admission.backoffBaseSeconds",
            f"{admission.backoff_base_seconds}, above backoffMaxSeconds {admission.backoff_max_seconds}; the first "
            "requeue delay must not exceed the longest",
        )


RULES = (
    queues_need_kueue,
    cluster_queues_are_named_once,
    queue_namespaces_are_workload_namespaces,
    queue_pools_are_gpu_pools,
    queue_quotas_fit_the_pools,
    backoff_is_ordered,
)
