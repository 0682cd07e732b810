"""Rules on the workload namespaces (the claim namespaces and the team namespaces): each is a namespace of its own,
and its GPU quota (`workloads.quotas`) names it
and fits what its pools hold (components.planning.gpu_quotas, docs/security.md#pod-security-and-networkpolicy)."""

from __future__ import annotations

from collections.abc import Iterator

from components.config import StorageConfig, WorkloadsConfig
from components.errors import Problem
from components.planning.gpu_quotas import GpuQuota, gpu_quotas
from components.planning.namespaces import ADDON_NAMESPACES, KUBERNETES_NAMESPACES
from components.planning.pools import PoolPlan, plan_pool
from components.planning.storage import claim_namespaces
from components.planning.tenants import workload_namespace_names
from components.validation.parse import Parsed, did_you_mean, shown_text

#: Namespaces a workload may not share: Kubernetes' own (but `default`, which the stack labels `restricted`) and
#: the add-ons', which run pods beyond `restricted` or hold the monitoring that the NetworkPolicies guard.
RESERVED_NAMESPACES = (KUBERNETES_NAMESPACES - {"default"}) | ADDON_NAMESPACES


def workload_namespaces_are_their_own(p: Parsed) -> Iterator[Problem]:
    """A file system's claim namespace is where workloads run, at Pod Security `restricted` behind a default-deny
    NetworkPolicy: not kube-system, kube-public, kube-node-lease or an add-on's namespace (keda, monitoring,
    dcgm-exporter-runtime-class, nvidia-mig-manager, amazon-cloudwatch), whose pods need more."""
    if p.storage is None:
        return
    for kind, fs in (("lustre", p.storage.lustre), ("nfs", p.storage.nfs)):
        if fs is not None and fs.kubernetes.namespace in RESERVED_NAMESPACES:
            yield Problem(
                f"storage.{kind}.kubernetes.namespace",
                f"{fs.kubernetes.namespace} is not a workload namespace (Kubernetes' or an add-on's own); give the "
                "claim a namespace of its own, e.g. `training` or `inference`",
            )


def team_namespaces_are_their_own(p: Parsed) -> Iterator[Problem]:
    """Each team namespace (`workloads.namespaces`) is listed once, is not Kubernetes' or an add-on's own, is not a
    file system's claim namespace (that one is a workload namespace already, with the pools that mount the claim),
    and names pools of the stack that have GPUs, since only their GPUs make up its quota."""
    if p.workloads is None or not p.workloads.namespaces:
        return
    claims = set(claim_namespaces(p.storage)) if p.storage is not None and not p.damaged_at("storage") else set()
    seen: dict[str, int] = {}
    for i, team in enumerate(p.workloads.namespaces):
        path = f"workloads.namespaces[{i}].name"
        first = seen.get(team.name)
        if first is not None:
            yield Problem(path, f"{team.name} is listed already (workloads.namespaces[{first}]): list it once")
            continue
        seen[team.name] = i
        if team.name in RESERVED_NAMESPACES:
            yield Problem(
                path,
                f"{team.name} is Kubernetes' or an add-on's own namespace, whose pods need more than `restricted`; "
                "give the team a namespace of its own, e.g. `team-a`",
            )
        elif team.name in claims:
            yield Problem(
                path,
                f"{team.name} is a file system's claim namespace (storage.*.kubernetes.namespace), a workload "
                "namespace already; list only other teams' namespaces here",
            )
    yield from _team_pools_are_gpu_pools(p)


def _team_pools_are_gpu_pools(p: Parsed) -> Iterator[Problem]:
    if p.workloads is None or not p.pools_complete:
        return
    names = [pool.name for _, pool in p.pools]
    plans = _plans(p)
    gpus = {plan.name: plan.gpus_per_node for plan in plans} if plans is not None else {}
    for i, team in enumerate(p.workloads.namespaces):
        for j, name in enumerate(team.pools or []):
            path = f"workloads.namespaces[{i}].pools[{j}]"
            if name not in names:
                yield Problem(
                    path,
                    f"{shown_text(name)} is not a node pool of this stack{did_you_mean(name, names)}; its pools: "
                    f"{', '.join(names) or 'none'}",
                )
            elif gpus.get(name) == 0:
                with_gpus = [n for n in names if gpus.get(n)]
                yield Problem(
                    path,
                    f"{name} has no GPUs, so it adds nothing to the namespace's GPU quota; name GPU pools "
                    f"({', '.join(with_gpus) or 'none here'}) or leave `pools` out for all of them",
                )


