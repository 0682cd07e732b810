"""Compose and construct one YAML document the way Go's yaml.v3 v3.0.1 decodes it into `any` [YAMLV3].

The Pulumi CLI decodes stack files that way [PULUMISTACK]; PyYAML only tokenises and parses here, and composing,
resolving plain scalars and building values are the project's own, so a PyYAML release cannot change a plan.
The yaml.v3 rules followed, by file and function: docs/design-notes.md#yamlv3-semantics-rule-by-rule.
"""

from __future__ import annotations

import calendar
import functools
import math
import re
from collections.abc import Callable
from typing import Any, cast

import yaml
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentEndEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    StreamEndEvent,
)

from components.yaml_loader import SAFE_LOADER

TAG = "tag:yaml.org,2002:"
STR, NULL, BOOL, INT, FLOAT = (f"{TAG}{name}" for name in ("str", "null", "bool", "int", "float"))
TIMESTAMP, MERGE, SEQ, MAP = (f"{TAG}{name}" for name in ("timestamp", "merge", "seq", "map"))

#: resolve.go `resolveMap`: plain scalars decided by their whole text.
_BY_TEXT = {
    **dict.fromkeys(("true", "True", "TRUE", "false", "False", "FALSE"), BOOL),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), NULL),
    **{f"{sign}{inf}": FLOAT for sign in ("", "+", "-") for inf in (".inf", ".Inf", ".INF")},
    **dict.fromkeys((".nan", ".NaN", ".NAN"), FLOAT),
    "<<": MERGE,
}
#: resolve.go `yamlStyleFloat`, and a float that starts with its dot (`strconv.ParseFloat` on the text as written).
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9](_?[0-9])*([eE][-+]?[0-9](_?[0-9])*)?")
#: `strconv.ParseInt(text, 0, 64)` syntax once `_` is dropped: a base prefix, or a leading 0 for octal.
_INT = re.compile(
    r"(?P<sign>[-+]?)"
    r"(?:0[xX](?P<hex>[0-9a-fA-F]+)|0[oO](?P<oct>[0-7]+)|0[bB](?P<bin>[01]+)|0(?P<old>[0-7]+)|(?P<dec>[1-9][0-9]*|0))"
)
_INT_BASES = {"hex": 16, "oct": 8, "bin": 2, "old": 8, "dec": 10}
#: Digits of 2**64 - 1, the largest integer yaml.v3 reads (a decimal has no leading zero, so a longer one is larger).
_MAX_DECIMAL_DIGITS = len(str(2**64 - 1))
#: resolve.go `allowedTimestampFormats`: 2006-1-2, with a time `T15:4:5.999999999Z07:00` (or `t`), or ` 15:4:5.9`;
#: Go's `time.Parse` takes a comma before the fraction as well as a dot (since Go 1.17, format.go `commaOrPeriod`).
_TIMESTAMP = re.compile(
    r"(?P<y>[0-9]{4})-(?P<m>[0-9]{1,2})-(?P<d>[0-9]{1,2})"
    r"(?:[Tt](?P<h>[0-9]{1,2}):(?P<mi>[0-9]{1,2}):(?P<s>[0-9]{1,2})(?:[.,][0-9]+)?(?:Z|[-+][0-9]{2}:[0-9]{2})"
    r"| (?P<h2>[0-9]{1,2}):(?P<mi2>[0-9]{1,2}):(?P<s2>[0-9]{1,2})(?:[.,][0-9]+)?)?"
)
#: parserc.go `yaml_parser_process_directives`: the only `%YAML` version yaml.v3 reads, and its refusal of others
#: (libyaml gives the same words for some versions).
YAML_VERSION = (1, 1)
INCOMPATIBLE = "found incompatible YAML document"
#: libyaml's words when a document nests past its limit (1,000 levels by default, `yaml_set_max_nest_level`).
LIBYAML_NESTING_LIMIT = "exceeded maximum nesting depth"


