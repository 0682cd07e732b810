"""The Availability Zones of each AWS Region, by name and AZ ID, as sourced data (`zones.yaml`).

A misspelt zone (`us-west-2z`) is otherwise refused only by EC2, mid-deploy, after the VPC exists. The loader checks
every entry, so a bad refresh fails at the first lookup, not as a wrong verdict on a stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from components.catalog import CatalogError
from components.catalog.citations import read_sources
from components.catalog.offerings import AZ_ID, az_id_order
from components.catalog.regions import regions
from components.yaml_loader import parse_yaml

ZONES_PATH = Path(__file__).parent / "zones.yaml"
MAPPINGS = ("uniform", "independent")
#: The top-level key listing the AZ IDs EKS refuses for a cluster's subnets.
REFUSED_KEY = "eks_control_plane_refused"


@dataclass(frozen=True)
class RegionZones:
    """A Region's AZ names (every name valid in some account) and AZ IDs."""

    region: str
    source: str
    mapping: str
    ids: tuple[str, ...]
    names: tuple[str, ...]
    derived: tuple[str, ...]


def _listed(where: str, value: Any, valid: re.Pattern[str], order: Any = None) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and valid.fullmatch(v) for v in value):
        raise CatalogError(f"{where}: a non-empty list matching {valid.pattern} is required (got {value!r})")
    if list(value) != sorted(set(value), key=order):
        raise CatalogError(f"{where}: list each entry once, in order")
    return tuple(value)


def _region(where: str, region: str, raw: Any, tags: set[str]) -> RegionZones:
    if region not in regions():
        raise CatalogError(f"{where}: {region!r} is not a region of components/catalog/regions.yaml")
    if not isinstance(raw, dict) or not {"source", "mapping", "ids", "names"} <= set(raw) <= {
        "source",
        "mapping",
        "ids",
        "names",
        "derived",
    }:
        raise CatalogError(f"{where}: needs `source`, `mapping`, `ids` and `names` (and optionally `derived`)")
    unknown = set(str(raw["source"]).split("+")) - tags
    if unknown:
        raise CatalogError(f"{where}.source: unknown source tag(s) {sorted(unknown)}; known: {sorted(tags)}")
    if raw["mapping"] not in MAPPINGS:
        raise CatalogError(f"{where}.mapping: one of {', '.join(MAPPINGS)} (got {raw['mapping']!r})")
    ids = _listed(f"{where}.ids", raw["ids"], AZ_ID, az_id_order)
    if len({AZ_ID.fullmatch(i)["region"] for i in ids}) != 1:  # type: ignore[index]
        raise CatalogError(f"{where}.ids: AZ IDs of one Region only (got {', '.join(ids)})")
    name = re.compile(re.escape(region) + "[a-z]")
    names = _listed(f"{where}.names", raw["names"], name)
    derived = _listed(f"{where}.derived", raw["derived"], name) if "derived" in raw else ()
    if not set(derived) <= set(names):
        raise CatalogError(f"{where}.derived: {sorted(set(derived) - set(names))} not in `names`")
    return RegionZones(region, str(raw["source"]), str(raw["mapping"]), ids, names, derived)


def load_zones(path: Path | None = None) -> dict[str, RegionZones]:
    """Every Region of the zones file, checked. Raises :class:`CatalogError` on any bad entry."""
    path = path or ZONES_PATH
    data = parse_yaml(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or set(data) != {"sources", "regions", REFUSED_KEY}:
        raise CatalogError(f"{path}: needs exactly `sources`, `regions` and `{REFUSED_KEY}` at the top level")
    tags = read_sources(data["sources"], path)
    if not isinstance(data["regions"], dict):
        raise CatalogError(f"{path}: `regions` must map region -> zones")
    return {
        str(region): _region(f"{path.name}: regions.{region}", str(region), raw, set(tags))
        for region, raw in data["regions"].items()
    }


def load_refused_zone_ids(path: Path | None = None) -> frozenset[str]:
    """The AZ IDs EKS refuses for a cluster's subnets (`eks_control_plane_refused`), checked."""
    path = path or ZONES_PATH
    data = parse_yaml(path.read_text(encoding="utf-8"))
    entry = data.get(REFUSED_KEY) if isinstance(data, dict) else None
    if not isinstance(entry, dict) or set(entry) != {"source", "ids"}:
        raise CatalogError(f"{path}: `{REFUSED_KEY}` needs `source` and `ids`")
    unknown = set(str(entry["source"]).split("+")) - set(data["sources"])
    if unknown:
        raise CatalogError(f"{path}: {REFUSED_KEY}.source: unknown source tag(s) {sorted(unknown)}")
    return frozenset(_listed(f"{path.name}: {REFUSED_KEY}.ids", entry["ids"], AZ_ID))


@cache
def eks_refused_zone_ids() -> frozenset[str]:
    """AZ IDs no EKS cluster subnet may be in (EKS networking requirements; components/catalog/zones.yaml)."""
    return load_refused_zone_ids()


@cache
def _default() -> dict[str, RegionZones]:
    return load_zones()


def region_zones(region: str) -> RegionZones | None:
    """The catalog's zones of `region`, None for a Region it does not list (other partitions)."""
    return _default().get(region)