def _plans(p: Parsed) -> list[PoolPlan] | None:
    """Every pool's plan (the default system pool included), or None when a pool cannot be planned (its own rule
    reports why)."""
    if p.network is None or not p.pools_complete:
        return None
    mig = p.addons.nvidia_device_plugin.mig_strategy if p.addons is not None else "none"
    pools = [pool for _, pool in p.pools] + ([p.default_pool] if p.default_pool is not None else [])
    try:
        return [plan_pool(pool, p.network, mig_strategy=mig) for pool in pools]
    except (ValueError, KeyError):
        return None


def _quotas(p: Parsed) -> list[GpuQuota] | None:
    plans = _plans(p)
    if plans is None:
        return None
    return gpu_quotas(p.storage or StorageConfig(), p.workloads or WorkloadsConfig(), plans)


def gpu_quotas_name_workload_namespaces(p: Parsed) -> Iterator[Problem]:
    """`workloads.quotas` names workload namespaces only: the claim namespaces of `storage.lustre` and
    `storage.nfs` and the team namespaces of `workloads.namespaces`, the only namespaces the stack gives a quota."""
    if p.workloads is None or not p.workloads.quotas:
        return
    known = workload_namespace_names(p.storage or StorageConfig(), p.workloads)
    for namespace in p.workloads.quotas:
        if namespace not in known:
            yield Problem(
                f"workloads.quotas.{namespace}",
                f"{namespace} is not a workload namespace of this stack{did_you_mean(namespace, known)}; quotas "
                "apply to the claim namespaces of `storage` and the team namespaces of `workloads.namespaces` "
                f"({', '.join(known) or 'none here'})",
            )


def gpu_quotas_fit_the_pools(p: Parsed) -> Iterator[Problem]:
    """A namespace's quota is one its pools can hold: no more GPUs (or EFA devices) than the pools that mount its
    claims and run its serving workloads have at their maximum size, an EFA quota only where one of them wires
    EFA, and at least the GPUs its serving workloads need at their minimum replicas, or they never start."""
    if p.workloads is None or not p.workloads.quotas:
        return
    quotas = _quotas(p)
    if quotas is None:
        return
    # A team naming a pool the stack lacks is reported once, at that pool (_team_pools_are_gpu_pools), not again
    # as a quota its (missing) pools cannot hold.
    known_pools = {pool.name for _, pool in p.pools}
    misnamed = {t.name for t in p.workloads.namespaces if t.pools and not set(t.pools) <= known_pools}
    for quota in quotas:
        configured = p.workloads.quotas.get(quota.namespace)
        if configured is None or quota.namespace in misnamed:
            continue
        path = f"workloads.quotas.{quota.namespace}"
        pools = ", ".join(quota.pools) or "none"
        if configured.gpus is not None and configured.gpus > quota.gpu_capacity:
            yield Problem(
                f"{path}.gpus",
                f"{configured.gpus} GPUs, more than the namespace's pools ({pools}) hold at their maximum size "
                f"({quota.gpu_capacity}); no pool can hold that quota: at most {quota.gpu_capacity}",
            )
        if configured.gpus is not None and configured.gpus < quota.serving_gpus:
            yield Problem(
                f"{path}.gpus",
                f"{configured.gpus} GPUs, fewer than the {quota.serving_gpus} its serving workloads need at their "
                f"minimum replicas: at least {quota.serving_gpus}",
            )
        if configured.efa_devices is not None and configured.efa_devices > quota.efa_capacity:
            yield Problem(
                f"{path}.efaDevices",
                f"{configured.efa_devices} EFA devices, more than the namespace's pools ({pools}) hold at their "
                f"maximum size ({quota.efa_capacity}): at most {quota.efa_capacity}"
                + ("" if quota.efa_capacity else "; none of them wires EFA, so leave the key out"),
            )


RULES = (
    workload_namespaces_are_their_own,
    team_namespaces_are_their_own,
    gpu_quotas_name_workload_namespaces,
    gpu_quotas_fit_the_pools,
)