#: A PyYAML loader class, used for its parser only: `yaml.CSafeLoader` (libyaml) or `yaml.SafeLoader`.
Parser = Callable[[str], Any]


class NestingTooDeep(yaml.MarkedYAMLError):
    """The document nests deeper than the reader allows; raised while parsing, before anything is built."""


class TooManyValues(yaml.MarkedYAMLError):
    """The document holds more values than the reader allows, aliases expanded; raised while parsing, at the value
    that passes the limit, so neither a big file nor an alias bomb is read or expanded past it."""


class SecondDocument(yaml.MarkedYAMLError):
    """The text holds a second document (yaml.v3 decodes the first and ignores the rest, yaml.go `unmarshal`)."""


class MappingNode(yaml.MappingNode):
    """A mapping node that also knows which of its values were written as aliases (`*name`), by pair index: yaml.v3
    refuses a merge value that is an alias of anything but a mapping (decode.go `merge`, AliasNode case), which the
    anchored node an alias stands for cannot tell."""

    def __init__(self, tag: str, start_mark: Any, flow_style: bool | None) -> None:
        super().__init__(tag, [], start_mark, None, flow_style=flow_style)
        self.aliased: set[int] = set()


def written_as_alias(mapping: yaml.MappingNode, index: int) -> bool:
    """Whether the value of the mapping's pair `index` was written as an alias."""
    return isinstance(mapping, MappingNode) and index in mapping.aliased


# ------------------------------------------------------------------------------------------------ plain scalars
@functools.lru_cache(maxsize=4096)
def plain_tag(text: str) -> str:
    """The tag yaml.v3 gives an untagged plain scalar (resolve.go `resolve` with an empty tag). Remembered: a file
    repeats its plain words (`true`, counts, sizes, names), and a big one would resolve each again."""
    if text in _BY_TEXT:
        return _BY_TEXT[text]
    first = text[0]
    if first == ".":
        return FLOAT if _DOT_FLOAT.fullmatch(text) and math.isfinite(float(text)) else STR
    if not (first.isascii() and (first.isdigit() or first in "+-")):
        return STR
    if _is_timestamp(text):
        return TIMESTAMP
    plain = text.replace("_", "")
    if go_int(plain) is not None:
        return INT
    if _FLOAT.fullmatch(plain) and math.isfinite(float(plain)):
        return FLOAT
    return STR


def go_int(plain: str) -> int | None:
    """`strconv.ParseInt(plain, 0, 64)`, else `ParseUint` (no sign): the integer, or None where both fail."""
    match = _INT.fullmatch(plain)
    if not match:
        return None
    digits = match.lastgroup  # the one digits group that matched: the sign's group closes before it
    assert digits is not None
    if digits == "dec" and len(match[digits]) > _MAX_DECIMAL_DIGITS:
        return None  # out of range, and Python's `int` refuses over 4,300 decimal digits (`int_max_str_digits`)
    value = int(match[digits], _INT_BASES[digits])
    if match["sign"] == "-":
        value = -value
    if -(1 << 63) <= value < 1 << 63 or (not match["sign"] and 0 <= value < 1 << 64):
        return value
    return None


def _is_timestamp(text: str) -> bool:
    """resolve.go `parseTimestamp`: one of its layouts, with Go's `time.Parse` range checks (month, day, time)."""
    match = _TIMESTAMP.fullmatch(text)
    if not match:
        return False
    year, month, day = int(match["y"]), int(match["m"]), int(match["d"])
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return False
    hour, minute, second = (int(match[a] or match[b] or 0) for a, b in (("h", "h2"), ("mi", "mi2"), ("s", "s2")))
    return hour < 24 and minute < 60 and second < 60


