"""The shipped catalog files as data a test may break, and a writer for the broken copy the loader then reads.

The loader tests (catalog and versions) each parse a shipped YAML file, change one value, write it back and expect
the loader to refuse it. The shipped file is parsed once per session, and the copy is written as JSON text where
the data allows: YAML 1.2 takes JSON as a subset (https://yaml.org/spec/1.2.2/#12-yaml-history), and PyYAML's YAML
1.1 resolver reads such a file back as the same data as long as every float has a `.` and no key or value is
something JSON would spell another way (`_reads_back_from_json`). Writing YAML, even with libyaml's emitter,
runs PyYAML's pure-Python representer over the whole file: most of a loader test's time.
"""

from __future__ import annotations

import copy
import json
import math
import re
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
    """`data` as the YAML file `folder/filename`: JSON text where it reads back as `data`, YAML otherwise."""
    path = folder / filename
    text = json.dumps(data) if _reads_back_from_json(data) else yaml.dump(data, Dumper=yaml.CSafeDumper)
    path.write_text(text, encoding="utf-8")
    return path


#: Characters JSON writes as `\u` escapes that YAML does not read back as one character: those outside the Basic
#: Multilingual Plane (a surrogate pair, two characters to YAML) and a lone surrogate (no character at all).
_SPELLED_APART = re.compile("[\ud800-\udfff\U00010000-\U0010ffff]")


def _reads_back_from_json(data: Any) -> bool:
    """Whether `json.dumps(data)` parses as YAML 1.1 back to `data`: mappings with text keys, lists, text without
    `_SPELLED_APART` characters, booleans, null, integers, and finite floats whose JSON form (`float.__repr__`) has
    a `.` (PyYAML reads `1e-05` as text)."""
    pending = [data]
    while pending:
        value = pending.pop()
        kind = type(value)
        if kind is dict:
            if not all(type(k) is str for k in value):
                return False
            pending.extend(value)
            pending.extend(value.values())
        elif kind is list:
            pending.extend(value)
        elif kind is str:
            if _SPELLED_APART.search(value):
                return False
        elif kind is float:
            if not (math.isfinite(value) and "." in repr(value)):
                return False
        elif value is not None and kind not in (bool, int):
            return False
    return True
