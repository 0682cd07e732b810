"""Presentation of the hardware catalog for ``blueprint catalog`` (table for people, rows for JSON).

Why separate from the loader: the catalog is consumed by code that must not import a terminal library's
layout concerns; this module only formats what the loader already validated, so the table and the JSON
can never disagree (the table is built from the rows).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from components.catalog import InstanceType, format_card_ranges, instance_types

__all__ = ["catalog_rows", "catalog_table"]

#: (row key, column header, right-justify) in display order.
_COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("type", "type", False),
    ("gpu", "GPU", False),
    ("gpuCount", "count", True),
    ("gpuMemoryGiB", "GiB/GPU", True),
    ("vcpu", "vCPU", True),
    ("memoryGiB", "memory", True),
    ("networkGbps", "network Gbps", True),
    ("maxEfaInterfaces", "EFA max", True),
    ("networkCards", "cards", True),
    ("efaCards", "EFA cards", False),
    ("nvlink", "NVLink", False),
    ("nvme", "NVMe", False),
    ("gpudirectRdma", "GDR", False),
    ("onDemandUsdPerHour", "$/h", True),
    ("sources", "sources", False),
)


def _row(itype: InstanceType) -> dict[str, Any]:
    return {
        "type": itype.name,
        "family": itype.family,
        "gpu": itype.gpu_model,
        "gpuCount": itype.gpu_count,
        "gpuMemoryGiB": itype.gpu_memory_gib,
        "vcpu": itype.vcpu,
        "memoryGiB": itype.memory_gib,
        "networkGbps": itype.network_gbps,
        "efaSupported": itype.efa_supported,
        "maxEfaInterfaces": itype.max_efa_interfaces,
        "networkCards": itype.network_cards,
        "efaCards": format_card_ranges(itype.efa_cards),
        "nvlink": itype.nvlink,
        "nvme": f"{itype.local_nvme_count} x {itype.local_nvme_gb} GB" if itype.local_nvme_count else None,
        "nvmeTotalGB": itype.local_nvme_total_gb,
        "gpudirectRdma": itype.gpudirect_rdma,
        "onDemandUsdPerHour": itype.on_demand_usd_per_hour,
        "priceDate": itype.price_date,
        "arch": itype.arch,
        "sources": dict(itype.source),
        "notes": itype.notes,
    }


def catalog_rows() -> list[dict[str, Any]]:
    """One JSON-ready dict per instance type (camelCase keys, like the plan JSON), GPU types first."""
    ordered = sorted(instance_types().values(), key=lambda t: (not t.is_gpu, t.family, t.vcpu, t.name))
    return [_row(t) for t in ordered]


def _cell(key: str, value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "sources":
        return " ".join(f"{group}:{tags}" for group, tags in value.items())
    if key == "onDemandUsdPerHour":
        return f"{value:,.4f}".rstrip("0").rstrip(".")
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def catalog_table() -> Table:
    """The catalog as a rich Table; unpriced types show "-" and their notes explain why (see JSON)."""
    table = Table(title="Instance catalog (us-east-1 on-demand prices)", show_lines=False)
    for _, header, right in _COLUMNS:
        table.add_column(header, justify="right" if right else "left", overflow="fold")
    for row in catalog_rows():
        table.add_row(*(_cell(key, row[key]) for key, _, _ in _COLUMNS))
    return table
