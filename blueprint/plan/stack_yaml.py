"""Read a stack file (or Pulumi.yaml) as the Pulumi CLI does, and refuse what it would refuse or misread.

Invariant: a file means what Go's yaml.v3 v3.0.1 makes of it ([PULUMISTACK], [YAMLV3]; `blueprint.plan.yaml_v3`),
whatever PyYAML release is installed. Each check is one named rule (`FILE_CHECKS`, listed in
docs/validation-rules.md) run on the composed node graph, each problem with its line and column. Why:
docs/design-notes.md#reading-stack-files-as-the-pulumi-cli-does.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from blueprint.plan import yaml_v3
from blueprint.plan.yaml_v3 import TAG as _TAG
from blueprint.plan.yaml_v3 import is_merge_key as _is_merge_key
from components.errors import ConfigError, Problem

#: A stack file is a few kilobytes; anything past this is not one.
MAX_FILE_BYTES = 1 << 20
#: Stack files nest about six levels deep; far deeper is a mistake or an attack on the parser.
MAX_DEPTH = 64
#: Values after aliases are expanded: a stack file has hundreds; a billion-laughs file has billions.
MAX_VALUES = 100_000
#: Top-level keys of a Pulumi stack file (Pulumi docs, "Stack settings file": config, environment, secrets keys).
STACK_FILE_KEYS = ("config", "environment", "secretsprovider", "encryptedkey", "encryptionsalt")
#: The stack file's secrets settings: text in the CLI's stack settings (`secretsprovider: awskms://...`).
SECRETS_SETTINGS = ("secretsprovider", "encryptedkey", "encryptionsalt")
#: How much of a bad key or value a message quotes.
MAX_ECHO = 60

#: The tags a JSON value can have; the CLI passes config to the program as JSON.
JSON_TAGS = frozenset((yaml_v3.STR, yaml_v3.INT, yaml_v3.FLOAT, yaml_v3.BOOL, yaml_v3.NULL, yaml_v3.SEQ, yaml_v3.MAP))
_SCALAR_TAGS = (yaml_v3.INT, yaml_v3.FLOAT, yaml_v3.BOOL, yaml_v3.NULL)


def _fits(node: yaml.Node) -> bool:
    """An explicitly tagged scalar holds what its tag says (`!!int abc` fails in yaml.v3, resolve.go); an int is a
    float too (`!!float 5`)."""
    resolved = yaml_v3.plain_tag(node.value)
    return resolved == node.tag or (node.tag == yaml_v3.FLOAT and resolved == yaml_v3.INT)


def _where(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}, column {node.start_mark.column + 1}"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ECHO else f"{text[: MAX_ECHO - 1]}…"


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


# --------------------------------------------------------------------------------------------- checks on each node
NodeCheck = Callable[[yaml.Node], Iterator[str]]


def values_are_json(node: yaml.Node) -> Iterator[str]:
    """Values are what JSON can carry (text, finite numbers, true/false, null, lists, mappings): the CLI hands config
    to the program as JSON, so dates, binary, sets, ordered maps, custom tags, NaN and infinity mean nothing there.
    An unquoted date (`2024-01-01`) is a timestamp to yaml.v3, which Pulumi hands on as Go's time text
    (`2024-01-01 00:00:00 +0000 UTC`), so it must be quoted; a number with a leading zero (`010`), octal to the CLI
    but decimal in YAML 1.2, is refused as ambiguous; an explicit tag must fit its value (`!!int abc`)."""
    if node.tag == yaml_v3.TIMESTAMP:
        yield (
            f"{_where(node)}: {_cut(node.value)} is a timestamp to the Pulumi CLI (yaml.v3), which passes it on as "
            "Go's time text (like `2024-01-01 00:00:00 +0000 UTC`), not as written; write it as quoted text"
        )
    elif node.tag not in JSON_TAGS and not _is_merge_key(node):
        kind = node.tag.removeprefix(_TAG).removeprefix("!")
        yield f"{_where(node)}: a `{_cut(kind)}` value is not JSON; quote it or write plain text, numbers, lists, maps"
    elif node.tag in _SCALAR_TAGS and not _fits(node):
        kind = node.tag.removeprefix(_TAG)
        yield f"{_where(node)}: {_cut(node.value)} is not a valid `!!{kind}`; drop the tag or fix the value"
    elif node.tag == yaml_v3.FLOAT and not math.isfinite(yaml_v3.scalar_value(node)):
        yield f"{_where(node)}: {_cut(node.value)} is not a finite number (JSON has no NaN or infinity)"
    elif node.tag == yaml_v3.INT and _octal(node.value):
        yield (
            f"{_where(node)}: {_cut(node.value)} is octal to the Pulumi CLI (yaml.v3 keeps YAML 1.1 octals) but "
            "decimal in YAML 1.2; write it without the leading zero"
        )


def _octal(text: str) -> bool:
    """A YAML 1.1 octal (`010`, `-0_7`): a leading zero before more digits, once `_` is dropped."""
    return re.fullmatch(r"[-+]?0[0-9]+", text.replace("_", "")) is not None


def keys_are_unique_text(node: yaml.Node) -> Iterator[str]:
    """Mapping keys are text and appear once: a repeated key would silently override the first (PyYAML keeps the
    last), and yaml.v3, which the Pulumi CLI reads with, refuses it ("mapping key already defined")."""
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, yaml.Node] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or (key.tag != yaml_v3.STR and not _is_merge_key(key)):
            shown = _cut(str(key.value)) if isinstance(key, yaml.ScalarNode) else "that is a list or mapping"
            yield f"{_where(key)}: key {shown} is not text; keys are names (quote numbers and booleans)"
        elif key.value in seen:
            yield f"{_where(key)}: duplicate key {_cut(key.value)!r} (first at {_where(seen[key.value])})"
        else:
            seen[key.value] = key


def merge_keys_merge_mappings(node: yaml.Node) -> Iterator[str]:
    """A merge key (`<<`) takes a mapping, an alias of one (`<<: *defaults`) or a list of them, as yaml.v3 requires
    ("map merge requires map or sequence of maps as the value", decode.go); an alias must name a mapping itself,
    not a list of them (`<<: *list` fails in yaml.v3 where `<<: [*a, *b]` is merged). The mapping's own keys win over
    merged ones, and an earlier mapping in the list over a later one, as in yaml.v3."""
    if not isinstance(node, yaml.MappingNode):
        return
    for index, (key, value) in enumerate(node.value):
        if not _is_merge_key(key):
            continue
        merged = value.value if isinstance(value, yaml.SequenceNode) else [value]
        mappings = all(isinstance(item, yaml.MappingNode) for item in merged)
        if mappings and isinstance(value, yaml.SequenceNode) and yaml_v3.written_as_alias(node, index):
            yield (
                f"{_where(key)}: `<<` takes an alias of a mapping, not of a list of them (the Pulumi CLI refuses "
                "it); write the list out: `<<: [*a, *b]`"
            )
        elif not mappings:
            # At the key: an alias's own node is its anchor's, which may stand anywhere in the file.
            yield (
                f"{_where(key)}: `<<` merges a mapping or a list of mappings (e.g. `<<: *defaults` with "
                "`defaults: &defaults {...}`) into this one"
            )


NODE_CHECKS: tuple[NodeCheck, ...] = (values_are_json, keys_are_unique_text, merge_keys_merge_mappings)


def walk(root: yaml.Node) -> Iterator[str]:
    """Every node check over the node graph, depth first, each node once; refuses cycles and nesting deeper than 64
    levels through aliases, without expanding them."""
    done: set[int] = set()
    on_path = {id(root)}
    yield from (problem for check in NODE_CHECKS for problem in check(root))
    stack = [(root, iter(_children(root)))]
    while stack:
        node, pending = stack[-1]
        child = next(pending, None)
        if child is None:
            stack.pop()
            on_path.discard(id(node))
            done.add(id(node))
        elif id(child) in on_path:
            yield f"{_where(child)}: an alias refers to the value that contains it (a cycle)"
            return
        elif id(child) not in done:
            if len(stack) >= MAX_DEPTH:
                yield f"{_where(child)}: nested deeper than {MAX_DEPTH} levels"
                return
            yield from (problem for check in NODE_CHECKS for problem in check(child))
            on_path.add(id(child))
            stack.append((child, iter(_children(child))))


# ------------------------------------------------------------------------------------------- checks on the file
def read_text(path: Path) -> str:
    """The file is at most 1 MiB (a stack file is a few KB) and UTF-8 (what YAML and the Pulumi CLI read); no more
    than the limit is read, so a device or pipe that never ends (`/dev/zero`) is refused too. A file that cannot be
    read raises its OSError: an I/O error, not a problem in the config."""
    with path.open("rb") as file:
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise _refused(path, f"more than {MAX_FILE_BYTES} bytes; a stack file is a few KB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise _refused(
            path, f"line {line}: byte {data[error.start]:#04x} is not UTF-8; save the file as UTF-8"
        ) from None


def compose(path: Path, text: str) -> yaml.Node | None:
    """The text is one YAML 1.1 document (yaml.v3 refuses a `%YAML` directive of another version), nested at most
    64 levels deep and holding at most 100,000 values once aliases are expanded (a stack file has hundreds; an alias
    bomb billions); a syntax error names its line and column."""
    try:
        return yaml_v3.compose(text, MAX_DEPTH, MAX_VALUES)
    except yaml_v3.NestingTooDeep as error:
        raise _refused(path, f"{_at(error.problem_mark)}nested deeper than {MAX_DEPTH} levels") from None
    except yaml_v3.TooManyValues as error:
        where = _at(error.problem_mark)
        raise _refused(
            path, f"{where}more than {MAX_VALUES} values (aliases expanded); a stack file has hundreds"
        ) from None
    except yaml_v3.SecondDocument as error:
        raise _refused(
            path,
            f"{_at(error.problem_mark)}a stack file is one YAML document, and a second one starts here (the Pulumi "
            "CLI would read the first and ignore the rest); remove the `---` and what follows",
        ) from None
    except yaml.MarkedYAMLError as error:
        where = _at(error.problem_mark or error.context_mark)
        if (error.problem or "").startswith(yaml_v3.INCOMPATIBLE):  # libyaml and PyYAML add their own words
            raise _refused(
                path,
                f"{where}the Pulumi CLI (yaml.v3) reads only YAML 1.1 and refuses this `%YAML` version "
                f"({yaml_v3.INCOMPATIBLE!r}); remove the directive or write `%YAML 1.1`",
            ) from None
        raise _refused(path, f"{where}invalid YAML: {_cut(error.problem or error.context or 'syntax error')}") from None
    except yaml.YAMLError as error:
        raise _refused(path, f"invalid YAML: {_cut(str(error).splitlines()[0])}") from None


def _at(mark: yaml.Mark | None) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""


def read_yaml(path: Path) -> Any:
    """The file's one document as Python values, or ConfigError naming every problem with its line and column."""
    text = read_text(path)
    node = compose(path, text)
    if node is None:
        raise _refused(path, "the file is empty; a stack file holds `config:` with at least gpu-clusters:cluster")
    problems = [Problem(str(path), message) for message in walk(node)]
    if problems:
        raise ConfigError(problems)
    return yaml_v3.construct(node)


