"""Whether an `aws` pool runs as an EKS managed node group or a self-managed Auto Scaling group, and why.

A managed node group gets EKS node auto repair; a pool is managed by default (`management: auto`) only when every
feature it uses works there, and each feature that does not is named with its config path (`managed_blockers`).
Why and sources: docs/node-pools.md#management-and-node-auto-repair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components.config import NodePool

Management = Literal["managed", "self-managed"]
#: The only spot allocation strategy EKS gives a new managed node group on Kubernetes 1.28 or later; a managed
#: node group is all spot or all on-demand (EKS user guide, "Managed node group capacity types").
MANAGED_SPOT_ALLOCATION_STRATEGY = "price-capacity-optimized"


@dataclass(frozen=True)
class Blocker:
    """A feature a managed node group cannot carry: the pool's key path below the pool, and what to do."""

    path: str
    message: str


def managed_blockers(pool: NodePool, rolls_out: bool) -> list[Blocker]:
    """Every setting of `pool` a managed node group cannot honour. `rolls_out` is whether template changes may
    replace running nodes (`components.planning.pools.refreshes`)."""
    if pool.kind != "aws":
        return [Blocker("kind", "hybrid servers join as EKS Hybrid Nodes, not in a node group")]
    found: list[Blocker] = []
    capacity = pool.capacity
    if capacity.type == "spot":
        if capacity.on_demand_base_capacity or capacity.on_demand_percentage_above_base:
            found.append(
                Blocker(
                    "capacity.onDemandBaseCapacity",
                    "a managed node group is all spot or all on-demand (EKS capacityType): set onDemandBaseCapacity "
                    "and onDemandPercentageAboveBase to 0, or keep the pool self-managed",
                )
            )
        if capacity.spot_allocation_strategy != MANAGED_SPOT_ALLOCATION_STRATEGY:
            found.append(
                Blocker(
                    "capacity.spotAllocationStrategy",
                    f"EKS sets {MANAGED_SPOT_ALLOCATION_STRATEGY} on a managed node group's spot instances; use it, "
                    "or keep the pool self-managed",
                )
            )
    if pool.scaling.max < 1:
        found.append(Blocker("scaling.max", "EKS needs a managed node group's maxSize to be at least 1"))
    if pool.scaling.mode == "fixed" and pool.scaling.min != pool.scaling.max:
        found.append(
            Blocker(
                "scaling.mode",
                "EKS tags every managed node group's Auto Scaling group for cluster-autoscaler's auto-discovery, so "
                "the autoscaler would resize a `fixed` pool between min and max: set scaling.min equal to "
                "scaling.max, use mode cluster-autoscaler, or keep the pool self-managed",
            )
        )
    if not rolls_out:
        found.append(
            Blocker(
                "instanceRefresh.enabled",
                "a managed node group replaces every node when its launch template changes (UpdateNodegroupVersion), "
                "which would kill running jobs: set instanceRefresh.enabled to true to accept rolling updates, or "
                "keep the pool self-managed",
            )
        )
    return found


def choose_management(pool: NodePool, rolls_out: bool) -> Management:
    """`managed` or `self-managed` as configured; `auto` is managed when nothing blocks it."""
    if pool.kind != "aws":
        return "self-managed"
    if pool.management != "auto":
        return pool.management
    return "self-managed" if managed_blockers(pool, rolls_out) else "managed"


#: The pool settings `managed_blockers` reads: with `management: auto`, changing one of them can move a running pool
#: between a managed node group and a self-managed Auto Scaling group.
DECIDING_SETTINGS = (
    "capacity.type",
    "capacity.spotAllocationStrategy",
    "capacity.onDemandBaseCapacity",
    "capacity.onDemandPercentageAboveBase",
    "scaling.mode",
    "scaling.min",
    "scaling.max",
    "instanceRefresh.enabled",
)


def node_role_suffix(management: Management) -> str:
    """The suffix of a cloud pool's node role, instance profile and access entry names: one role per management
    kind, so a pool that changes kind gets a new role and a new access entry together. A role can be in only one
    access entry, and EKS creates a managed node group's entry itself; a kept role would pass from the stack's
    entry to EKS's while Pulumi creates the new group before it deletes the old entry (docs/node-pools.md)."""
    return "managed-node" if management == "managed" else "node"


def auto_management_warning(name: str, pool: NodePool, management: Management) -> str | None:
    """For a cloud pool whose kind `management: auto` decided: which settings would flip it later, and what a flip
    costs. None for a pool whose kind is configured."""
    if pool.kind != "aws" or pool.management != "auto":
        return None
    other = "self-managed" if management == "managed" else "managed"
    return (
        f"pool {name}: management auto made it {management}; a later change of {', '.join(DECIDING_SETTINGS)} that "
        f"makes it {other} replaces every node of the pool (a new node group or Auto Scaling group and a new node "
        f"role): set management: {management} to keep it (docs/node-pools.md, 'Management and node auto repair')"
    )
