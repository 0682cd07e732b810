"""Hourly cost of node pools, from catalog on-demand prices.

Spot prices move by the hour and AWS publishes no fixed discount, so spot nodes are estimated at a flat discount
from the on-demand price. The figure is deliberately conservative: observed p5en.48xlarge spot prices in us-east-1
were ~57% below on-demand in July-August 2026 (dstack #4110, #4069; aws-gpu-facts.md §9); we assume 50%.
Owned (hybrid) servers cost nothing per hour here; the EKS Hybrid Nodes per-vCPU fee is not included.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.planning.pools import PoolPlan

SPOT_DISCOUNT_ESTIMATE = 0.50


@dataclass(frozen=True)
class PoolCost:
    idle_usd: float
    max_usd: float
    #: What `max` would cost with every node on-demand: the spot saving is the difference.
    max_on_demand_usd: float

    @property
    def spot_saving_usd(self) -> float:
        return self.max_on_demand_usd - self.max_usd


def nodes_cost(plan: PoolPlan, nodes: int) -> float:
    """Hourly cost of `nodes` nodes of the pool, honouring a spot pool's on-demand base and percentage."""
    price = plan.hourly_usd_per_node
    if plan.capacity_type != "spot":
        return nodes * price
    capacity = plan.pool.capacity
    base = min(nodes, capacity.on_demand_base_capacity)
    above = nodes - base
    on_demand_above = above * capacity.on_demand_percentage_above_base / 100
    spot = above - on_demand_above
    return (base + on_demand_above) * price + spot * price * (1 - SPOT_DISCOUNT_ESTIMATE)


def pool_cost(plan: PoolPlan) -> PoolCost:
    return PoolCost(
        idle_usd=nodes_cost(plan, plan.min_nodes),
        max_usd=nodes_cost(plan, plan.max_nodes),
        max_on_demand_usd=plan.max_nodes * plan.hourly_usd_per_node,
    )
