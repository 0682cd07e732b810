"""The catalog's source list in `docs/sources.md`, generated from the `sources:` maps of the catalog YAML files.

Catalog entries cite their sources by tag (`source: AC+KP+NVHOPPER`); the tags, titles, URLs and snapshots live in
the `sources:` maps of the catalog files, read by `components.catalog.citations`. Generating their headings keeps
every tag a reader meets in the catalog (or in a code comment) one link away from where it points.
"""

from __future__ import annotations

from components.catalog.citations import catalog_sources


def sources_markdown() -> str:
    blocks = []
    for tag, (defined_in, source) in sorted(catalog_sources().items()):
        lines = [f"### [{tag}]", "", f"{source.title}."]
        if source.url:
            lines.append(f"<{source.url}>")
        lines.append(f"Snapshot: {source.snapshot or 'n/a'}. Defined in `components/catalog/{defined_in}`.")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
