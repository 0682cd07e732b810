"""Plain scalars and the reader's limits in stack files, as the Pulumi CLI reads them: Go's yaml.v3 v3.0.1,
resolve.go `resolve` (untagged plain scalars) and decode.go `parser.node` (tags), with the project's own depth limit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from blueprint.plan import yaml_v3
from blueprint.plan.stack_yaml import MAX_DEPTH, MAX_FILE_BYTES, MAX_VALUES, read_yaml
from components.errors import ConfigError


def value_of(tmp_path: Path, text: str) -> object:
    path = tmp_path / "Pulumi.scalar.yaml"
    path.write_text(f"v: {text}\n")
    document = read_yaml(path)
    assert isinstance(document, dict)
    return document["v"]


def refusal(tmp_path: Path, text: str) -> str:
    path = tmp_path / "Pulumi.scalar.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        read_yaml(path)
    return " | ".join(problem.message for problem in refused.value.problems)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("FALSE", False),
        ("yes", "yes"),
        ("off", "off"),
        ("~", None),
        ("", None),
        ("Null", None),
        ("1_000", 1000),
        ("+7", 7),
        ("0x1F", 31),
        ("-0x1f", -31),
        ("0o17", 15),
        ("0b101", 5),
        ("18446744073709551615", 18446744073709551615),
        ("99999999999999999999", 1e20),
        ("08", 8.0),
        ("1e3", 1000.0),
        (".5", 0.5),
        ("1e400", "1e400"),
        ("2024-01", "2024-01"),
        ("2024-02-30", "2024-02-30"),
        ("'5'", "5"),
        ("! 5", 5),
        ("! '5'", "5"),
        ("!!str 5", "5"),
        ("!!float 0x10", 16.0),
    ],
)
def test_plain_scalars_resolve_as_in_yaml_v3(tmp_path: Path, text: str, expected: object) -> None:
    """resolve.go `resolve`: booleans and nulls by their whole text (YAML 1.2, so `yes` is text); a digit or sign
    first is an int with `_` dropped (`strconv.ParseInt` base 0: 0x, 0o, 0b), else uint64, else a float
    (`yamlStyleFloat`, and `1e400`, out of range, stays text); a date that is no valid timestamp is text; a quoted
    scalar is text; `!` resolves as untagged (decode.go `parser.node`); `!!float` takes an int."""
    value = value_of(tmp_path, text)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("2024-01-01", "2024-01-01 is a timestamp to the Pulumi CLI"),
        ("2024-1-2T3:04:05Z", "is a timestamp to the Pulumi CLI"),
        ("2024-01-01 10:00:00", "is a timestamp to the Pulumi CLI"),
        ("010", "010 is octal to the Pulumi CLI"),
        ("0_10", "0_10 is octal to the Pulumi CLI"),
        ("!!int abc", "abc is not a valid `!!int`"),
        ("!!bool yes", "yes is not a valid `!!bool`"),
        (".inf", "not a finite number"),
    ],
)
def test_what_the_cli_would_misread_is_refused(tmp_path: Path, text: str, fragment: str) -> None:
    """resolve.go `parseTimestamp` reads an unquoted date (its `allowedTimestampFormats`) as a time, which Pulumi's
    config (`unmarshalObject`) turns into Go's time text; a leading-zero int is a YAML 1.1 octal to yaml.v3; an
    explicit tag that does not fit fails in `resolve` ("cannot decode"); JSON has no infinity."""
    assert fragment in refusal(tmp_path, f"v: {text}\n")


@pytest.mark.parametrize("text", ["2024-01-01T10:00:00,5Z", "2024-01-01t10:00:00,123+02:00", "2024-01-01 10:00:00,5"])
def test_a_comma_before_the_fraction_is_a_timestamp_too(tmp_path: Path, text: str) -> None:
    """resolve.go `parseTimestamp` hands the text to Go's `time.Parse` with layouts ending `5.999999999`; since Go
    1.17 (the CLI's go.mod asks for far newer) `time.Parse` takes a comma there as well as a dot (format.go,
    `stdFracSecond9` case, `commaOrPeriod`), so yaml.v3 reads these as times too."""
    assert f"{text} is a timestamp to the Pulumi CLI" in refusal(tmp_path, f"v: {text}\n")


def test_an_integer_of_thousands_of_digits_is_text_or_refused(tmp_path: Path) -> None:
    """Past 2**64 (20 digits) `strconv.ParseInt` and `ParseUint` fail and `ParseFloat` overflows, so yaml.v3's
    `resolve` reads the plain scalar as text, and `!!int` refuses it; Python's `int` refuses to convert more than
    4,300 decimal digits (`sys.get_int_max_str_digits`), which must not escape as a traceback."""
    digits = "1" * 5000
    assert value_of(tmp_path, digits) == digits
    assert value_of(tmp_path, f"-{digits}") == f"-{digits}"
    assert "is not a valid `!!int`" in refusal(tmp_path, f"v: !!int {digits}\n")


def test_another_mark_before_the_fraction_is_text(tmp_path: Path) -> None:
    """Only `.` and `,` start a fraction for `time.Parse` (format.go `commaOrPeriod`); anything else fails every
    layout, so yaml.v3's `resolve` falls through to text."""
    assert value_of(tmp_path, "2024-01-01T10:00:00;5Z") == "2024-01-01T10:00:00;5Z"


