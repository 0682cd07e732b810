"""Which regions offer each AWS service a stack creates resources in, as sourced data (`region_services.yaml`).

The table is generated from botocore's endpoint table by `blueprint.region_services_table`; each service names the
source its regions come from.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from components.yaml_loader import parse_yaml

REGION_SERVICES_PATH = Path(__file__).parent / "region_services.yaml"


@dataclass(frozen=True)
class RegionalService:
    """One AWS service and the regions that offer it."""

    key: str
    name: str
    source: str
    regions: frozenset[str]


@cache
def services() -> dict[str, RegionalService]:
    """Service key (botocore's endpoint prefix, or `eks-hybrid-nodes`) -> the service."""
    data = parse_yaml(REGION_SERVICES_PATH.read_text())
    return {
        key: RegionalService(key, str(entry["name"]), str(entry["source"]), frozenset(entry["regions"]))
        for key, entry in data["services"].items()
    }
