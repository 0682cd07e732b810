"""The loader tests' writer of broken catalog copies: whichever way it writes a file, the file reads back as the
data it was given, and plain data is written the fast way, as JSON text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.yaml_loader import parse_yaml
from tests.catalog_files import _reads_back_from_json, write_yaml

#: Values JSON and YAML 1.1 could read differently: floats JSON writes without a `.`, text YAML would resolve to
#: another type, control and line-separator characters, text outside the Basic Multilingual Plane, big integers.
TRICKY = [
    2.5,
    1e-05,
    1e20,
    -0.0,
    float("inf"),
    1 << 70,
    True,
    None,
    "yes",
    "on",
    "~",
    "0x1F",
    "1:2",
    "2025-01-01",
    "",
    " x ",
    "a\tb",
    "\x00",
    "\x1b",
    "\x7f",
    "\x85",
    "\u2028",
    "\ufeff",
    "café",
    "\U0001f680",
]


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_a_written_copy_reads_back_as_its_data(tmp_path: Path, value: Any) -> None:
    data = {"key": value, "list": [value, {"nested": value}]}
    path = write_yaml(tmp_path, data, "copy.yaml")
    assert parse_yaml(path.read_text(encoding="utf-8")) == data


def test_plain_data_is_written_as_json_and_the_rest_as_yaml(tmp_path: Path) -> None:
    plain = {"a": [1, 2.5, "text", None, True], "b": {"c": "café"}}
    assert write_yaml(tmp_path, plain, "plain.yaml").read_text().startswith('{"a": [1, 2.5')
    for value in (1e-05, float("inf"), "\U0001f680", "\ud800", {1: "integer key"}):
        assert not _reads_back_from_json({"key": value}), value
