"""What a stack bills per hour while it runs, part by part, from the Region's catalog prices.

`$/h idle` is every pool at its minimum, `$/h at max` every pool at its maximum; Capacity Blocks are committed, not
hourly; usage-billed charges are listed as not counted, each with its reason. Invariant: a price comes from the
stack's Region only (components.catalog.prices), else the item is unpriced and left out of the totals; spot is an
estimate ([SPOT]). See docs/architecture.md#costs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from components.catalog import prices
from components.catalog.versions import kubernetes_version_support
from components.config import StackConfig
from components.planning.addons.monitoring import container_insights_alarms
from components.planning.addons.node_health_alarms import pool_alarms, watched_pools
from components.planning.addons.selection import AddonSelection
from components.planning.key_domains import stack_key_domains
from components.planning.lustre import per_unit_throughput
from components.planning.pools import PoolPlan
from components.planning.stack_plan import StackPlan
from components.planning.subnets import nat_gateway_zones


@dataclass(frozen=True)
class CostItem:
    """One billed part of the stack and what it costs per hour at the pools' minimum and maximum."""

    #: What bills: `control-plane`, `nat-gateways`, `public-ipv4`, `transit-gateway-attachment`, `nodes`,
    #: `reservation`, `root-volumes`, `lustre`, `lustre-metadata`, `efs`, `hybrid-nodes-fee`, `kms-keys`,
    #: `cloudwatch-alarms`, `cloudwatch-dashboard`.
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
class NotCounted:
    """A billed part with no figure at plan time (billed by use, or sized by something the plan cannot see)."""

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
    #: Parts billed by use or of a size the plan cannot know: named, never in the totals.
    not_counted: tuple[NotCounted, ...] = ()

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
        detail = (
            f"{lustre.storage_capacity_gib:,} GiB (billed per GB-month) x ${per_gb:g}/GB-month ({label}) / {hours:g} h"
        )
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


# ------------------------------------------------------------------------------------------ root volumes
def _root_volumes(
    plans: Sequence[PoolPlan], services: prices.ServicePrices | None, region: str
) -> list[CostItem | Unpriced | NotCounted]:
    """Each running node's gp3 volume (`rootVolumeGiB`, the launch template's size), billed per GB-month while it
    exists ([EBSPRICE]): at the pool's minimum nodes idle, its maximum at max. Owned servers have none."""
    out: list[CostItem | Unpriced | NotCounted] = []
    per_gb = services.ebs_gp3_usd_per_gb_month if services else None
    hours = prices.hours_per_month()
    for plan in plans:
        if plan.kind != "aws":
            continue
        size = plan.pool.root_volume_gib
        if plan.pool.ami_family == "bottlerocket":
            out.append(
                NotCounted(
                    "root-volumes",
                    plan.name,
                    "the Bottlerocket OS volume keeps the AMI's snapshot size, "
                    "not known at plan time (its data volume is counted)",
                )
            )
        if per_gb is None or services is None:
            out.append(Unpriced("root-volumes", plan.name, no_price("EBS gp3 storage", region)))
            continue
        per_node = size * per_gb / hours
        detail = (
            f"{plan.min_nodes}..{plan.max_nodes} x {size:,} GiB gp3 (billed per GB-month) x ${per_gb:g}/GB-month"
            f" / {hours:g} h"
        )
        source = services.sources["ebs_gp3_usd_per_gb_month"]
        out.append(
            CostItem("root-volumes", plan.name, plan.min_nodes * per_node, plan.max_nodes * per_node, detail, source)
        )
    return out


# ------------------------------------------------------------------------------------------- monitoring, keys
def _monthly(
    kind: str, name: str, count: int, rate: float | None, what: str, region: str, source: str | None
) -> CostItem | Unpriced:
    """A part billed per unit-month (a KMS key, an alarm, a dashboard), as an hourly figure."""
    if rate is None or source is None:
        return Unpriced(kind, name, no_price(what, region))
    hours = prices.hours_per_month()
    hourly = count * rate / hours
    return CostItem(kind, name, hourly, hourly, f"{count} x {what} at ${rate:g}/month / {hours:g} h", source)


def kms_key_count(spec: StackConfig, selection: AddonSelection) -> int:
    """The cluster's key (secrets, volumes, and every data domain without a key of its own), one per other data domain
    (`cluster.encryption.keyPerDomain`), and the alerts topic's key when the stack creates the topic
    (components/cluster.py, components/addons/monitoring.py)."""
    return len(stack_key_domains(spec)) + (selection.alerts_topic == "create")


def _monitoring(
    spec: StackConfig,
    selection: AddonSelection,
    plans: Sequence[PoolPlan],
    services: prices.ServicePrices | None,
    region: str,
) -> list[CostItem | Unpriced]:
    """The KMS keys, and on the Container Insights path its GPU alarms and the health loop's heartbeat alarm
    (standard resolution: periods of 60 s and more) and dashboard, each billed per month ([KMSPRICE], [CWPRICE]);
    the loop's Metrics Insights alarms are billed by the metrics they analyze (`_not_counted`)."""

    def monthly(kind: str, count: int, key: str, what: str) -> CostItem | Unpriced:
        rate = getattr(services, key) if services else None
        source = services.sources.get(key) if services else None
        return _monthly(kind, spec.cluster.name, count, rate, what, region, source)

    out = [monthly("kms-keys", kms_key_count(spec, selection), "kms_key_usd_per_month", "KMS key")]
    if selection.on("container-insights"):
        alarms = len(container_insights_alarms(spec.addons.monitoring.alerts))
        alarms += 1 if selection.on("node-health") else 0  # the loop's heartbeat; its pool alarms are billed by use
        out.append(monthly("cloudwatch-alarms", alarms, "cloudwatch_alarm_usd_per_month", "standard-resolution alarm"))
        out.append(monthly("cloudwatch-dashboard", 1, "cloudwatch_dashboard_usd_per_month", "CloudWatch dashboard"))
    return out


