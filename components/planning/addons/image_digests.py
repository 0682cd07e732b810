"""A chart's Helm values with the catalog's digest pins (`components/catalog/images.yaml` `chart_images`) merged
in, so the chart runs the exact image the catalog names rather than whatever its tag points at today."""

from __future__ import annotations

from typing import Any

from components.catalog.images import chart_images


def with_image_digests(chart: str, values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each pinned image block (`tag` and `sha`) set at its key path; other keys kept."""
    merged = dict(values)
    for pinned in chart_images(chart):
        *parents, leaf = pinned.values_key.split(".")
        node = merged
        for key in parents:
            node[key] = dict(node.get(key) or {})
            node = node[key]
        node[leaf] = {**(node.get(leaf) or {}), **pinned.values}
    return merged
