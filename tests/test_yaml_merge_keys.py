"""Merge keys (`<<: *anchor`) and anchors in stack files, read as the Pulumi CLI reads them: Go's yaml.v3 v3.0.1
(the version pulumi/pulumi's sdk/go.mod and pkg/go.mod require), decode.go `decoder.mapping` and `decoder.merge`.

In yaml.v3 a mapping sets its own keys first; its merge value then adds, mapping by mapping and depth first through
the merges of each merged mapping, only keys not yet set (`mergedFields`). Each test below is one consequence."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from blueprint.plan import yaml_v3
from blueprint.plan.stack_yaml import MAX_DEPTH, MAX_VALUES, read_yaml
from components.errors import ConfigError

CATALOG = Path(__file__).parent.parent / "components" / "catalog"


def read(tmp_path: Path, text: str) -> object:
    path = tmp_path / "Pulumi.merge.yaml"
    path.write_text(text)
    return read_yaml(path)


def use(tmp_path: Path, text: str) -> object:
    document = read(tmp_path, text)
    assert isinstance(document, dict)
    return document["use"]


def test_own_keys_win_over_merged_ones(tmp_path: Path) -> None:
    """decode.go `mapping`: the mapping's own keys are set before `merge` runs, which skips keys already set."""
    document = read(tmp_path, "base: &base {a: 1, b: 2}\nuse: {<<: *base, b: 3}\n")
    assert document == {"base": {"a": 1, "b": 2}, "use": {"a": 1, "b": 3}}


def test_an_own_key_before_the_merge_key_still_wins(tmp_path: Path) -> None:
    """decode.go `merge`: the keys already set are every key of the parent mapping, wherever it stands in the text
    (releases before v3.0.0 merged in text order, so a merge after `b` overwrote it)."""
    assert use(tmp_path, "base: &base {a: 1, b: 2}\nuse: {b: 3, <<: *base}\n") == {"a": 1, "b": 3}


def test_earlier_merged_mappings_win_over_later_ones(tmp_path: Path) -> None:
    """decode.go `merge`, sequence case: each mapping of the list in order, each adding only keys not yet set."""
    text = "one: &one {a: 1}\ntwo: &two {a: 2, b: 2}\nuse:\n  <<: [*one, *two]\n  c: 3\n"
    assert use(tmp_path, text) == {"a": 1, "b": 2, "c": 3}


def test_merges_inside_merged_mappings_apply(tmp_path: Path) -> None:
    """decode.go `mapping` on a merged mapping: its own keys, then its own merge with the same set of taken keys, so
    `mid`'s `b: 2` beats the `b: 1` it merges from `root` (PyYAML 6.0.4's constructor gives 1)."""
    text = "root: &root {a: 1, b: 1}\nmid: &mid {<<: *root, b: 2}\nuse: {<<: *mid, c: 3}\n"
    assert use(tmp_path, text) == {"a": 1, "b": 2, "c": 3}


def test_a_merged_mappings_own_merges_come_before_the_next_mapping_in_the_list(tmp_path: Path) -> None:
    """decode.go `merge` is depth first: in `<<: [*a, *b]`, what `a` merges from `root` is set before `b`'s own keys
    are looked at, so root's `x` beats b's `x`."""
    text = (
        "root: &root {x: root}\n"
        "a: &a {<<: *root, y: a}\n"
        "b: &b {x: b, y: b, z: b}\n"
        "use: {<<: [*a, *b]}\n"
    )  # fmt: skip
    assert use(tmp_path, text) == {"x": "root", "y": "a", "z": "b"}