def scalar_tag(event: ScalarEvent) -> str:
    """A scalar's tag: explicit (`!!str 5`), else resolved from its text when plain, else text (quoted or block).
    The non-specific `!` counts as no tag (decode.go `parser.node`); plain style is None or '' by parser."""
    if event.tag not in (None, "!"):
        return str(event.tag)
    return plain_tag(event.value) if not event.style else STR


# ------------------------------------------------------------------------------------------------------ compose
def compose(text: str, max_depth: int, max_values: int, parser: Parser = SAFE_LOADER) -> yaml.Node | None:
    """The text's one document as a node graph (aliases are the anchored node itself), or None when it is empty.

    Built from the parser's events in a loop, without recursion; a node deeper than `max_depth` stops the read with
    NestingTooDeep, and the value past `max_values` (an alias counts every value it stands for) with TooManyValues.
    A `%YAML` directive other than 1.1 fails as in yaml.v3, and a second document with SecondDocument.

    libyaml (PyYAML 6.0.4's C parser) stops at its own nesting limit (1,000 levels) while looking ahead on a line,
    before its events reach this depth check; it then reads the text up to where it stopped (one level short of its
    limit), so its events reach the depth check. A syntax error just past that point, which a parser without the
    limit would meet first while looking ahead, goes unnamed: the line is refused as nested too deep."""
    try:
        return _compose(text, max_depth, max_values, parser)
    except (NestingTooDeep, TooManyValues):
        raise
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        if error.problem != LIBYAML_NESTING_LIMIT or mark is None:
            raise
        try:
            _compose(text[: mark.index], max_depth, max_values, parser)
        except (NestingTooDeep, TooManyValues):
            raise
        except yaml.YAMLError:
            pass
        raise error from None


def _compose(text: str, max_depth: int, max_values: int, parser: Parser) -> yaml.Node | None:
    events = parser(text)
    try:
        events.get_event()  # the stream's start
        if events.check_event(StreamEndEvent):
            return None
        document: Any = events.get_event()  # the parser's DocumentStartEvent
        if document.version not in (None, YAML_VERSION):
            raise yaml.parser.ParserError(None, None, INCOMPATIBLE, document.start_mark)
        root = _compose_document(events, max_depth, max_values)
        if not events.check_event(StreamEndEvent):
            extra = events.get_event()
            raise SecondDocument(None, None, "found a second document", extra.start_mark)
        return root
    finally:
        events.dispose()