# -------------------------------------------------------------------------------------------- not counted
def _query_alarms(spec: StackConfig, selection: AddonSelection, plans: Sequence[PoolPlan]) -> list[NotCounted]:
    """The health loop's Metrics Insights alarms on the Container Insights path: billed by the metrics their queries
    analyze, per hour ([CWMIBILL]), at most one per pool each reads."""
    if not (selection.on("container-insights") and selection.on("node-health")):
        return []
    alarms = pool_alarms(plans)
    watched = watched_pools(plans)
    series = sum(len(watched[alarm.suffix]) for alarm in alarms)
    return [
        NotCounted(
            "cloudwatch-query-alarms",
            spec.cluster.name,
            f"billed by use: {len(alarms)} Metrics Insights alarms, by the metrics their queries analyze "
            f"(at most {series}: one per pool each reads) ([CWMIBILL])",
        )
    ]


def _not_counted(
    spec: StackConfig, selection: AddonSelection, plans: Sequence[PoolPlan], nat: int, tgw: bool
) -> list[NotCounted]:
    """What the stack bills by use (no figure at plan time), each named with how AWS bills it."""
    name = spec.cluster.name
    out = [
        NotCounted("data-transfer", "vpc", "billed by use: data between AZs, to the internet or to the site, per GB")
    ]
    if nat:
        out.append(NotCounted("nat-data", "vpc", "billed by use: data processed by the NAT gateways, per GB"))
    if tgw:
        out.append(NotCounted("transit-gateway-data", "vpc", "billed by use: data sent to the transit gateway, per GB"))
    if spec.network.site_connection is not None:
        out.append(
            NotCounted(
                "site-link",
                "vpc",
                "the VPN or Direct Connect link to the site is not created by the stack: billed to its owner",
            )
        )
    flow_logs = spec.network.existing_vpc is None and spec.network.flow_logs.enabled
    logs = "control-plane logs" + (", VPC flow logs" if flow_logs else "")
    out.append(NotCounted("logs", name, f"billed by use: CloudWatch Logs ingestion and storage per GB ({logs})"))
    if selection.on("container-insights"):
        out.append(
            NotCounted(
                "container-insights",
                name,
                "billed by use: Container Insights metrics and performance logs, "
                "by observations or metrics ingested ([CWPRICE])",
            )
        )
    out += _query_alarms(spec, selection, plans)
    out.append(NotCounted("kms-requests", name, "billed by use: KMS requests beyond the free tier"))
    if spec.storage.nfs is not None and spec.storage.nfs.kind == "efs":
        out.append(NotCounted("efs-storage", spec.storage.nfs.name, "billed by use: EFS storage per GB-month stored"))
    lustre = spec.storage.lustre
    if lustre is not None and lustre.data_repositories:
        out.append(NotCounted("s3", lustre.name, "billed by use: S3 storage and requests of the data repositories"))
    if selection.on("node-termination-handler"):
        out.append(NotCounted("interruption-queue", name, "billed by use: SQS requests and EventBridge events"))
    return out


# ------------------------------------------------------------------------------------------------------ total
def _fixed(
    kind: str, name: str, count: int, rate: float | None, what: str, region: str, source: str | None
) -> CostItem | Unpriced:
    """A part billed per unit-hour (the cluster, each NAT gateway or address), or unpriced without a rate."""
    if rate is None or source is None:
        return Unpriced(kind, name, no_price(what, region))
    hourly = count * rate
    return CostItem(kind, name, hourly, hourly, f"{count} x {what} at ${rate:g}/h", source)


def stack_cost(stack_plan: StackPlan, on: dt.date) -> StackCost:
    """Every billed part of the stack in its Region, priced, unpriced or committed."""
    spec, plans = stack_plan.spec, stack_plan.pools
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
    site = spec.network.site_connection
    tgw = site is not None and site.transit_gateway_id is not None
    if tgw:
        # The VPC's owner pays the attachment's hours ([TGWPRICE]); the gateway's owner pays nothing for it.
        tgw_rate = services.transit_gateway_attachment_usd_per_hour if services else None
        tgw_source = services.sources.get("transit_gateway_attachment_usd_per_hour") if services else None
        what = "transit gateway VPC attachment"
        parts.append(_fixed("transit-gateway-attachment", "vpc", 1, tgw_rate, what, region, tgw_source))
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
    volumes = _root_volumes(plans, services, region)
    parts += [v for v in volumes if not isinstance(v, NotCounted)]
    parts += _lustre(spec, services, region)
    parts += _efs(spec, services, region)
    selection = stack_plan.addons
    parts += _monitoring(spec, selection, plans, services, region)
    not_counted = [v for v in volumes if isinstance(v, NotCounted)] + _not_counted(spec, selection, plans, nat, tgw)

    return StackCost(
        region=region,
        items=tuple(p for p in parts if isinstance(p, CostItem)),
        unpriced=tuple(p for p in parts if isinstance(p, Unpriced)),
        committed=tuple(committed),
        pools=pool_costs,
        not_counted=tuple(not_counted),
    )
