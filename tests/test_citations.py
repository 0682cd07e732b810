"""The shared reader of the catalog's `sources:` maps (components/catalog/citations.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.catalog import citations
from components.catalog.citations import CatalogError, Source, catalog_sources, check_tags, read_sources


def test_a_source_without_a_title_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="source 'X' needs at least a title"):
        read_sources({"X": {"url": "https://example.com"}}, tmp_path / "f.yaml")
    with pytest.raises(CatalogError, match="non-empty `sources:` map"):
        read_sources({}, tmp_path / "f.yaml")


def test_a_citation_is_title_url_and_snapshot() -> None:
    assert Source("T", "Title", "https://example.com/a", "2026").citation == "Title <https://example.com/a> [2026]"
    assert Source("T", "Title").citation == "Title"


def test_an_unknown_tag_is_named() -> None:
    check_tags("here", "A+B", {"A": 1, "B": 2})
    with pytest.raises(CatalogError, match=r"here: unknown source tag\(s\) \['C'\]"):
        check_tags("here", "A+C", {"A": 1})


def test_every_source_file_contributes_its_tags() -> None:
    defined_in = {name for name, _ in catalog_sources().values()}
    assert defined_in == set(citations.SOURCE_FILES)
    assert catalog_sources()["AC"][1].url == "https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html"