def test_a_key_in_several_merged_mappings_is_no_error(tmp_path: Path) -> None:
    """decode.go `mapping` refuses a key twice in one mapping's own text only ("already defined"); across merged
    mappings the first one merged wins, silently."""
    assert use(tmp_path, "use: {<<: [{a: 1, b: 1}, {a: 2, c: 2}]}\n") == {"a": 1, "b": 1, "c": 2}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("base: &base {a: null, b: 1}\nuse: {<<: *base}\n", {"a": None, "b": 1}),
        ("use: {<<: [{a: ~}, {a: 1}]}\n", {"a": None}),
        ("use: {<<: {a: 1}, a: }\n", {"a": None}),
    ],
    ids=["merged-null-is-set", "merged-null-beats-a-later-mapping", "own-null-beats-a-merged-value"],
)
def test_a_null_value_is_set_like_any_other(tmp_path: Path, text: str, expected: dict[str, object]) -> None:
    """decode.go `mapping`: a null decodes into `any` (`decoder.null` sets the zero value and reports success), so the
    key is set, and taken, with null."""
    assert use(tmp_path, text) == expected


def test_a_merge_replaces_no_part_of_a_nested_mapping(tmp_path: Path) -> None:
    """decode.go `merge` is shallow: a key the mapping sets itself (`scaling`) keeps its own value whole; nothing of
    the merged `scaling` is mixed in (yaml.v3's TestMergeNestedStruct, map case)."""
    text = "base: &base {name: a, scaling: {min: 0, max: 2}}\nuse: {<<: *base, scaling: {max: 4}}\n"
    assert use(tmp_path, text) == {"name": "a", "scaling": {"max": 4}}


@pytest.mark.parametrize(
    "key", ["<<", "!!merge '<<'", '!<tag:yaml.org,2002:merge> "<<"', "! <<"], ids=["plain", "short", "long", "bang"]
)
def test_a_merge_key_is_a_plain_or_merge_tagged_lt_lt(tmp_path: Path, key: str) -> None:
    """decode.go `isMerge`: `<<` with no tag, the non-specific `!` or the merge tag, quoted or not (yaml.v3's
    TestMerge `shortTag` and `longTag` cases)."""
    assert use(tmp_path, f"use:\n  {key}: {{a: 1}}\n  b: 2\n") == {"a": 1, "b": 2}


def test_a_quoted_merge_key_is_an_ordinary_key(tmp_path: Path) -> None:
    """decode.go `parser.scalar`: only a plain `<<` defaults to the merge tag; a quoted one is text."""
    assert read(tmp_path, "use: {'<<': {a: 1}}\n") == {"use": {"<<": {"a": 1}}}


def test_a_redefined_anchor_serves_the_aliases_after_it(tmp_path: Path) -> None:
    """decode.go `parser.anchor` records each anchor as it comes, replacing an earlier one of the same name
    (PyYAML's composer refuses a second `&x`)."""
    text = "a: &x {k: 1}\nb: *x\nc: &x {k: 2}\nd: *x\n"
    assert read(tmp_path, text) == {"a": {"k": 1}, "b": {"k": 1}, "c": {"k": 2}, "d": {"k": 2}}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("use: {<<: 3}\n", "line 1, column 7: `<<` merges a mapping"),
        ("use: {<<: [{a: 1}, [2]]}\n", "line 1, column 7: `<<` merges a mapping"),
        ("a: &a [1]\nuse: {<<: *a}\n", "line 2, column 7: `<<` merges a mapping"),
        ("a: &a {x: 1}\nuse: {<<: *a, <<: *a}\n", "duplicate key '<<'"),
        ("use: {<<: {a: 1}, '<<': 2}\n", "duplicate key '<<'"),
    ],
    ids=["scalar", "list-with-a-list", "alias-of-a-list", "two-merge-keys", "merge-and-quoted"],
)
def test_what_yaml_v3_refuses_is_refused(tmp_path: Path, text: str, fragment: str) -> None:
    """decode.go `merge` ("map merge requires map or sequence of maps as the value") and `mapping` (a key twice in
    one mapping, compared by text, so `<<` and `'<<'` too: "mapping key already defined")."""
    with pytest.raises(ConfigError) as refused:
        read(tmp_path, text)
    assert any(fragment in problem.message for problem in refused.value.problems), refused.value.problems


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "l: &l [{a: 1}]\nuse: {<<: *l}\n",
            "line 2, column 7: `<<` takes an alias of a mapping, not of a list of them",
        ),
        ("l: &l [{a: 1}]\nuse: {<<: [*l]}\n", "line 2, column 7: `<<` merges a mapping or a list of mappings"),
        ("s: &s 3\nuse: {<<: *s}\n", "line 2, column 7: `<<` merges a mapping or a list of mappings"),
        ("s: &s 3\nuse: {<<: [*s]}\n", "line 2, column 7: `<<` merges a mapping or a list of mappings"),
    ],
    ids=["alias-of-a-list-of-mappings", "alias-of-it-in-a-list", "alias-of-a-scalar", "alias-of-one-in-a-list"],
)
def test_an_alias_merge_value_must_name_a_mapping(tmp_path: Path, text: str, fragment: str) -> None:
    """decode.go `merge` (v3.0.1, lines 974-988): an alias, whether the whole value or an item of a list, must have a
    mapping as its target ("map merge requires map or sequence of maps as the value"), so `<<: *l` fails even where
    `l` is a list of mappings that `<<: [...]` written out would merge."""
    with pytest.raises(ConfigError) as refused:
        read(tmp_path, text)
    assert any(fragment in problem.message for problem in refused.value.problems), refused.value.problems


