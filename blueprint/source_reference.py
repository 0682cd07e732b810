"""The catalog's source list in `docs/sources.md`, generated from the `sources:` maps of the catalog YAML files.

Catalog entries cite their sources by tag (`source: AC+KP+NVHOPPER`); the tags, titles, URLs and snapshots live
in the `sources:` maps of the catalog files (`components/catalog/*.yaml`, `SOURCE_FILES` below). Generating their
headings keeps every tag a reader meets in the catalog (or in a code comment) one link away from where it points.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CATALOG_DIR = Path(__file__).resolve().parents[1] / "components" / "catalog"
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
)


def catalog_sources() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every catalog source tag: (the YAML file defining it, its title/url/snapshot), first definition wins."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for name in SOURCE_FILES:
        for tag, entry in (yaml.safe_load((CATALOG_DIR / name).read_text()).get("sources") or {}).items():
            out.setdefault(tag, (name, entry))
    return out


def sources_markdown() -> str:
    blocks = []
    for tag, (defined_in, entry) in sorted(catalog_sources().items()):
        lines = [f"### [{tag}]", "", f"{entry.get('title', '')}."]
        if entry.get("url"):
            lines.append(f"<{entry['url']}>")
        lines.append(f"Snapshot: {entry.get('snapshot', 'n/a')}. Defined in `components/catalog/{defined_in}`.")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
