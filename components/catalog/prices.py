"""What the stack's billed parts cost, per Region, as sourced data (`prices.yaml`, with `instances.yaml` for
us-east-1 instance prices).

A price is looked up for one Region and is None where no source gave one: callers report the item unpriced
("no price for <item> in <region>") rather than borrow another Region's figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from components import catalog
from components.catalog.citations import citation_texts, file_sources
from components.yaml_loader import parse_yaml

PRICES_PATH = Path(__file__).parent / "prices.yaml"


@dataclass(frozen=True)
class PriceSource:
    """Where a Region's instance prices come from, and when they were read."""

    tag: str
    title: str
    url: str
    date: str


@dataclass(frozen=True)
class HybridTier:
    """One tier of the EKS Hybrid Nodes fee: `usd` per vCPU-hour up to `up_to` vCPU-hours a month (None: no limit)."""

    up_to: int | None
    usd: float


@dataclass(frozen=True)
class ServicePrices:
    """One Region's service prices (None where no source gave the figure)."""

    region: str
    date: str
    eks_standard_usd_per_hour: float | None
    eks_extended_usd_per_hour: float | None
    hybrid_tiers: tuple[HybridTier, ...]
    nat_gateway_usd_per_hour: float | None
    public_ipv4_usd_per_hour: float | None
    #: Deployment type -> per-unit throughput (MB/s/TiB; 0 for SCRATCH_2) -> USD per GB-month.
    lustre_usd_per_gb_month: Mapping[str, Mapping[int, float]]
    lustre_metadata_usd_per_iops_month: float | None
    efs_provisioned_usd_per_mbps_month: float | None
    transit_gateway_attachment_usd_per_hour: float | None
    ebs_gp3_usd_per_gb_month: float | None
    kms_key_usd_per_month: float | None
    cloudwatch_alarm_usd_per_month: float | None
    cloudwatch_dashboard_usd_per_month: float | None
    #: Source tag of each item, for the summary's `source` fields.
    sources: Mapping[str, str]


@cache
def _data() -> dict[str, Any]:
    data = parse_yaml(PRICES_PATH.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


@cache
def _snapshot() -> dict[str, Any]:
    """instances.yaml's `price_snapshot`: the one Region its `on_demand_usd_per_hour` prices are for."""
    data = parse_yaml(catalog.INSTANCES_PATH.read_text(encoding="utf-8"))
    return dict(data["price_snapshot"])


def sources() -> Mapping[str, str]:
    """Source tag -> citation (title <url> [snapshot]) for the prices."""
    return citation_texts(file_sources(PRICES_PATH))


def hours_per_month() -> float:
    """Hours in a billing month when a monthly price is turned into an hourly one (AWS's 730)."""
    return float(_data()["hours_per_month"]["value"])


def spot_discount_estimate() -> float:
    """The assumed spot discount off on-demand: AWS publishes none, so it is an estimate with its source."""
    return float(_data()["spot_discount_estimate"]["value"])


def instance_price_regions() -> tuple[str, ...]:
    """Every Region the price tables cover (priced or explicitly empty)."""
    return (str(_snapshot()["region"]), *(str(r) for r in _data()["instances"]["regions"]))


def instance_price_source(region: str) -> PriceSource:
    """The source of a Region's instance prices: instances.yaml's snapshot for its Region, else prices.yaml's."""
    if region == _snapshot()["region"]:
        tag, date = str(_snapshot()["source"]), str(_snapshot()["date"])
        source = file_sources(catalog.INSTANCES_PATH)[tag]
    else:
        tag, date = str(_data()["instances"]["source"]), str(_data()["instances"]["date"])
        source = file_sources(PRICES_PATH)[tag]
    return PriceSource(tag=tag, title=source.title, url=source.url, date=date)


def on_demand_usd_per_hour(instance_type: str, region: str) -> float | None:
    """Linux on-demand price of one instance-hour of `instance_type` in `region`; None when no source prices it
    there (the type is not sold there, or the source does not list it)."""
    if region == _snapshot()["region"]:
        known = catalog.instance_types()
        return known[instance_type].on_demand_usd_per_hour if instance_type in known else None
    prices = _data()["instances"]["regions"].get(region) or {}
    value = prices.get(instance_type)
    return None if value is None else float(value)


def _value(entry: Any) -> float | None:
    value = entry.get("value") if isinstance(entry, dict) else entry
    return None if value is None else float(value)


#: Single-figure service prices, read alike (a `value` and a `source`).
MONTHLY_OR_HOURLY = (
    "transit_gateway_attachment_usd_per_hour",
    "ebs_gp3_usd_per_gb_month",
    "kms_key_usd_per_month",
    "cloudwatch_alarm_usd_per_month",
    "cloudwatch_dashboard_usd_per_month",
)


def service_prices(region: str) -> ServicePrices | None:
    """The Region's service prices, or None when no source priced any service there."""
    entry = _data()["services"].get(region)
    if entry is None:
        return None
    eks = entry.get("eks_cluster_usd_per_hour") or {}
    hybrid = entry.get("hybrid_nodes_usd_per_vcpu_hour") or {}
    lustre = entry.get("lustre_usd_per_gb_month") or {}
    lustre_prices: dict[str, dict[int, float]] = {}
    for deployment, tiers in lustre.items():
        if deployment == "source":
            continue
        lustre_prices[str(deployment)] = (
            {int(k): float(v) for k, v in tiers.items()} if isinstance(tiers, dict) else {0: float(tiers)}
        )
    keys = (
        "eks_cluster_usd_per_hour",
        "hybrid_nodes_usd_per_vcpu_hour",
        "nat_gateway_usd_per_hour",
        "public_ipv4_usd_per_hour",
        "lustre_usd_per_gb_month",
        "lustre_metadata_usd_per_iops_month",
        "efs_provisioned_usd_per_mbps_month",
        *MONTHLY_OR_HOURLY,
    )
    return ServicePrices(
        region=region,
        date=str(entry.get("date", "")),
        eks_standard_usd_per_hour=_value(eks.get("standard")),
        eks_extended_usd_per_hour=_value(eks.get("extended")),
        hybrid_tiers=tuple(
            HybridTier(up_to=t["up_to_vcpu_hours_per_month"], usd=float(t["usd"])) for t in hybrid.get("tiers", [])
        ),
        nat_gateway_usd_per_hour=_value(entry.get("nat_gateway_usd_per_hour")),
        public_ipv4_usd_per_hour=_value(entry.get("public_ipv4_usd_per_hour")),
        lustre_usd_per_gb_month=lustre_prices,
        lustre_metadata_usd_per_iops_month=_value(entry.get("lustre_metadata_usd_per_iops_month")),
        efs_provisioned_usd_per_mbps_month=_value(entry.get("efs_provisioned_usd_per_mbps_month")),
        **{key: _value(entry.get(key) or {}) for key in MONTHLY_OR_HOURLY},
        sources={key: str(entry[key]["source"]) for key in keys if isinstance(entry.get(key), dict)},
    )