def test_a_list_of_mappings_written_out_or_of_aliases_is_merged(tmp_path: Path) -> None:
    """decode.go `merge`, SequenceNode case: a list written in place merges its mappings, written out or aliases of
    mappings; only the merge value itself must not be an alias of a list."""
    text = "m: &m {b: 2}\nuse: {<<: [{a: 1}, *m]}\n"
    assert use(tmp_path, text) == {"a": 1, "b": 2}


NESTED = (
    "root: &root {a: 1, b: 1, n: null}\n"
    "mid: &mid {<<: *root, b: 2}\n"
    "other: &other {b: 3, c: 3, d: [1, 2]}\n"
    "use: {<<: [*mid, *other], e: 0x10}\n"
)


def test_merges_do_not_depend_on_pyyamls_constructor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The merge is the project's own (`yaml_v3.construct`): a PyYAML whose `flatten_mapping` merged anything at all
    would change nothing."""

    def wrong(self: yaml.constructor.SafeConstructor, node: yaml.MappingNode) -> None:
        raise AssertionError("PyYAML's merge was used")

    monkeypatch.setattr(yaml.constructor.SafeConstructor, "flatten_mapping", wrong)
    assert use(tmp_path, NESTED) == {"a": 1, "b": 2, "n": None, "c": 3, "d": [1, 2], "e": 16}


def test_the_c_and_pure_python_parsers_give_the_same_values() -> None:
    """Only the parser's events come from PyYAML, and libyaml's and the pure-Python parser's are the same."""
    nodes = [yaml_v3.compose(NESTED, MAX_DEPTH, MAX_VALUES, parser) for parser in (yaml.SafeLoader, yaml.CSafeLoader)]
    values = [yaml_v3.construct(node) for node in nodes if node is not None]
    assert len(values) == 2 and values[0] == values[1]
    assert values[0]["use"]["b"] == 2


def merge_key_lines(text: str) -> list[int]:
    """The lines of the scalars PyYAML resolves as merge keys: a plain `<<`, or any scalar tagged `!!merge`. Read
    from libyaml's parser events, so no node is composed and no other scalar resolved."""
    lines = []
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.ScalarEvent) and (
            event.tag == yaml_v3.MERGE or (event.implicit[0] and event.value == "<<")
        ):
            assert event.start_mark is not None  # the parser marks where every event starts
            lines.append(event.start_mark.line + 1)
    return lines


def test_catalog_files_use_no_merge_keys() -> None:
    """The catalog files are read with PyYAML's own constructor (components/yaml_loader.py), whose nested merges
    changed in 6.0.4; with no merge key in them, that change cannot change the catalog."""
    assert merge_key_lines("base: &b {x: 1}\nuse:\n  <<: *b\n  !!merge '<<': *b\nquoted: {'<<': 1}\n") == [3, 4]
    for path in sorted(CATALOG.glob("*.yaml")):
        assert merge_key_lines(path.read_text(encoding="utf-8")) == [], f"{path.name}: merge key"
