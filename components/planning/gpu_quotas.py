"""The GPU ResourceQuota of each workload namespace (pure, no Pulumi): how many `nvidia.com/gpu` (and EFA devices)
the pods of one namespace may request at once, so one team cannot take every GPU of the cluster.

A claim namespace can use the pools that mount its file systems' claims (a pod mounting the claim lands only there)
and the pools its serving workloads run on, a team namespace the pools it names (default every GPU pool,
components.planning.tenants); by default its quota is everything those pools hold at their maximum size,
and `workloads.quotas.<namespace>` lowers it. Why and how: docs/security.md#pod-security-and-networkpolicy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from components.config import StorageConfig, WorkloadsConfig
from components.planning.autoscaler_tags import EFA_RESOURCE
from components.planning.dra import GPU_DEVICE_CLASS, dra_plans
from components.planning.mig import advertised_gpus
from components.planning.pools import GPU_RESOURCE, PoolPlan
from components.planning.storage import lustre_pools, nfs_pools
from components.planning.tenants import team_pools, workload_namespace_names


def quota_key(resource: str) -> str:
    """A ResourceQuota `hard` key for an extended resource: only requests can be limited, as `requests.<name>`
    ([RQ], "Resource quota for extended resources")."""
    return f"requests.{resource}"


def device_class_quota_key(device_class: str) -> str:
    """A ResourceQuota `hard` key for the devices all claims of a namespace request from one DeviceClass ([RQ],
    "Resource quota for Dynamic Resource Allocation")."""
    return f"{device_class}.deviceclass.resource.k8s.io/devices"


@dataclass(frozen=True)
class GpuQuota:
    """The quota of one workload namespace and what its pools can hold (the ceiling a configured quota may reach)."""

    namespace: str
    pools: tuple[str, ...]
    gpus: int
    gpu_capacity: int
    efa_devices: int | None
    efa_capacity: int
    #: GPUs the namespace's serving workloads need at their minimum replicas (a quota below it stops them).
    serving_gpus: int
    #: Whether one of its pools allocates GPUs through DRA, whose claims `requests.nvidia.com/gpu` does not count.
    dra: bool = False

    @property
    def hard(self) -> dict[str, str]:
        """The ResourceQuota's `spec.hard`; with a DRA pool, the same figure caps the devices of the namespace's
        claims from the class `gpu.nvidia.com` too ([RQ], `<class>.deviceclass.resource.k8s.io/devices`)."""
        hard = {quota_key(GPU_RESOURCE): str(self.gpus)}
        if self.dra:
            hard[device_class_quota_key(GPU_DEVICE_CLASS)] = str(self.gpus)
        if self.efa_devices is not None:
            hard[quota_key(EFA_RESOURCE)] = str(self.efa_devices)
        return hard


def namespace_pools(
    storage: StorageConfig, workloads: WorkloadsConfig, plans: Sequence[PoolPlan]
) -> dict[str, list[PoolPlan]]:
    """Each workload namespace (a claim namespace of the stack's file systems or a team namespace) with the pools its
    pods can use, in config order."""
    by_namespace: dict[str, set[str]] = {ns: set() for ns in workload_namespace_names(storage, workloads)}
    if storage.lustre is not None:
        by_namespace[storage.lustre.kubernetes.namespace] |= {p.name for p in lustre_pools(storage.lustre, plans)}
    if storage.nfs is not None:
        names = {p.name for p in nfs_pools(storage.nfs, plans)} | {w.pool for w in workloads.serving}
        by_namespace[storage.nfs.kubernetes.namespace] |= names
    for team in workloads.namespaces:
        by_namespace[team.name] |= {p.name for p in team_pools(team, plans)}
    return {ns: [p for p in plans if p.name in pools] for ns, pools in by_namespace.items()}


def gpu_quotas(storage: StorageConfig, workloads: WorkloadsConfig, plans: Sequence[PoolPlan]) -> list[GpuQuota]:
    """The quota of every workload namespace: configured (`workloads.quotas`), else its pools' capacity."""
    quotas = []
    serving_namespace = storage.nfs.kubernetes.namespace if storage.nfs is not None else None
    for namespace, pools in namespace_pools(storage, workloads, plans).items():
        gpu_capacity = sum(advertised_gpus(p) * p.max_nodes for p in pools)
        efa_capacity = sum(p.efa_devices * p.max_nodes for p in pools if p.efa)
        configured = workloads.quotas.get(namespace)
        gpus = configured.gpus if configured is not None and configured.gpus is not None else gpu_capacity
        efa = configured.efa_devices if configured is not None and configured.efa_devices is not None else None
        serving = (
            sum(w.gpus_per_replica * w.replicas.min for w in workloads.serving) if namespace == serving_namespace else 0
        )
        quotas.append(
            GpuQuota(
                namespace=namespace,
                pools=tuple(p.name for p in pools),
                gpus=gpus,
                gpu_capacity=gpu_capacity,
                efa_devices=efa if efa is not None else (efa_capacity if efa_capacity else None),
                efa_capacity=efa_capacity,
                serving_gpus=serving,
                dra=bool(dra_plans(pools)),
            )
        )
    return quotas