def nested(depth: int, flow: bool) -> str:
    """A document whose innermost value, `1`, is `depth` levels deep (the top mapping is level 1)."""
    if flow:
        return "v: " + "[" * (depth - 2) + "1" + "]" * (depth - 2) + "\n"
    return "".join(f"{'  ' * level}k{level}:\n" for level in range(depth - 2)) + f"{'  ' * (depth - 2)}k: 1\n"


@pytest.mark.parametrize("flow", [True, False], ids=["flow", "block"])
def test_nesting_is_limited_to_64_levels(tmp_path: Path, flow: bool) -> None:
    """The project's own limit, checked as the parser's events arrive: 64 levels read, 65 are refused."""
    path = tmp_path / "Pulumi.deep.yaml"
    path.write_text(nested(MAX_DEPTH, flow))
    assert read_yaml(path)
    assert "nested deeper than 64 levels" in refusal(tmp_path, nested(MAX_DEPTH + 1, flow))


@pytest.mark.parametrize("parser", [yaml.SafeLoader, yaml.CSafeLoader], ids=["pure-python", "libyaml"])
def test_a_line_nested_past_any_parser_limit_gets_the_projects_message(parser: type[yaml.SafeLoader]) -> None:
    """libyaml (PyYAML 6.0.4) refuses 1,000 levels on one line while looking ahead, before its events reach the depth
    check; the reader still reports its own limit, whichever parser is installed."""
    with pytest.raises(yaml_v3.NestingTooDeep) as refused:
        yaml_v3.compose(nested(5000, flow=True), MAX_DEPTH, MAX_VALUES, parser)
    assert refused.value.problem == f"nested deeper than {MAX_DEPTH} levels"


@pytest.mark.parametrize("after", ["@", "\t", "}"], ids=["bad-character", "tab", "wrong-bracket"])
def test_a_syntax_error_just_past_libyamls_limit_gets_the_projects_message(tmp_path: Path, after: str) -> None:
    """libyaml stops at its own limit before it meets the error: the line is refused as nested past 64 levels, not
    with libyaml's words for its limit."""
    message = refusal(tmp_path, "v: " + "[" * 1001 + after + "\n")
    assert message == "line 1, column 67: nested deeper than 64 levels"


@pytest.mark.parametrize(
    "text",
    ["v: [" + ", ".join(["[1]"] * 100) + "]]\n", "v: " + "[" * 100 + "@\n"],
    ids=["shallow-lists", "deep-with-a-bad-character"],
)
def test_other_syntax_errors_on_a_bracket_heavy_line_keep_their_message(tmp_path: Path, text: str) -> None:
    """Only libyaml's own nesting limit is read again: a line of many shallow lists with a syntax error, or a line
    nested past 64 levels with a character that starts no token (met while looking ahead, before any event), reports
    that error."""
    message = refusal(tmp_path, text)
    assert "invalid YAML" in message and "nested deeper" not in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a: *nowhere\n", "line 1, column 4: invalid YAML: found undefined alias 'nowhere'"),
        ("a: 1\n---\nb: 2\n", "line 2, column 1: a stack file is one YAML document, and a second one starts here"),
        ("a: 1\n--- 2\n", "the Pulumi CLI would read the first and ignore the rest"),
    ],
)
def test_one_document_and_known_aliases(tmp_path: Path, text: str, fragment: str) -> None:
    """A stack file is one document: yaml.v3's `Unmarshal` decodes the first and silently ignores the rest (yaml.go
    `unmarshal` calls `parser.parse` once), so a second one is refused rather than dropped; an alias names an anchor
    before it (decode.go `parser.alias`: "unknown anchor")."""
    assert fragment in refusal(tmp_path, text)


