"""Catalog citations: the `sources:` map of each catalog YAML file (tag -> title, url, snapshot), read and checked
one way for every catalog module and for the generated list in docs/sources.md.

Invariants: every source has a title; a cited tag (`source: AC+KP`) names a source of the map it is checked
against; a tag defined in several files resolves to its first definition in `SOURCE_FILES` order.
See docs/sources.md#source-tags.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from components.yaml_loader import parse_yaml

__all__ = [
    "CATALOG_DIR",
    "SOURCE_FILES",
    "CatalogError",
    "Source",
    "catalog_sources",
    "check_tags",
    "citation_texts",
    "file_sources",
    "read_sources",
    "read_yaml",
]

CATALOG_DIR = Path(__file__).parent
#: The catalog files that define source tags.
SOURCE_FILES = (
    "instances.yaml",
    "versions.yaml",
    "offerings.yaml",
    "metrics.yaml",
    "prices.yaml",
    "zones.yaml",
    "quotas.yaml",
    "deployer_permissions.yaml",
    "deployer_provider_calls.yaml",
    "images.yaml",
    "serving_capacity.yaml",
    "ai_conformance.yaml",
)


class CatalogError(ValueError):
    """The catalog data is inconsistent or incomplete (raised at load time)."""


@dataclass(frozen=True)
class Source:
    """One cited source: what it is, where it is, and which revision was read."""

    tag: str
    title: str
    url: str = ""
    snapshot: str = ""

    @property
    def citation(self) -> str:
        """`title <url> [snapshot]`, the one-line form the catalog modules hand out."""
        text = self.title
        if self.url:
            text += f" <{self.url}>"
        if self.snapshot:
            text += f" [{self.snapshot}]"
        return text


def read_yaml(path: Path) -> dict[str, Any]:
    """A catalog file's top-level mapping; CatalogError when it is not valid YAML or not a mapping."""
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping at the top level")
    return data


def read_sources(raw: Any, path: Path) -> dict[str, Source]:
    """The `sources:` map of the file at `path`, checked: non-empty, each source with a title."""
    if not isinstance(raw, dict) or not raw:
        raise CatalogError(f"{path}: a non-empty `sources:` map (tag -> title/url/snapshot) is required")
    out: dict[str, Source] = {}
    for tag, entry in raw.items():
        if not isinstance(entry, dict) or not str(entry.get("title", "")).strip():
            raise CatalogError(f"{path}: source {tag!r} needs at least a title")
        out[str(tag)] = Source(
            str(tag), str(entry["title"]).strip(), str(entry.get("url") or ""), str(entry.get("snapshot") or "")
        )
    return out


def citation_texts(sources: Mapping[str, Source]) -> dict[str, str]:
    """Tag -> one-line citation."""
    return {tag: source.citation for tag, source in sources.items()}


def check_tags(where: str, value: str, known: Mapping[str, object]) -> None:
    """`value` (`AC+KP`) cites only tags in `known`; CatalogError naming `where` otherwise."""
    tags = [t.strip() for t in value.split("+")]
    unknown = [t for t in tags if t not in known]
    if not value.strip() or unknown:
        raise CatalogError(f"{where}: unknown source tag(s) {unknown or [value]!r}; known: {sorted(known)}")


@cache
def file_sources(path: Path) -> dict[str, Source]:
    """The checked `sources:` map of one catalog file."""
    return read_sources(read_yaml(path).get("sources"), path)


def catalog_sources() -> dict[str, tuple[str, Source]]:
    """Every catalog source tag -> (the file defining it, the source); the first definition wins."""
    out: dict[str, tuple[str, Source]] = {}
    for name in SOURCE_FILES:
        for tag, source in file_sources(CATALOG_DIR / name).items():
            out.setdefault(tag, (name, source))
    return out
