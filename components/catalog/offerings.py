"""Where each catalog instance type is offered: AZ IDs per region, as sourced data (`offerings.yaml`).

An Auto Scaling group whose subnets include an AZ that does not offer its instance type fails to launch there, and
EC2 answers only at launch time. The catalog knows a snapshot of EC2's instance type offerings (its source and date
are in the YAML), keyed by AZ ID because AZ names map to different zones in different accounts. The loader checks
every entry, so a bad refresh fails at the first lookup, not as a wrong verdict on a stack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from components.catalog import CatalogError, instance_types
from components.catalog.citations import read_sources
from components.catalog.regions import regions
from components.yaml_loader import parse_yaml

OFFERINGS_PATH = Path(__file__).parent / "offerings.yaml"
#: An AZ ID: the region's short code (`use1`), `-az` and a number (AWS Regions and Availability Zones guide, "AZ IDs",
#: https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html).
AZ_ID = re.compile(r"^(?P<region>[a-z]+\d+)-az(?P<number>\d+)$")


@dataclass(frozen=True)
class RegionOfferings:
    """One region's snapshot: every AZ ID seen there, and the AZ IDs offering each instance type it lists."""

    region: str
    source: str
    zones: tuple[str, ...]
    offerings: Mapping[str, frozenset[str]]

    def zones_offering(self, instance_type: str) -> frozenset[str] | None:
        """AZ IDs that offer `instance_type`; empty when none does, None when the snapshot does not list it."""
        return self.offerings.get(instance_type)


def az_id_order(az_id: str) -> tuple[int, str]:
    """`use1-az2` before `use1-az10`."""
    match = AZ_ID.match(az_id)
    return (int(match["number"]), az_id) if match else (0, az_id)


def _az_ids(where: str, value: Any, prefix: str | None) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CatalogError(f"{where}: a list of AZ IDs is required")
    for az_id in value:
        match = AZ_ID.match(az_id)
        if match is None or (prefix is not None and match["region"] != prefix):
            raise CatalogError(f"{where}: {az_id!r} is not an AZ ID of this region (e.g. {prefix or 'use1'}-az1)")
    if list(value) != sorted(set(value), key=az_id_order):
        raise CatalogError(f"{where}: AZ IDs must be listed once each, in order")
    return tuple(value)


def _region(where: str, region: str, raw: Any, tags: Iterable[str], types: Iterable[str]) -> RegionOfferings:
    if region not in regions():
        raise CatalogError(f"{where}: {region!r} is not a region of components/catalog/regions.yaml")
    if not isinstance(raw, dict) or set(raw) != {"source", "zones", "offerings"}:
        raise CatalogError(f"{where}: needs exactly `source`, `zones` and `offerings`")
    if raw["source"] not in tags:
        raise CatalogError(f"{where}.source: unknown source tag {raw['source']!r}; known: {sorted(tags)}")
    first = raw["zones"][0] if isinstance(raw["zones"], list) and raw["zones"] else None
    match = AZ_ID.match(first) if isinstance(first, str) else None
    if match is None:
        raise CatalogError(f"{where}.zones: a non-empty list of AZ IDs (use1-az1, ...) is required")
    prefix = match["region"]
    zones = _az_ids(f"{where}.zones", raw["zones"], prefix)
    offered = raw["offerings"]
    if not isinstance(offered, dict):
        raise CatalogError(f"{where}.offerings: a map of instance type -> AZ IDs is required")
    offerings: dict[str, frozenset[str]] = {}
    for name, ids in offered.items():
        if name not in types:
            raise CatalogError(f"{where}.offerings: {name!r} is not an instance type of the catalog")
        listed = _az_ids(f"{where}.offerings.{name}", ids, prefix)
        if not set(listed) <= set(zones):
            raise CatalogError(f"{where}.offerings.{name}: {sorted(set(listed) - set(zones))} not in `zones`")
        offerings[name] = frozenset(listed)
    return RegionOfferings(region, str(raw["source"]), zones, offerings)


def load_offerings(path: Path | None = None) -> dict[str, RegionOfferings]:
    """Every region of the offerings file, checked. Raises :class:`CatalogError` on any bad entry."""
    path = path or OFFERINGS_PATH
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or set(data) != {"sources", "regions"}:
        raise CatalogError(f"{path}: needs exactly `sources` and `regions` at the top level")
    tags = read_sources(data["sources"], path)
    if not isinstance(data["regions"], dict):
        raise CatalogError(f"{path}: `regions` must map region -> offerings")
    types = set(instance_types())
    return {
        str(region): _region(f"{path.name}: regions.{region}", str(region), raw, tags, types)
        for region, raw in data["regions"].items()
    }


@cache
def _default() -> dict[str, RegionOfferings]:
    return load_offerings()


def region_offerings(region: str) -> RegionOfferings | None:
    """The catalog's offerings snapshot of `region`, None where it has none."""
    return _default().get(region)
