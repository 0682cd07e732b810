"""What a stack bills per hour while it runs, part by part, from the Region's catalog prices.

`$/h idle` is every pool at its minimum; `$/h at max` every pool at its maximum. Both count what bills whether
or not work runs: the EKS control plane, NAT gateways and their public IPv4 addresses, the Lustre file system,
EFS provisioned throughput, the EKS Hybrid Nodes fee, On-Demand Capacity Reservations (billed used or not) and the
nodes. A Capacity Block is paid up front when bought, so it is listed as committed, never in $/h. Usage-billed
charges (data processed or transferred, EFS storage and Elastic transfers, backups, logs) have no figure at plan
time and are left out (docs/architecture.md, "Costs").

Prices are the Region's (components.catalog.prices); an item the catalog has no price for in the Region is
listed unpriced with the reason, and left out of the totals, never priced from another Region. Spot nodes are an
estimate: AWS publishes no fixed discount, so `spot_discount_estimate` ([SPOT]) applies.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from components.catalog import prices
from components.catalog.versions import kubernetes_version_support
from components.config import StackConfig
from components.planning.lustre import per_unit_throughput
from components.planning.pools import PoolPlan
from components.planning.subnets import nat_gateway_zones


@dataclass(frozen=True)
class CostItem:
    """One billed part of the stack and what it costs per hour at the pools' minimum and maximum."""

    #: What bills: `control-plane`, `nat-gateways`, `public-ipv4`, `nodes`, `reservation`, `lustre`, `efs`,
    #: `hybrid-nodes-fee`.
    kind: str
    #: Which one: the cluster, pool or file system name.
    name: str
    idle_usd: float
    max_usd: float
    #: How the figure was computed, in words a reviewer can check.
    detail: str
    #: Source tags of the prices used (components/catalog/prices.yaml, instances.yaml).
    source: str
    #: True where the figure is an estimate (spot).
    estimate: bool = False


@dataclass(frozen=True)
class Unpriced:
    """A billed part with no price in the catalog for the Region: left out of the totals, said out loud."""

    kind: str
    name: str
    reason: str


@dataclass(frozen=True)
class Committed:
    """Capacity paid up front (a Capacity Block): not in $/h."""

    kind: str
    name: str
    detail: str


@dataclass(frozen=True)
class PoolCost:
    idle_usd: float
    max_usd: float
    #: What `max` would cost with every node on-demand: the spot saving is the difference.
    max_on_demand_usd: float

    @property
    def spot_saving_usd(self) -> float:
        return self.max_on_demand_usd - self.max_usd


@dataclass(frozen=True)
class StackCost:
    region: str
    items: tuple[CostItem, ...]
    unpriced: tuple[Unpriced, ...]
    committed: tuple[Committed, ...]
    #: Pool name -> its node cost (absent for unpriced pools).
    pools: dict[str, PoolCost]

    @property
    def idle_usd(self) -> float:
        return sum(item.idle_usd for item in self.items)

    @property
    def max_usd(self) -> float:
        return sum(item.max_usd for item in self.items)

    @property
    def max_on_demand_usd(self) -> float:
        """`max` with every spot node bought on demand."""
        return self.max_usd + self.spot_saving_usd

    @property
    def spot_saving_usd(self) -> float:
        return sum(cost.spot_saving_usd for cost in self.pools.values())


def no_price(item: str, region: str) -> str:
    return f"no price for {item} in {region}"


# ------------------------------------------------------------------------------------------------------- nodes
def nodes_cost(plan: PoolPlan, nodes: int, price: float, spot_discount: float) -> float:
    """Hourly cost of `nodes` nodes of the pool, honouring a spot pool's on-demand base and percentage."""
    if plan.capacity_type != "spot":
        return nodes * price
    capacity = plan.pool.capacity
    base = min(nodes, capacity.on_demand_base_capacity)
    above = nodes - base
    on_demand_above = above * capacity.on_demand_percentage_above_base / 100
    spot = above - on_demand_above
    return (base + on_demand_above) * price + spot * price * (1 - spot_discount)


def pool_cost(plan: PoolPlan, price: float, spot_discount: float) -> PoolCost:
    """A pool's node cost at its minimum and maximum. A reservation bills its instances whether they run or not
    ([ODCR]); the plan takes it to hold the pool's maximum, so idle equals max. A Capacity Block costs nothing per
    hour ([CBPRICE])."""
    if plan.capacity_type == "capacity-block":
        return PoolCost(0.0, 0.0, 0.0)
    if plan.capacity_type == "reservation":
        reserved = plan.max_nodes * price
        return PoolCost(reserved, reserved, reserved)
    return PoolCost(
        idle_usd=nodes_cost(plan, plan.min_nodes, price, spot_discount),
        max_usd=nodes_cost(plan, plan.max_nodes, price, spot_discount),
        max_on_demand_usd=plan.max_nodes * price,
    )