def stack_file_shape(path: Path, document: Any) -> Iterator[Problem]:
    """The top level is a mapping of the stack file's keys (config, environment, secrets settings), `config` is a
    mapping of `namespace:key` to values, and the secrets settings are text: a provider (`passphrase`,
    `awskms://...`), its encrypted key and salt (yaml.v3 would read `5` there as the provider "5")."""
    if not isinstance(document, dict):
        yield Problem(str(path), f"the top level must be a mapping with `config:` (got a {_kind(document)})")
        return
    for key in document:
        if key not in STACK_FILE_KEYS:
            close = difflib.get_close_matches(str(key).lower(), STACK_FILE_KEYS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            yield Problem(
                f"{path}: {_cut(str(key))}", f"not a stack file key{hint}; valid: {', '.join(STACK_FILE_KEYS)}"
            )
    for key in SECRETS_SETTINGS:
        if key in document and not isinstance(document[key], str):
            yield Problem(f"{path}: {key}", f"must be text (got a {_kind(document[key])}); quote it")
    config = document.get("config")
    if config is not None and not isinstance(config, dict):
        yield Problem(f"{path}: config", f"must be a mapping of `namespace:key: value` (got a {_kind(config)})")


def _kind(value: Any) -> str:
    return {list: "list", str: "text", int: "number", float: "number", bool: "boolean"}.get(type(value), "value")


def _refused(path: Path, message: str) -> ConfigError:
    return ConfigError([Problem(str(path), message)])


#: The file-level rules, for docs/validation-rules.md (each also runs as part of `read_yaml` or `load_stack`).
FILE_CHECKS: tuple[Callable[..., Any], ...] = (
    read_text,
    compose,
    values_are_json,
    keys_are_unique_text,
    merge_keys_merge_mappings,
    walk,
    stack_file_shape,
)

__all__ = ["FILE_CHECKS", "read_yaml", "stack_file_shape"]
