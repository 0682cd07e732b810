"""The stack's workload namespaces (pure, no Pulumi): where tenants' pods run, derived here once.

A workload namespace is a file system's claim namespace (`storage.*.kubernetes.namespace`) or a team namespace
(`workloads.namespaces`). Each is created at Pod Security `restricted`, behind the default-deny NetworkPolicy, with a
GPU ResourceQuota (components.planning.namespaces, network_policies, gpu_quotas), and is what
`cluster.admins[].namespaces` and `workloads.quotas` may name. Why: docs/security.md#tenants.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.config import StorageConfig, TeamNamespace, WorkloadsConfig
from components.planning.pools import PoolPlan
from components.planning.storage import claim_namespaces


def workload_namespace_names(storage: StorageConfig, workloads: WorkloadsConfig) -> list[str]:
    """Every workload namespace: the claim namespaces and the team namespaces, sorted, without repeats."""
    return sorted(set(claim_namespaces(storage)) | {team.name for team in workloads.namespaces})


def gpu_pools(plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """The pools whose nodes have GPUs, in config order."""
    return [p for p in plans if p.gpus_per_node > 0]


def team_pools(team: TeamNamespace, plans: Sequence[PoolPlan]) -> list[PoolPlan]:
    """The pools a team namespace's quota counts: those it names, else every GPU pool, in config order."""
    if team.pools is None:
        return gpu_pools(plans)
    return [p for p in plans if p.name in team.pools]
