"""Spot rules: diverse instance types of one GPU shape, capacity rebalancing, and the termination handler that
drains interrupted nodes ([NTH] in docs/sources.md).
"""

from __future__ import annotations

from components import catalog
from components.catalog.versions import chart
from policies.resources import (
    Stack,
)
from policies.rules.deployed_pools import node_pools
from policies.rules.releases import required_releases
from policies.rules.signatures import Config, StackViolations

TERMINATION_HANDLER_CHART = chart("aws-node-termination-handler").chart


def spot_instance_diversification(stack: Stack, config: Config) -> StackViolations:
    """Spot pools offer at least `minInstanceTypes` instance types, all of one GPU shape.

    "Be flexible about instance types": each type is a separate spot capacity pool, so one type alone is
    interrupted and starved together (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-best-practices.html).
    The types must share the GPU shape (model, count, memory per the catalog) and EFA device count, or pods sized
    for one do not fit the other and the template's EFA wiring is wrong for it. On a group cluster-autoscaler
    resizes they must also share vCPUs and memory ([CASAWS]), so there the minimum is capped at the catalog types
    of that exact size.
    """
    minimum = int(config.get("minInstanceTypes") or 1)
    for pool in node_pools(stack):
        if pool.capacity_type != "spot":
            continue
        types = pool.instance_types
        entries = pool.catalog_entries()
        needed = minimum
        if pool.autoscaled and entries:
            first = entries[0]
            sizes = {(e.vcpu, e.memory_gib) for e in entries}
            if len(sizes) > 1:
                yield (
                    f"spot pool '{pool.name}' mixes vCPU and memory sizes {sorted(sizes)} under cluster-autoscaler, "
                    f"which sizes every node as {first.name}",
                    pool.asg.urn,
                )
            size = (first.vcpu, first.memory_gib)
            same_size = [
                t
                for t in catalog.instance_types().values()
                if t.gpu_shape == first.gpu_shape and (t.vcpu, t.memory_gib) == size
            ]
            needed = min(minimum, len(same_size))
        if len(types) < needed:
            yield (
                f"spot pool '{pool.name}' offers {len(types)} instance type(s) {types}; at least {needed} are needed "
                "(mixedInstancesPolicy overrides)",
                pool.asg.urn,
            )
        shapes = {e.gpu_shape for e in entries}
        if len(shapes) > 1:
            yield (f"spot pool '{pool.name}' mixes GPU shapes {sorted(map(str, shapes))}", pool.asg.urn)
        efa_counts = {e.max_efa_interfaces for e in entries}
        if pool.efa and len(efa_counts) > 1:
            yield (f"spot EFA pool '{pool.name}' mixes types with {sorted(efa_counts)} EFA devices", pool.asg.urn)


def spot_capacity_rebalance(stack: Stack, config: Config) -> StackViolations:
    """Spot Auto Scaling groups turn on capacity rebalancing (managed node groups always do), so a replacement
    launches on a rebalance recommendation instead of after the two-minute interruption notice
    (https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-capacity-rebalancing.html)."""
    for pool in node_pools(stack):
        if pool.capacity_type == "spot" and not pool.capacity_rebalance:
            yield (f"spot pool '{pool.name}' does not enable capacityRebalance", pool.asg.urn)


def spot_interruption_handler(stack: Stack, config: Config) -> StackViolations:
    """A stack with spot pools deploys the AWS Node Termination Handler, which cordons and drains a node when its
    interruption notice arrives or its Auto Scaling group terminates it ([NTH], aws-gpu-facts.md §7b)."""
    spot = [p for p in node_pools(stack) if p.capacity_type == "spot"]
    yield from required_releases(stack, TERMINATION_HANDLER_CHART, spot, "spot")
