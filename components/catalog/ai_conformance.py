"""The CNCF Kubernetes AI Conformance checklist as sourced data (``ai_conformance.yaml``).

Why data: a PRODUCT.yaml must carry each requirement's `id`, `description` and `level` exactly as the checklist
publishes them, so they are read from one copy of the checklist rather than retyped where the statuses are decided
(components/planning/conformance.py). See docs/conformance.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from components.catalog.citations import CatalogError, check_tags, citation_texts, read_sources, read_yaml

__all__ = ["CHECKLIST_PATH", "Checklist", "ChecklistRequirement", "Level", "checklist"]

CHECKLIST_PATH = Path(__file__).parent / "ai_conformance.yaml"

Level = Literal["MUST", "SHOULD"]


@dataclass(frozen=True)
class ChecklistRequirement:
    """One requirement of the checklist, as published."""

    category: str
    id: str
    level: Level
    description: str


@dataclass(frozen=True)
class Checklist:
    """The checklist of one Kubernetes version (`v1.35`), its requirements in published order."""

    kubernetes_version: str
    requirements: tuple[ChecklistRequirement, ...]
    source: str

    @property
    def categories(self) -> tuple[str, ...]:
        """The categories in published order."""
        return tuple(dict.fromkeys(r.category for r in self.requirements))


@cache
def checklist(path: Path = CHECKLIST_PATH) -> Checklist:
    """The checked checklist: a cited source, unique ids, MUST or SHOULD levels. Raises CatalogError."""
    data = read_yaml(path)
    known = citation_texts(read_sources(data.get("sources"), path))
    raw = data.get("checklist") or {}
    check_tags(f"{path}: checklist", str(raw.get("source", "")), known)
    requirements: list[ChecklistRequirement] = []
    for category, entries in (raw.get("categories") or {}).items():
        for entry in entries or []:
            level = entry.get("level")
            if level not in ("MUST", "SHOULD"):
                raise CatalogError(f"{path}: {category}.{entry.get('id')}: level {level!r} is not MUST or SHOULD")
            description = str(entry.get("description") or "").strip()
            if not entry.get("id") or not description:
                raise CatalogError(f"{path}: {category}: every requirement needs an id and a description")
            requirements.append(ChecklistRequirement(str(category), str(entry["id"]), level, description))
    ids = [r.id for r in requirements]
    if not ids or len(set(ids)) != len(ids):
        raise CatalogError(f"{path}: the checklist needs requirements with unique ids")
    version = str(raw.get("kubernetes_version") or "")
    if not version.startswith("v1."):
        raise CatalogError(f"{path}: checklist.kubernetes_version {version!r} is not vX.Y")
    return Checklist(version, tuple(requirements), str(raw["source"]))