def _pool_items(
    plans: Sequence[PoolPlan], region: str
) -> tuple[list[CostItem], list[Unpriced], list[Committed], dict[str, PoolCost]]:
    items: list[CostItem] = []
    unpriced: list[Unpriced] = []
    committed: list[Committed] = []
    costs: dict[str, PoolCost] = {}
    source = prices.instance_price_source(region)
    discount = prices.spot_discount_estimate()
    for plan in plans:
        if plan.instance is None:
            continue
        type_name = plan.instance.name
        if plan.capacity_type == "capacity-block":
            block = plan.pool.capacity.reservation_id or "a Capacity Block"
            committed.append(
                Committed(
                    "capacity-block",
                    plan.name,
                    f"{block}: up to {plan.max_nodes} x {type_name}, paid up front when bought, nothing per hour",
                )
            )
            costs[plan.name] = PoolCost(0.0, 0.0, 0.0)
            continue
        price = prices.on_demand_usd_per_hour(type_name, region)
        if price is None:
            unpriced.append(Unpriced("nodes", plan.name, no_price(type_name, region)))
            continue
        cost = pool_cost(plan, price, discount)
        costs[plan.name] = cost
        if plan.capacity_type == "reservation":
            detail = f"reservation of {plan.max_nodes} x {type_name} at ${price:g}/h, billed used or not"
            items.append(CostItem("reservation", plan.name, cost.idle_usd, cost.max_usd, detail, f"{source.tag}+ODCR"))
            continue
        detail = f"{plan.min_nodes}..{plan.max_nodes} x {type_name} at ${price:g}/h on demand"
        spot = plan.capacity_type == "spot"
        if spot:
            detail += f", spot nodes at an estimated {discount:.0%} off"
        items.append(
            CostItem(
                "nodes",
                plan.name,
                cost.idle_usd,
                cost.max_usd,
                detail,
                source.tag + ("+SPOT" if spot else ""),
                estimate=spot,
            )
        )
    return items, unpriced, committed, costs


# -------------------------------------------------------------------------------------------- control plane, fees
def control_plane_support(spec: StackConfig, on: dt.date) -> str:
    """`extended` when the cluster's version is in extended support on `on` and its upgrade policy lets it stay
    there ([EKSVERSIONS]: a STANDARD cluster is upgraded instead), else `standard`."""
    support = kubernetes_version_support(spec.cluster.kubernetes_version)
    if support is None or spec.cluster.support_type != "EXTENDED":
        return "standard"
    return "extended" if support.status(on) == "extended" else "standard"


def _hybrid_fee(plan: PoolPlan, services: prices.ServicePrices | None, region: str) -> CostItem | Unpriced:
    vcpus = plan.pool.vcpus_per_node
    if vcpus is None:
        return Unpriced("hybrid-nodes-fee", plan.name, "the servers' vCPUs are unknown: set vcpusPerNode")
    if services is None or not services.hybrid_tiers:
        return Unpriced("hybrid-nodes-fee", plan.name, no_price("EKS Hybrid Nodes", region))
    rate = services.hybrid_tiers[0].usd
    hourly = plan.max_nodes * vcpus * rate
    detail = f"{plan.max_nodes} servers x {vcpus} vCPUs at ${rate:g}/vCPU-h (first tier, an upper bound)"
    return CostItem(
        "hybrid-nodes-fee", plan.name, hourly, hourly, detail, services.sources["hybrid_nodes_usd_per_vcpu_hour"]
    )


