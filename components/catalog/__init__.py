"""The hardware catalog: EC2 instance types and GPU models, as sourced data.

EFA layouts, node-template tags, capacity checks, cost estimates and the policy pack read the same instance facts
from `instances.yaml` (types, instance sets, citations) and `gpus.yaml` (GPU models). Invariants: every field group
and set member cites a known source; loading validates both files, so bad data fails at the first lookup. The
loaders take optional paths so tests can load broken files. See docs/sources.md#source-tags.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from components.catalog.citations import CatalogError, check_tags, citation_texts, read_sources, read_yaml

__all__ = [
    "COMMON_FIELD_GROUPS",
    "GPUS_PATH",
    "GPU_FIELD_GROUPS",
    "INSTANCES_PATH",
    "INSTANCE_SETS",
    "MIG_COMPUTE_SLICES",
    "MIG_MEMORY_SLICES",
    "CatalogError",
    "GpuModel",
    "HardwareCatalog",
    "InstanceSet",
    "InstanceType",
    "MigGeometry",
    "MigProfile",
    "capacity_block_types",
    "efa_instance_type_names",
    "eight_lustre_efa_interface_types",
    "format_card_ranges",
    "gpu_model",
    "gpu_models",
    "instance_set",
    "instance_type",
    "instance_types",
    "instance_types_with_gpu",
    "is_rented_by_aws",
    "load_catalog",
    "no_lustre_efa_families",
    "parse_card_ranges",
    "sources",
]

CATALOG_DIR = Path(__file__).parent
INSTANCES_PATH = CATALOG_DIR / "instances.yaml"
GPUS_PATH = CATALOG_DIR / "gpus.yaml"

#: Field groups every instance entry must cite. GPU-only groups apply to types with GPUs.
COMMON_FIELD_GROUPS: tuple[str, ...] = ("compute", "gpu", "network", "eni", "efa", "nvme", "price")
GPU_FIELD_GROUPS: tuple[str, ...] = ("nvlink", "gdr")

_RANGE_PART = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_card_ranges(text: str) -> tuple[int, ...]:
    """Parse a compact card list such as ``"0-31"``, ``"1-16"``, ``"0,2,4"`` or ``""`` into indexes."""
    cards: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        match = _RANGE_PART.match(part)
        if match is None:
            raise ValueError(f"bad network-card range {part!r} (expected e.g. '0-31', '1-16' or '0')")
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if end < start:
            raise ValueError(f"bad network-card range {part!r}: end before start")
        cards.extend(range(start, end + 1))
    return tuple(cards)


def format_card_ranges(cards: tuple[int, ...] | list[int]) -> str:
    """Format card indexes compactly, the inverse of :func:`parse_card_ranges`: (1..16) -> ``"1-16"``."""
    parts: list[str] = []
    ordered = sorted(cards)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


class InstanceType(BaseModel):
    """One EC2 instance type's facts, each field group citing its source in ``source``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    family: str
    gpu_model: str | None
    gpu_count: int = Field(ge=0)
    gpu_memory_gib: float = Field(ge=0, description="per GPU, as the EC2 API reports it (0 for CPU types)")
    vcpu: int = Field(gt=0)
    memory_gib: float = Field(gt=0)
    network_gbps: float = Field(gt=0, description="sustained; for burstable types the baseline")
    efa_supported: bool
    network_cards: int = Field(gt=0)
    default_card_max_enis: int = Field(
        gt=0, description="network interfaces the default network card (card 0) takes: the VPC CNI's pod ENIs"
    )
    ipv4_per_eni: int = Field(gt=1, description="IPv4 addresses per network interface, its primary address included")
    max_efa_interfaces: int = Field(ge=0)
    efa_cards: tuple[int, ...] = Field(description="network-card indexes that carry EFA")
    nvlink: str | None = None
    local_nvme_count: int = Field(ge=0)
    local_nvme_gb: int = Field(ge=0, description="per disk")
    gpudirect_rdma: bool = False
    on_demand_usd_per_hour: float | None = Field(default=None, gt=0)
    price_date: str | None = None
    arch: str = "x86_64"
    source: dict[str, str]
    notes: str | None = Field(default=None, description="what is inferred or unconfirmed, and why")

    @field_validator("efa_cards", mode="before")
    @classmethod
    def _parse_efa_cards(cls, value: Any) -> Any:
        return parse_card_ranges(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_consistency(self) -> InstanceType:
        problems: list[str] = []
        if self.family != self.name.split(".")[0]:
            problems.append(f"family {self.family!r} does not match the name prefix")
        if (self.gpu_model is None) != (self.gpu_count == 0):
            problems.append("gpu_model and gpu_count must both be set (GPU type) or both empty (CPU type)")
        if self.gpu_count > 0 and self.gpu_memory_gib <= 0:
            problems.append("a GPU type needs a positive gpu_memory_gib")
        if self.max_efa_interfaces > self.network_cards:
            problems.append(f"max_efa_interfaces {self.max_efa_interfaces} exceeds network_cards {self.network_cards}")
        if len(self.efa_cards) != self.max_efa_interfaces:
            problems.append(
                f"efa_cards lists {len(self.efa_cards)} cards but max_efa_interfaces is {self.max_efa_interfaces}"
            )
        if len(set(self.efa_cards)) != len(self.efa_cards):
            problems.append("efa_cards has duplicates")
        if any(card not in range(self.network_cards) for card in self.efa_cards):
            problems.append(f"efa_cards {self.efa_cards} outside card indexes 0..{self.network_cards - 1}")
        if 0 in self.efa_cards and self.default_card_max_enis < 2:
            problems.append("card 0 carries EFA but takes fewer than 2 interfaces (the primary and the EFA device)")
        if self.efa_supported != (self.max_efa_interfaces > 0):
            problems.append("efa_supported must be true exactly when max_efa_interfaces > 0")
        if (self.local_nvme_count == 0) != (self.local_nvme_gb == 0):
            problems.append("local_nvme_count and local_nvme_gb must both be 0 or both positive")
        if self.gpudirect_rdma and not self.efa_supported:
            problems.append("gpudirect_rdma requires EFA")
        if self.gpu_count == 0 and self.nvlink is not None:
            problems.append("a CPU type cannot have NVLink")
        required = COMMON_FIELD_GROUPS + (GPU_FIELD_GROUPS if self.gpu_count > 0 else ())
        missing = [group for group in required if not self.source.get(group, "").strip()]
        if missing:
            problems.append(f"no source for field group(s) {', '.join(missing)}")
        unknown = sorted(set(self.source) - set(COMMON_FIELD_GROUPS) - set(GPU_FIELD_GROUPS))
        if unknown:
            problems.append(f"unknown field group(s) in source: {', '.join(unknown)}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def is_gpu(self) -> bool:
        """True for types with at least one GPU."""
        return self.gpu_count > 0

    @property
    def local_nvme_total_gb(self) -> int:
        """Total instance-store NVMe in GB (what a RAID0 over all disks gives)."""
        return self.local_nvme_count * self.local_nvme_gb

    @property
    def gpu_shape(self) -> tuple[str | None, int, float]:
        """(gpu_model, gpu_count, gpu_memory_gib).

        Types with an equal shape are interchangeable in a spot pool (the scheduler sees the same GPUs).
        """
        return (self.gpu_model, self.gpu_count, self.gpu_memory_gib)

    @property
    def usd_per_gpu_hour(self) -> float | None:
        """On-demand price per GPU-hour, derived from the instance price (None without a price or GPUs)."""
        if self.on_demand_usd_per_hour is None or self.gpu_count == 0:
            return None
        return self.on_demand_usd_per_hour / self.gpu_count


#: Every MIG-capable GPU in the catalog splits into this many compute and memory slices (MIG user guide, "Supported
#: MIG Profiles": A100, H100, H200, B200 and B300 profiles count sevenths of the SMs and eighths of the memory).
MIG_COMPUTE_SLICES = 7
MIG_MEMORY_SLICES = 8
_MIG_PROFILE = re.compile(r"^(\d)g\.(\d+)gb(\+me)?$")


class MigProfile(BaseModel):
    """One MIG profile of a GPU: the slices one instance takes and how many instances one GPU holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    compute_slices: int = Field(ge=1, le=MIG_COMPUTE_SLICES)
    memory_slices: int = Field(ge=1, le=MIG_MEMORY_SLICES)
    max_instances: int = Field(ge=1, le=MIG_COMPUTE_SLICES)

    @property
    def media_extensions(self) -> bool:
        """`+me` profiles carry the GPU's media engines; one GPU has one set, so at most one such instance."""
        return self.name.endswith("+me")


class MigGeometry(BaseModel):
    """The MIG profiles of a GPU model, each as `name: [compute slices, memory slices, max instances]`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profiles: Mapping[str, MigProfile]
    source: str

    @field_validator("profiles", mode="before")
    @classmethod
    def _from_rows(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            raise ValueError("mig.profiles must map each profile name to [compute, memory, max instances]")
        rows: dict[str, Any] = {}
        for name, row in raw.items():
            match = _MIG_PROFILE.match(str(name))
            if match is None or not isinstance(row, list) or len(row) != 3:
                raise ValueError(f"MIG profile {name!r}: expected `<c>g.<m>gb[+me]: [compute, memory, max]`")
            if int(match.group(1)) != row[0]:
                raise ValueError(f"MIG profile {name!r}: its name says {match.group(1)} compute slices, not {row[0]}")
            rows[str(name)] = {"name": name, "compute_slices": row[0], "memory_slices": row[1], "max_instances": row[2]}
        return MappingProxyType(rows)


class GpuModel(BaseModel):
    """A GPU model as such, cloud or on-prem. ``rented_by_aws`` is derived from the instance types at load."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    memory_gib: float = Field(gt=0, description="per GPU")
    vendor_memory: str
    form_factor: str = Field(pattern=r"^(PCIe|SXM)$")
    cloud_alternative: str | None = None
    source: str
    mig: MigGeometry | None = Field(default=None, description="MIG profiles; None on GPUs without MIG")
    rented_by_aws: bool = Field(
        default=False, description="set by the loader: true iff some catalog instance type has this GPU"
    )


@dataclass(frozen=True)
class InstanceSet:
    """Instance types (or families) a fact holds for, each member with its source tags."""

    about: str
    members: Mapping[str, str]
    notes: str | None = None


#: The instance sets the code reads; `instances.yaml` must define each.
INSTANCE_SETS = ("capacity_blocks", "no_lustre_efa_families", "eight_lustre_efa_interfaces")


@dataclass(frozen=True)
class HardwareCatalog:
    """Everything loaded from the two YAML files, validated together."""

    sources: Mapping[str, str]
    gpu_models: Mapping[str, GpuModel]
    instance_types: Mapping[str, InstanceType]
    instance_sets: Mapping[str, InstanceSet]


def _instance_sets(raw: Any, path: Path, known: Mapping[str, str]) -> dict[str, InstanceSet]:
    if not isinstance(raw, dict) or sorted(raw) != sorted(INSTANCE_SETS):
        raise CatalogError(f"{path}: `instance_sets:` must define exactly {', '.join(INSTANCE_SETS)}")
    out: dict[str, InstanceSet] = {}
    for name, entry in raw.items():
        members = entry.get("members") if isinstance(entry, dict) else None
        if not isinstance(members, dict) or not members or not str(entry.get("about", "")).strip():
            raise CatalogError(f"{path}: instance_sets.{name} needs `about` and a non-empty `members` map")
        for member, tags in members.items():
            check_tags(f"{path}: instance_sets.{name}.{member}", str(tags or ""), known)
        out[name] = InstanceSet(
            str(entry["about"]), MappingProxyType({str(m): str(t) for m, t in members.items()}), entry.get("notes")
        )
    return out


def load_catalog(instances_path: Path | None = None, gpus_path: Path | None = None) -> HardwareCatalog:
    """Load and cross-check both catalog files. Raises :class:`CatalogError` on any bad entry."""
    ipath = instances_path or INSTANCES_PATH
    gpath = gpus_path or GPUS_PATH
    idata = read_yaml(ipath)
    gdata = read_yaml(gpath)
    known = citation_texts(read_sources(idata.get("sources"), ipath))

    snapshot = idata.get("price_snapshot") or {}
    price_date = snapshot.get("date")
    if not price_date or snapshot.get("source") not in known:
        raise CatalogError(f"{ipath}: `price_snapshot` needs a date and a known source tag")

    raw_gpus = gdata.get("gpu_models")
    if not isinstance(raw_gpus, list) or not raw_gpus:
        raise CatalogError(f"{gpath}: a non-empty `gpu_models:` list is required")
    raw_types = idata.get("instance_types")
    if not isinstance(raw_types, list) or not raw_types:
        raise CatalogError(f"{ipath}: a non-empty `instance_types:` list is required")

    gpu_entries: dict[str, dict[str, Any]] = {}
    for entry in raw_gpus:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not name:
            raise CatalogError(f"{gpath}: every GPU model needs a name: {entry!r}")
        if name in gpu_entries:
            raise CatalogError(f"{gpath}: GPU model {name!r} listed twice")
        if "rented_by_aws" in entry:
            raise CatalogError(f"{gpath}: {name}: rented_by_aws is derived from instances.yaml, do not write it")
        gpu_entries[name] = entry

    types: dict[str, InstanceType] = {}
    for entry in raw_types:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not name:
            raise CatalogError(f"{ipath}: every instance type needs a name: {entry!r}")
        if name in types:
            raise CatalogError(f"{ipath}: instance type {name!r} listed twice")
        for derived in ("family", "gpu_memory_gib", "price_date"):
            if derived in entry:
                raise CatalogError(f"{ipath}: {name}: {derived} is derived by the loader, do not write it")
        model = entry.get("gpu_model")
        if model is not None and model not in gpu_entries:
            raise CatalogError(f"{ipath}: {name}: gpu_model {model!r} is not in {gpath.name}")
        values = dict(entry)
        values["family"] = str(name).split(".")[0]
        # Per-GPU memory is a property of the GPU model: one fact, kept in gpus.yaml.
        values["gpu_memory_gib"] = float(gpu_entries[model]["memory_gib"]) if model is not None else 0.0
        values["price_date"] = price_date if entry.get("on_demand_usd_per_hour") is not None else None
        try:
            itype = InstanceType.model_validate(values)
        except ValueError as exc:
            raise CatalogError(f"{ipath}: {name}: {exc}") from exc
        for group, tags in itype.source.items():
            check_tags(f"{ipath}: {name}: source.{group}", tags, known)
        if itype.on_demand_usd_per_hour is None and not itype.notes:
            raise CatalogError(f"{ipath}: {name}: a missing price needs `notes` saying why")
        types[name] = itype

    rented = {t.gpu_model for t in types.values() if t.gpu_model is not None}
    gpus: dict[str, GpuModel] = {}
    for name, entry in gpu_entries.items():
        try:
            gpu = GpuModel.model_validate({**entry, "rented_by_aws": name in rented})
        except ValueError as exc:
            raise CatalogError(f"{gpath}: {name}: {exc}") from exc
        check_tags(f"{gpath}: {name}: source", gpu.source, known)
        if gpu.mig is not None:
            check_tags(f"{gpath}: {name}: mig.source", gpu.mig.source, known)
        if gpu.cloud_alternative is not None and gpu.cloud_alternative not in types:
            raise CatalogError(
                f"{gpath}: {name}: cloud_alternative {gpu.cloud_alternative!r} is not a catalog instance type"
            )
        gpus[name] = gpu

    return HardwareCatalog(
        sources=MappingProxyType(known),
        gpu_models=MappingProxyType(gpus),
        instance_types=MappingProxyType(types),
        instance_sets=MappingProxyType(_instance_sets(idata.get("instance_sets"), ipath, known)),
    )


@cache
def _default_catalog() -> HardwareCatalog:
    return load_catalog()


def _catalog(instances_path: Path | None = None, gpus_path: Path | None = None) -> HardwareCatalog:
    if instances_path is None and gpus_path is None:
        return _default_catalog()
    return load_catalog(instances_path, gpus_path)


def _unknown(kind: str, name: str, known: Mapping[str, object]) -> KeyError:
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
    return KeyError(f"unknown {kind} {name!r}{hint}")


def instance_types(path: Path | None = None) -> Mapping[str, InstanceType]:
    """All catalog instance types by name (cached for the shipped file; ``path`` loads another file)."""
    return _catalog(path).instance_types


def instance_type(name: str) -> InstanceType:
    """One instance type; an unknown name raises KeyError naming the closest catalog entries."""
    types = instance_types()
    if name not in types:
        raise _unknown("instance type", name, types)
    return types[name]


def gpu_models(path: Path | None = None) -> Mapping[str, GpuModel]:
    """All GPU models by name (``path`` loads another gpus.yaml against the shipped instances)."""
    return _catalog(None, path).gpu_models


def gpu_model(name: str) -> GpuModel:
    """One GPU model; an unknown name raises KeyError naming the closest models."""
    models = gpu_models()
    if name not in models:
        raise _unknown("GPU model", name, models)
    return models[name]


def is_rented_by_aws(model: str) -> bool:
    """Whether some catalog instance type carries this GPU model (unknown model -> KeyError)."""
    return gpu_model(model).rented_by_aws


def efa_instance_type_names() -> list[str]:
    """Names of the catalog types that support EFA, sorted (for error messages and policies)."""
    return sorted(name for name, t in instance_types().items() if t.efa_supported)


def instance_types_with_gpu(model: str, count: int | None = None) -> list[InstanceType]:
    """Types with this GPU model (and exactly ``count`` GPUs if given), cheapest first.

    Unpriced types (e.g. p5e.48xlarge) sort last. An unknown model raises a helpful KeyError rather than
    returning an empty list that would read as "AWS has none".
    """
    gpu_model(model)
    matches = [t for t in instance_types().values() if t.gpu_model == model and (count is None or t.gpu_count == count)]
    return sorted(
        matches,
        key=lambda t: (t.on_demand_usd_per_hour is None, t.on_demand_usd_per_hour or 0.0, t.name),
    )


def instance_set(name: str) -> frozenset[str]:
    """The members of one of the catalog's `INSTANCE_SETS` (KeyError for another name)."""
    return frozenset(_catalog().instance_sets[name].members)


def capacity_block_types() -> frozenset[str]:
    """Instance types AWS offers as EC2 Capacity Blocks for ML ([CBTYPES])."""
    return instance_set("capacity_blocks")


def no_lustre_efa_families() -> frozenset[str]:
    """Instance families with EFA that cannot be FSx for Lustre EFA clients ([EFADOC], [FSXEFA])."""
    return instance_set("no_lustre_efa_families")


def eight_lustre_efa_interface_types() -> frozenset[str]:
    """Instance types the FSx for Lustre EFA client setup gives 8 EFA interfaces ([FSXEFA])."""
    return instance_set("eight_lustre_efa_interfaces")


def sources() -> Mapping[str, str]:
    """Source tag -> citation (title <url> [snapshot]) for the hardware catalog."""
    return _catalog().sources
