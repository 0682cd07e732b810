"""The settings of a managed pool's EKS node group (`aws.eks.NodeGroup`), rendered from its `PoolPlan`.

Invariants: the node group runs the pool's own launch template, whose AMI id (the pinned EKS-optimized release) means
EKS merges no user data: the NodeConfig (or Bottlerocket TOML) the launch template carries registers the node with
every label, taint and maxPods, as on a self-managed pool; spot types go on the node group, every other capacity
names its one type in the template; node auto repair is on with at most one node repaired at a time unless
configured. Why and sources: docs/node-pools.md#management-and-node-auto-repair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components.planning.pools import PoolPlan, refresh_healthy_percentages

#: EKS `CreateNodegroup` `capacityType` per pool capacity type. A reservation is on-demand capacity the launch
#: template targets; a Capacity Block needs `CAPACITY_BLOCK` and a custom launch template (EKS user guide, "Create a
#: managed node group with Capacity Blocks for ML").
CAPACITY_TYPES = {
    "on-demand": "ON_DEMAND",
    "reservation": "ON_DEMAND",
    "spot": "SPOT",
    "capacity-block": "CAPACITY_BLOCK",
}
#: Nodes EKS repairs at once unless configured: one GPU node at a time, so a fault that hits many nodes together
#: (a bad driver, a fabric event) does not take a whole training pool down at once.
DEFAULT_MAX_PARALLEL_REPAIRS = 1
UpdateStrategy = Literal["DEFAULT", "MINIMAL"]


@dataclass(frozen=True)
class UpdateSettings:
    """EKS `updateConfig`: how many nodes a rolling update takes out at once, and whether it launches first."""

    strategy: UpdateStrategy
    max_unavailable: int | None
    max_unavailable_percentage: int | None


@dataclass(frozen=True)
class RepairOverrideSettings:
    condition: str
    reason: str
    wait_minutes: int
    action: str


@dataclass(frozen=True)
class RepairSettings:
    """EKS `nodeRepairConfig`, count or percentage per limit (EKS accepts one of each pair)."""

    enabled: bool
    max_parallel_count: int | None
    max_parallel_percentage: int | None
    max_unhealthy_count: int | None
    max_unhealthy_percentage: int | None
    overrides: tuple[RepairOverrideSettings, ...]


@dataclass(frozen=True)
class NodeGroupSettings:
    capacity_type: str
    #: The node group's `instanceTypes`: spot pools only; None when the launch template names the one type.
    instance_types: tuple[str, ...] | None
    #: The launch template's `instanceType`: None on spot pools (EKS refuses a type in both places).
    launch_template_instance_type: str | None
    min_size: int
    max_size: int
    desired_size: int
    update: UpdateSettings
    repair: RepairSettings


def update_settings(plan: PoolPlan) -> UpdateSettings:
    """The instance refresh settings in EKS's terms. A maximum healthy percentage above 100 launches before it
    terminates (`DEFAULT`), 100 terminates first (`MINIMAL`); a minimum healthy percentage of 100 still takes one
    node at a time out of service after its replacement is Ready, since EKS needs at least one (EKS user guide,
    "Understand each phase of node updates"; EKS API `NodegroupUpdateConfig`)."""
    low, high = refresh_healthy_percentages(plan.pool)
    strategy: UpdateStrategy = "DEFAULT" if high > 100 else "MINIMAL"
    if low >= 100:
        return UpdateSettings(strategy, 1, None)
    return UpdateSettings(strategy, None, 100 - low)


def repair_settings(plan: PoolPlan) -> RepairSettings:
    repair = plan.pool.repair.eks
    parallel, unhealthy = repair.max_parallel, repair.max_unhealthy
    parallel_count = parallel.count if parallel else DEFAULT_MAX_PARALLEL_REPAIRS
    return RepairSettings(
        enabled=repair.enabled,
        max_parallel_count=parallel_count,
        max_parallel_percentage=parallel.percentage if parallel else None,
        max_unhealthy_count=unhealthy.count if unhealthy else None,
        max_unhealthy_percentage=unhealthy.percentage if unhealthy else None,
        overrides=tuple(
            RepairOverrideSettings(o.condition, o.reason, o.wait_minutes, o.action) for o in repair.overrides
        ),
    )


def node_group_settings(plan: PoolPlan) -> NodeGroupSettings:
    """Everything the node group registers besides its launch template, role and subnets."""
    if plan.management != "managed" or plan.instance is None:
        raise ValueError(f"pool {plan.name}: only managed `aws` pools have node group settings")
    spot = plan.capacity_type == "spot"
    return NodeGroupSettings(
        capacity_type=CAPACITY_TYPES[plan.capacity_type],
        instance_types=plan.instance_types if spot else None,
        launch_template_instance_type=None if spot else plan.instance.name,
        min_size=plan.min_nodes,
        max_size=plan.max_nodes,
        desired_size=plan.initial_nodes,
        update=update_settings(plan),
        repair=repair_settings(plan),
    )