def _compose_document(events: Any, max_depth: int, max_values: int) -> yaml.Node:
    anchors: dict[str, yaml.Node] = {}
    open_nodes: list[tuple[yaml.Node, list[yaml.Node]]] = []
    root: yaml.Node | None = None
    # Values so far with aliases expanded, and each finished node's share of them; an alias of a node still open is a
    # cycle (counted once here, refused by the stack file checks).
    values = 0
    expanded: dict[int, int] = {}
    counted_at: list[int] = []  # `values` before each open node
    while not events.check_event(DocumentEndEvent):
        event = events.get_event()
        if isinstance(event, SequenceEndEvent | MappingEndEvent):
            node, items = open_nodes.pop()
            node.value = items if isinstance(node, yaml.SequenceNode) else _pairs(items)
            node.end_mark = event.end_mark
            expanded[id(node)] = values - counted_at.pop()
            continue
        if len(open_nodes) >= max_depth:
            raise NestingTooDeep(None, None, f"nested deeper than {max_depth} levels", event.start_mark)
        node = _node(event, anchors)
        values += expanded.get(id(node), 1) if isinstance(event, AliasEvent) else 1
        if values > max_values:
            raise TooManyValues(None, None, f"more than {max_values} values", event.start_mark)
        if open_nodes:
            parent, items = open_nodes[-1]
            if isinstance(event, AliasEvent) and isinstance(parent, MappingNode) and len(items) % 2:
                parent.aliased.add(len(items) // 2)
            items.append(node)
        else:
            root = node
        if isinstance(event, CollectionStartEvent):
            open_nodes.append((node, []))
            counted_at.append(values - 1)
    events.get_event()
    assert root is not None
    return root


def _pairs(items: list[yaml.Node]) -> list[tuple[yaml.Node, yaml.Node]]:
    return list(zip(items[::2], items[1::2], strict=True))


def _node(event: Any, anchors: dict[str, yaml.Node]) -> yaml.Node:
    """The node an event opens or stands for; records its anchor (a redefined anchor replaces the old one)."""
    start: Any = event.start_mark
    if isinstance(event, AliasEvent):
        if event.anchor not in anchors:
            raise yaml.composer.ComposerError(None, None, f"found undefined alias {event.anchor!r}", start)
        return anchors[event.anchor]
    node: yaml.Node
    if isinstance(event, ScalarEvent):
        end: Any = event.end_mark
        node = yaml.ScalarNode(scalar_tag(event), event.value, start, end, event.style)
    elif isinstance(event, MappingStartEvent):
        node = MappingNode(MAP if event.tag in (None, "!") else event.tag, start, event.flow_style)
    else:
        tag = SEQ if event.tag in (None, "!") else event.tag
        node = yaml.SequenceNode(tag, [], start, None, flow_style=event.flow_style)
    if event.anchor is not None:
        anchors[event.anchor] = node
    return node


# ---------------------------------------------------------------------------------------------------- construct
def is_merge_key(node: yaml.Node) -> bool:
    """decode.go `isMerge`: a scalar `<<` whose tag is the merge tag (plain, `!`-tagged or `!!merge`)."""
    return isinstance(node, yaml.ScalarNode) and node.tag == MERGE and node.value == "<<"


def construct(root: yaml.Node) -> Any:
    """Python values for a node graph that passed the stack file checks (JSON tags, text keys, no cycles): a shared
    node (an alias) gives one shared value, and mappings merge as decode.go `mapping` and `merge` do."""
    built: dict[int, Any] = {}

    def value(node: yaml.Node) -> Any:
        if id(node) in built:
            return built[id(node)]
        if isinstance(node, yaml.ScalarNode):
            return scalar_value(node)
        if isinstance(node, yaml.SequenceNode):
            items: list[Any] = []
            built[id(node)] = items
            items.extend(value(item) for item in node.value)
            return items
        mapping: dict[str, Any] = {}
        built[id(node)] = mapping
        fill(mapping, cast(yaml.MappingNode, node), None)
        return mapping

    def fill(out: dict[str, Any], node: yaml.MappingNode, claimed: set[str] | None) -> None:
        merge: yaml.Node | None = None
        for key, item in node.value:
            if is_merge_key(key):
                merge = item
                continue
            if claimed is not None:
                if key.value in claimed:
                    continue
                claimed.add(key.value)
            out[key.value] = value(item)
        if merge is None:
            return
        if claimed is None:  # the outermost merge: every key the mapping itself writes, `<<` included, is taken
            claimed = {key.value for key, _ in node.value}
        for source in merge.value if isinstance(merge, yaml.SequenceNode) else [merge]:
            fill(out, cast(yaml.MappingNode, source), claimed)

    return value(root)


def scalar_value(node: yaml.Node) -> Any:
    """The value of a scalar tagged str, null, bool, int, float or merge (a `<<` value is the text `<<`)."""
    text = node.value
    if node.tag == NULL:
        return None
    if node.tag == BOOL:
        return text in ("true", "True", "TRUE")
    if node.tag == INT:
        return go_int(text.replace("_", ""))
    if node.tag == FLOAT:
        lowered = text.lower()
        if lowered.endswith(".nan"):
            return math.nan
        if lowered.endswith(".inf"):
            return -math.inf if text.startswith("-") else math.inf
        plain = text.replace("_", "")
        whole = go_int(plain)  # `!!float 0x10` is 16.0 (resolve.go: an int where a float is asked for)
        return float(whole) if whole is not None else float(plain)
    return text
