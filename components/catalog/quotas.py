"""The AWS service quotas a stack's resources count against, as sourced data (`quotas.yaml`).

The EC2 vCPU quotas come in groups of instance families, one quota for on-demand and one for spot per group; the
count quotas (VPCs, NAT gateways, Elastic IPs, FSx) are keyed by what the stack creates. Each entry cites its sources
by tag; the tags are defined in the file's `sources:` map (listed in docs/sources.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from components.catalog.citations import check_tags, file_sources
from components.yaml_loader import parse_yaml

QUOTAS_PATH = Path(__file__).parent / "quotas.yaml"


@dataclass(frozen=True)
class Quota:
    """One quota: the service code and quota code `aws service-quotas` takes, its name in the console, AWS's
    documented default for a new account (None where AWS documents none), and what it is counted per."""

    key: str
    service: str
    name: str
    code: str | None
    default: int | None
    scope: str
    #: What the quota counts: `vCPUs`, `GiB`, or items (`count`).
    unit: str
    source: str


@dataclass(frozen=True)
class VcpuGroup:
    """A group of EC2 instance families that share one on-demand and one spot vCPU quota."""

    group: str
    families: tuple[str, ...]
    on_demand: Quota
    spot: Quota


def _data() -> dict[str, Any]:
    data: dict[str, Any] = parse_yaml(QUOTAS_PATH.read_text())
    return data


def _checked_source(where: str, value: str) -> str:
    check_tags(f"{QUOTAS_PATH.name}: {where}", value, file_sources(QUOTAS_PATH))
    return value


@cache
def vcpu_groups() -> tuple[VcpuGroup, ...]:
    data = _data()
    out = []
    for entry in data["ec2_vcpu_groups"]:
        source = _checked_source(entry["group"], entry["source"])
        quotas = {
            market: Quota(
                key=f"{entry['group']} {market}",
                service="ec2",
                name=entry[market]["name"],
                code=entry[market]["code"],
                default=None,
                scope="Region",
                unit="vCPUs",
                source=source,
            )
            for market in ("on_demand", "spot")
        }
        out.append(VcpuGroup(entry["group"], tuple(entry["families"]), quotas["on_demand"], quotas["spot"]))
    return tuple(out)


@cache
def count_quotas() -> dict[str, Quota]:
    """Key (`vpcs`, `nat_gateways`, `elastic_ips`, ...) -> the quota."""
    data = _data()
    return {
        key: Quota(
            key=key,
            service=entry["service"],
            name=entry["name"],
            code=entry["code"],
            default=entry["default"],
            scope=entry["scope"],
            unit=entry["unit"],
            source=_checked_source(key, entry["source"]),
        )
        for key, entry in data["quotas"].items()
    }


def instance_family(instance_type: str) -> str:
    """The family letters of an instance type's name: `p5.48xlarge` -> `p`, `g6e.xlarge` -> `g`, `vt1.3xlarge` ->
    `vt`, `inf2.xlarge` -> `inf`."""
    match = re.match(r"[a-z]+", instance_type)
    return match.group(0) if match else ""


def vcpu_group(instance_type: str) -> VcpuGroup:
    """The vCPU quota group an instance type counts against; KeyError for a family no group lists."""
    family = instance_family(instance_type)
    for group in vcpu_groups():
        if family in group.families:
            return group
    raise KeyError(f"no EC2 vCPU quota group lists the family {family!r} of {instance_type} (catalog/quotas.yaml)")