# ---------------------------------------------------------------------------------------------------- storage
def _lustre(spec: StackConfig, services: prices.ServicePrices | None, region: str) -> list[CostItem | Unpriced]:
    lustre = spec.storage.lustre
    if lustre is None:
        return []
    tier = per_unit_throughput(lustre)
    key = 0 if lustre.deployment_type == "SCRATCH_2" else tier
    label = f"FSx for Lustre {lustre.deployment_type}" + ("" if key == 0 else f" {tier} MB/s/TiB")
    per_gb = (services.lustre_usd_per_gb_month.get(lustre.deployment_type) or {}).get(key) if services else None
    out: list[CostItem | Unpriced] = []
    if per_gb is None or services is None:
        out.append(Unpriced("lustre", lustre.name, no_price(label, region)))
    else:
        hours = prices.hours_per_month()
        hourly = lustre.storage_capacity_gib * per_gb / hours
        detail = f"{lustre.storage_capacity_gib:,} GB x ${per_gb:g}/GB-month ({label}) / {hours:g} h"
        out.append(CostItem("lustre", lustre.name, hourly, hourly, detail, services.sources["lustre_usd_per_gb_month"]))
    metadata = lustre.metadata
    if metadata is not None and metadata.mode == "USER_PROVISIONED" and metadata.iops:
        per_iops = services.lustre_metadata_usd_per_iops_month if services else None
        if per_iops is None or services is None:
            out.append(Unpriced("lustre-metadata", lustre.name, no_price("FSx for Lustre metadata IOPS", region)))
        else:
            hours = prices.hours_per_month()
            hourly = metadata.iops * per_iops / hours
            detail = f"{metadata.iops:,} metadata IOPS x ${per_iops:g}/IOPS-month / {hours:g} h"
            source = services.sources["lustre_metadata_usd_per_iops_month"]
            out.append(CostItem("lustre-metadata", lustre.name, hourly, hourly, detail, source))
    return out


def _efs(spec: StackConfig, services: prices.ServicePrices | None, region: str) -> list[CostItem | Unpriced]:
    nfs = spec.storage.nfs
    if nfs is None or nfs.kind != "efs":
        return []
    if nfs.throughput_mode != "provisioned" or nfs.provisioned_throughput_mibps is None:
        detail = f"{nfs.throughput_mode} throughput: no baseline charge; storage and transfers billed by use"
        return [CostItem("efs", nfs.name, 0.0, 0.0, detail, "EFSPRICE")]
    per_mbps = services.efs_provisioned_usd_per_mbps_month if services else None
    if per_mbps is None or services is None:
        return [Unpriced("efs", nfs.name, no_price("EFS provisioned throughput", region))]
    hours = prices.hours_per_month()
    hourly = nfs.provisioned_throughput_mibps * per_mbps / hours
    detail = f"{nfs.provisioned_throughput_mibps:g} MiB/s provisioned x ${per_mbps:g}/MB/s-month / {hours:g} h"
    return [CostItem("efs", nfs.name, hourly, hourly, detail, services.sources["efs_provisioned_usd_per_mbps_month"])]


# ------------------------------------------------------------------------------------------------------ total
def _fixed(
    kind: str, name: str, count: int, rate: float | None, what: str, region: str, source: str | None
) -> CostItem | Unpriced:
    """A part billed per unit-hour (the cluster, each NAT gateway or address), or unpriced without a rate."""
    if rate is None or source is None:
        return Unpriced(kind, name, no_price(what, region))
    hourly = count * rate
    return CostItem(kind, name, hourly, hourly, f"{count} x {what} at ${rate:g}/h", source)


def stack_cost(spec: StackConfig, plans: Sequence[PoolPlan], on: dt.date) -> StackCost:
    """Every billed part of the stack in its Region, priced, unpriced or committed."""
    region = spec.region
    services = prices.service_prices(region)
    parts: list[CostItem | Unpriced] = []

    support = control_plane_support(spec, on)
    eks_rate = None
    if services is not None:
        eks_rate = services.eks_extended_usd_per_hour if support == "extended" else services.eks_standard_usd_per_hour
    eks_source = services.sources.get("eks_cluster_usd_per_hour") if services else None
    parts.append(
        _fixed("control-plane", spec.cluster.name, 1, eks_rate, f"EKS cluster ({support} support)", region, eks_source)
    )

    nat = len(nat_gateway_zones(spec.network))
    if nat:
        nat_rate = services.nat_gateway_usd_per_hour if services else None
        ip_rate = services.public_ipv4_usd_per_hour if services else None
        nat_source = services.sources.get("nat_gateway_usd_per_hour") if services else None
        ip_source = services.sources.get("public_ipv4_usd_per_hour") if services else None
        parts.append(_fixed("nat-gateways", "vpc", nat, nat_rate, "NAT gateway", region, nat_source))
        parts.append(_fixed("public-ipv4", "vpc", nat, ip_rate, "public IPv4 address (NAT EIP)", region, ip_source))

    pool_items, pool_unpriced, committed, pool_costs = _pool_items(plans, region)
    parts += pool_items
    parts += pool_unpriced
    parts += [_hybrid_fee(p, services, region) for p in plans if p.kind == "hybrid"]
    parts += _lustre(spec, services, region)
    parts += _efs(spec, services, region)

    return StackCost(
        region=region,
        items=tuple(p for p in parts if isinstance(p, CostItem)),
        unpriced=tuple(p for p in parts if isinstance(p, Unpriced)),
        committed=tuple(committed),
        pools=pool_costs,
    )
