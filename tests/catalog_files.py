"""The shipped catalog files as data a test may break, and a writer for the broken copy the loader then reads.

The loader tests (catalog and versions) each parse a shipped YAML file, change one value, write it back and expect
the loader to refuse it. The shipped file is parsed once per session, and the copy is written with libyaml's
emitter: pure-Python YAML was most of those tests' time.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from components.yaml_loader import parse_yaml


def shipped_data(path: Path) -> dict[str, Any]:
    """A fresh copy of a shipped YAML file's data, for one test to change."""
    return copy.deepcopy(_parsed(path))


@cache
def _parsed(path: Path) -> dict[str, Any]:
    data = parse_yaml(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def write_yaml(folder: Path, data: dict[str, Any], filename: str) -> Path:
    """`data` as the YAML file `folder/filename`."""
    path = folder / filename
    path.write_text(yaml.dump(data, Dumper=yaml.CSafeDumper), encoding="utf-8")
    return path
