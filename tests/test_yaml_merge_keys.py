"""Merge keys (`<<: *anchor`) in stack files, read as the Pulumi CLI reads them (Go yaml.v3, decode.go): a plain `<<`
merges a mapping, an alias of one or a list of them; the mapping's own keys win, then earlier merged mappings."""

from __future__ import annotations

from pathlib import Path

import pytest

from blueprint.plan.stack_yaml import read_yaml
from components.errors import ConfigError


def read(tmp_path: Path, text: str) -> object:
    path = tmp_path / "Pulumi.merge.yaml"
    path.write_text(text)
    return read_yaml(path)


def test_own_keys_win_over_merged_ones(tmp_path: Path) -> None:
    document = read(tmp_path, "base: &base {a: 1, b: 2}\nuse: {<<: *base, b: 3}\n")
    assert document == {"base": {"a": 1, "b": 2}, "use": {"a": 1, "b": 3}}


def test_earlier_merged_mappings_win_over_later_ones(tmp_path: Path) -> None:
    text = "one: &one {a: 1}\ntwo: &two {a: 2, b: 2}\nuse:\n  <<: [*one, *two]\n  c: 3\n"
    assert read(tmp_path, text)["use"] == {"a": 1, "b": 2, "c": 3}  # type: ignore[index]


def test_merges_inside_merged_mappings_apply(tmp_path: Path) -> None:
    text = "root: &root {a: 1, b: 1}\nmid: &mid {<<: *root, b: 2}\nuse: {<<: *mid, c: 3}\n"
    assert read(tmp_path, text)["use"] == {"a": 1, "b": 2, "c": 3}  # type: ignore[index]


def test_a_quoted_merge_key_is_an_ordinary_key(tmp_path: Path) -> None:
    """yaml.v3 merges only a plain `<<` (or one tagged !!merge); a quoted one is text, as here."""
    assert read(tmp_path, "use: {'<<': {a: 1}}\n") == {"use": {"<<": {"a": 1}}}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("use: {<<: 3}\n", "line 1, column 7: `<<` merges a mapping"),
        ("use: {<<: [{a: 1}, [2]]}\n", "line 1, column 7: `<<` merges a mapping"),
        ("a: &a {x: 1}\nuse: {<<: *a, <<: *a}\n", "duplicate key '<<'"),
    ],
)
def test_what_yaml_v3_refuses_is_refused(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as refused:
        read(tmp_path, text)
    assert any(fragment in problem.message for problem in refused.value.problems), refused.value.problems