@pytest.mark.parametrize("version", ["1.2", "1.0", "1.3", "2.0"])
def test_a_yaml_version_other_than_1_1_is_refused(tmp_path: Path, version: str) -> None:
    """parserc.go `yaml_parser_process_directives` (v3.0.1, line 1195): a `%YAML` directive whose version is not
    exactly 1.1 fails with "found incompatible YAML document", so `pulumi up` refuses the file."""
    message = refusal(tmp_path, f"%YAML {version}\n---\nv: 1\n")
    assert message.startswith("line 1, column 1: the Pulumi CLI (yaml.v3) reads only YAML 1.1"), message


@pytest.mark.parametrize("parser", [yaml.SafeLoader, yaml.CSafeLoader], ids=["pure-python", "libyaml"])
def test_either_parser_refuses_yaml_1_2_and_reads_1_1(parser: type[yaml.SafeLoader]) -> None:
    """The version check is the reader's own, not the parser's (PyYAML's pure-Python parser accepts any 1.x)."""
    with pytest.raises(yaml.MarkedYAMLError) as refused:
        yaml_v3.compose("%YAML 1.2\n---\nv: 1\n", MAX_DEPTH, MAX_VALUES, parser)
    assert refused.value.problem == yaml_v3.INCOMPATIBLE
    node = yaml_v3.compose("%YAML 1.1\n---\nv: 1\n", MAX_DEPTH, MAX_VALUES, parser)
    assert node is not None and yaml_v3.construct(node) == {"v": 1}


def test_values_are_counted_with_aliases_expanded() -> None:
    """The root, `a`, its list and two items, `b` and its list make 7 values; each `*a` adds the 3 it stands for,
    so the document holds 13: read with a limit of 13, refused with 12 at the second alias."""
    text = "a: &a [1, 2]\nb: [*a, *a]\n"
    assert yaml_v3.compose(text, MAX_DEPTH, 13) is not None
    with pytest.raises(yaml_v3.TooManyValues) as refused:
        yaml_v3.compose(text, MAX_DEPTH, 12)
    mark = refused.value.problem_mark
    assert mark is not None and (mark.line, mark.column) == (1, 8)


@pytest.mark.parametrize("parser", [yaml.SafeLoader, yaml.CSafeLoader], ids=["pure-python", "libyaml"])
def test_the_value_limit_stops_the_read(parser: type[yaml.SafeLoader]) -> None:
    """A big plain file is refused at the value past the limit: the parser is asked for no more events after it."""
    asked = 0

    class Counting(parser):  # type: ignore[valid-type,misc]
        def get_event(self) -> object:
            nonlocal asked
            asked += 1
            return super().get_event()

    with pytest.raises(yaml_v3.TooManyValues):
        yaml_v3.compose("v: [" + ", ".join(["1"] * 10_000) + "]\n", MAX_DEPTH, 100, Counting)
    assert asked < 110


def test_a_big_plain_file_is_refused_with_the_projects_message(tmp_path: Path) -> None:
    """No alias is needed to pass the limit: a list of more than 100,000 values is refused too, at the one past it."""
    message = refusal(tmp_path, "v: [" + ",".join(["1"] * MAX_VALUES) + "]\n")
    assert message.startswith(f"line 1, column {2 * MAX_VALUES - 1}: more than {MAX_VALUES} values (aliases expanded)")


def test_the_file_is_read_up_to_its_size_limit(tmp_path: Path) -> None:
    """1 MiB is read; one byte more is refused before any of it is parsed."""
    path = tmp_path / "Pulumi.big.yaml"
    path.write_bytes(b"v: 1\n#" + b"x" * (MAX_FILE_BYTES - 6))
    assert read_yaml(path) == {"v": 1}
    path.write_bytes(path.read_bytes() + b"x")
    with pytest.raises(ConfigError, match=f"more than {MAX_FILE_BYTES} bytes"):
        read_yaml(path)


def test_an_endless_device_is_refused_after_the_limit() -> None:
    """`--config /dev/zero` reports no size and never ends: reading stops one byte past the limit."""
    with pytest.raises(ConfigError, match=f"/dev/zero: more than {MAX_FILE_BYTES} bytes"):
        read_yaml(Path("/dev/zero"))
