"""The `blueprint` command's conventions: --version, --help with exit codes and examples, tables at the terminal's
width, no traceback on a closed stdout or an unwritable path, usage and I/O errors with codes of their own, data on
stdout and everything else on stderr."""

from __future__ import annotations

import argparse
import io
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from blueprint import cli, exit_codes, terminal
from blueprint.plan.runner import PROJECT_ROOT
from tests.builders import CliResult, cli_parser
from tests.tiers import cli_tier

Cli = Callable[..., CliResult]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand the parser has, so one added without an example or exit codes fails the tests below."""
    parser = cli_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


# ------------------------------------------------------------------------------------------------------ --version
def test_version_is_the_installed_distributions(blueprint_cli: Cli) -> None:
    result = blueprint_cli("--version")
    assert result == (0, f"blueprint {metadata.version(cli.DISTRIBUTION)}\n", "")


def test_version_from_a_source_tree_never_installed_reads_pyproject(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(cli.metadata, "version", not_installed)
    pyproject = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == cli.DISTRIBUTION
    assert cli.version() == f"{pyproject['project']['version']} (source, not installed)"


# --------------------------------------------------------------------------------------------------------- --help
def examples(help_text: str) -> list[str]:
    """The command lines under `examples` in a help text."""
    section = help_text.split("examples", 1)[1].split("exit codes:", 1)[0]
    return [line.strip() for line in section.splitlines() if line.strip().startswith("blueprint ")]


def codes(help_text: str) -> set[int]:
    section = help_text.split("exit codes:\n", 1)[1]
    return {int(m) for m in re.findall(r"^  (\d+) ", section, flags=re.MULTILINE)}


def test_the_top_level_help_shows_every_exit_code_and_an_example_of_every_subcommand(blueprint_cli: Cli) -> None:
    result = blueprint_cli("--help")
    assert result.returncode == 0 and result.stderr == ""
    assert codes(result.stdout) == set(exit_codes.MEANING)
    shown = {line.split()[1] for line in examples(result.stdout)}
    assert shown == set(subcommands())


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommands_help_shows_its_exit_codes_and_examples_that_parse(name: str, blueprint_cli: Cli) -> None:
    result = blueprint_cli(name, "--help")
    assert result.returncode == 0 and result.stderr == ""
    assert set(exit_codes.COMMON) <= codes(result.stdout) <= set(exit_codes.MEANING)
    lines = examples(result.stdout)
    assert lines and all(line.split()[1] == name for line in lines)
    for line in lines:  # each example is a valid command line (up to a pipe or a redirection)
        words = shlex.split(re.split(r"[|>]", line)[0])
        assert cli_parser().parse_args(words[1:]).command == name
    assert widest(result.stdout.split("examples", 1)[1]) <= 80


def test_the_readme_and_the_operations_guide_name_every_exit_code() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text()
    line = next(line for line in readme.splitlines() if line.startswith("Exit codes:"))
    paragraph = readme[readme.index(line) :].split("\n\n", 1)[0]
    assert {int(n) for n in re.findall(r"\b(\d+)\s", paragraph)} >= set(exit_codes.MEANING)
    operations = (PROJECT_ROOT / "docs" / "operations.md").read_text()
    table = operations.split("### Exit codes", 1)[1].split("\n#", 1)[0]
    assert {int(n) for n in re.findall(r"^\| (\d+) ", table, flags=re.MULTILINE)} == set(exit_codes.MEANING)


# --------------------------------------------------------------------------------------------------- table widths
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(args, marks=cli_tier(args))
        for args in [
            ("plan", "--stack", "training"),
            ("plan", "--stack", "hybrid"),
            ("check", "--stack", "training"),
            ("catalog",),
            ("simulate", "--stack", "inference"),
        ]
    ],
)
def test_tables_fit_80_columns_and_fold_long_cells(
    args: tuple[str, ...], blueprint_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    narrow = blueprint_cli(*args)
    assert narrow.returncode == 0, narrow.stderr
    assert widest(narrow.stdout) <= 80
    assert "…" not in narrow.stdout  # a cell too long for its column folds onto more lines, never cut
    monkeypatch.setenv("COLUMNS", "200")
    wide = blueprint_cli(*args)
    assert widest(wide.stdout) > 80 and len(wide.stdout.splitlines()) < len(narrow.stdout.splitlines())


def test_the_violation_table_folds_a_long_message_and_resource_to_the_width() -> None:
    from blueprint.plan.check import format_violations

    message = "the node pools cost $220.76/hour at maximum size; " * 4 + "x" * 150
    violation = {"policy": "gpu-budget", "level": "mandatory", "resource": "r" * 90, "message": message}
    table = format_violations([violation], "table", width=80)
    assert widest(table) <= 80
    unfolded = "".join(line.split("  ")[-1].strip() for line in table.splitlines()[1:-2])
    assert "x" * 150 in unfolded.replace(" ", "")


def test_width_is_columns_else_the_terminal_else_120(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "91")
    assert terminal.width() == 91
    monkeypatch.delenv("COLUMNS")

    def no_terminal(fd: int = 1) -> None:
        raise OSError("not a terminal")

    monkeypatch.setattr("os.get_terminal_size", no_terminal)
    assert terminal.width() == terminal.DEFAULT_WIDTH == 120


# ----------------------------------------------------------------------------------------------- a closed stdout
@pytest.mark.program
@pytest.mark.parametrize("args", [("catalog", "--format", "json"), ("catalog",)])
def test_a_reader_that_closes_stdout_early_gets_no_traceback(args: tuple[str, ...]) -> None:
    """`blueprint catalog | head -0` in a real process: the reader is gone before the first write."""
    process = subprocess.Popen(
        [sys.executable, "-m", "blueprint.cli", *args],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == exit_codes.BROKEN_PIPE == 141
    assert err == "", err


class ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.program
@pytest.mark.parametrize("fmt", ["json", "table"])
def test_a_closed_stdout_ends_a_plan_quietly(fmt: str, blueprint_cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    blueprint_cli("plan", "--stack", "training")  # the shared plan, before stdout breaks
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    result = blueprint_cli("plan", "--stack", "training", "--format", fmt)
    assert result.returncode == 141 and result.stderr == ""


@pytest.mark.program
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux) to fill stdout's disk")
def test_a_full_disk_behind_stdout_is_an_io_error_in_one_line() -> None:
    """`blueprint catalog > /dev/full` in a real process: every write fails with ENOSPC."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "blueprint.cli", "catalog", "--format", "json"],
            cwd=PROJECT_ROOT,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert done.returncode == exit_codes.IO
    assert done.stderr == "blueprint: cannot write the output: No space left on device\n"


# ------------------------------------------------------------------------------------------------------ I/O errors
def only_line(result: CliResult) -> str:
    """The one line a failed command prints; nothing on stdout, no traceback."""
    assert result.stdout == "" and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_an_unwritable_plot_path_is_an_io_error(blueprint_cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "missing" / "dir" / "x.png"
    result = blueprint_cli("simulate", "--stack", "inference", "--plot", str(path))
    assert result.returncode == 74
    assert result.stderr == f"blueprint: --plot: cannot write {path}: No such file or directory\n"
    assert "Traceback" not in result.stderr


def test_schema_write_to_an_unwritable_place_is_an_io_error(
    blueprint_cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from blueprint import reference

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(reference, "SCHEMA_PATH", blocker / "schema" / "stack-config.schema.json")
    result = blueprint_cli("schema", "--write")
    assert result.returncode == 74
    assert only_line(result) == f"blueprint: schema --write: {blocker / 'schema'}: Not a directory"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("check", "--stack", "training", "--policy-config", "/missing/policy.json"), "/missing/policy.json"),
        (("plan", "--config", "/missing/Pulumi.x.yaml"), "no stack file /missing/Pulumi.x.yaml"),
        (("simulate", "--stack", "inference", "--series", "/missing/u.csv"), "/missing/u.csv: No such file"),
    ],
)
def test_a_file_that_cannot_be_read_is_an_io_error(args: tuple[str, ...], message: str, blueprint_cli: Cli) -> None:
    result = blueprint_cli(*args)
    assert result.returncode == 74 and message in only_line(result)


def test_a_policy_config_that_is_not_json_is_a_config_error(blueprint_cli: Cli, tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text("{")
    result = blueprint_cli("check", "--stack", "training", "--policy-config", str(policy))
    assert result.returncode == 2
    assert only_line(result).startswith(f"blueprint: {policy}: not a JSON policy config")


# ---------------------------------------------------------------------------------------------------- usage errors
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "the following arguments are required: command"),
        (("deploy",), "invalid choice: 'deploy'"),
        (("plan", "--stack", "training", "--format", "yaml"), "invalid choice: 'yaml'"),
        (("plan", "--stack", "training", "--bogus"), "unrecognized arguments: --bogus"),
        (("simulate", "--stack", "inference", "--start-replicas", "many"), "invalid int value: 'many'"),
        (("schema", "--write", "--check"), "not allowed with argument"),
    ],
)
def test_usage_errors_exit_64_with_the_usage_line(args: tuple[str, ...], message: str, blueprint_cli: Cli) -> None:
    result = blueprint_cli(*args)
    assert result.returncode == exit_codes.USAGE == 64
    assert result.stdout == "" and result.stderr.startswith("usage: blueprint") and message in result.stderr


@pytest.mark.parametrize("flags", [("--start-replicas", "3"), ("--all",), ("--start-replicas", "3", "--all")])
def test_replay_flags_with_a_demand_comparison_are_a_usage_error(flags: tuple[str, ...], blueprint_cli: Cli) -> None:
    """`--start-replicas` and `--all` shape a `--series` replay; a demand comparison would ignore them silently."""
    result = blueprint_cli("simulate", "--stack", "inference", "--demand", "spike", *flags)
    assert result.returncode == 64
    assert "only with --series" in only_line(result) and flags[0] in only_line(result)


@pytest.mark.parametrize("name", ["plan", "check", "simulate", "verify"])
def test_a_stack_command_without_a_stack_is_a_usage_error(name: str, blueprint_cli: Cli) -> None:
    result = blueprint_cli(name)
    assert result.returncode == 64
    assert only_line(result) == f"blueprint: {name}: give --stack NAME or --config FILE"


def test_the_codes_are_distinct() -> None:
    values = [exit_codes.OK, exit_codes.FAILED, exit_codes.CONFIG, exit_codes.USAGE, exit_codes.IO]
    values += [exit_codes.INTERRUPTED, exit_codes.BROKEN_PIPE]
    assert len(set(values)) == len(values) == len(exit_codes.MEANING)


# ---------------------------------------------------------------------------------------------- stdout and stderr
def test_simulate_writes_the_timeline_to_stdout_and_wrote_to_stderr(blueprint_cli: Cli, tmp_path: Path) -> None:
    image = tmp_path / "u.png"
    result = blueprint_cli("simulate", "--stack", "inference", "--plot", str(image))
    assert result.returncode == 0 and image.exists()
    assert result.stderr == f"wrote {image}\n"
    assert "wrote" not in result.stdout and "replicas" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(args, marks=cli_tier(args))
        for args in [
            ("plan", "--stack", "training", "--format", "json"),
            ("check", "--stack", "training", "--format", "json"),
            ("catalog", "--format", "json"),
            ("schema",),
        ]
    ],
)
def test_json_on_stdout_is_the_whole_output(args: tuple[str, ...], blueprint_cli: Cli) -> None:
    result = blueprint_cli(*args)
    assert result.returncode == 0 and result.stderr == ""
    json.loads(result.stdout)


def test_errors_go_to_stderr_and_leave_stdout_empty(blueprint_cli: Cli) -> None:
    result = blueprint_cli("simulate", "--stack", "training")
    assert result.returncode == 2 and result.stdout == "" and "no serving workload" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--plot", "timeline.unknown"), "--plot timeline.unknown: name an image file ending in one of .png"),
        (("--plot", "timeline"), "--plot timeline: name an image file"),
        (("--start-replicas", "-5"), "--start-replicas -5: give a count of replicas, 0 or more"),
    ],
)
def test_simulate_refuses_what_it_cannot_do_before_simulating(
    args: tuple[str, ...], message: str, blueprint_cli: Cli
) -> None:
    result = blueprint_cli("simulate", "--stack", "inference", *args)
    assert result.returncode == 64
    assert only_line(result).startswith(f"blueprint: {message}")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"utilization\n50\nnan\n", "'nan' is not a percentage from 0 to 100"),
        (b"utilization\n-50\n", "'-50' is not a percentage from 0 to 100"),
        (b"utilization\n1e400\n", "'1e400' is not a percentage from 0 to 100"),
        (b"utilization\n\xff\xfe50\n", "is not UTF-8; save the series as UTF-8 CSV"),
    ],
)
def test_a_series_that_is_not_percentages_is_a_config_error(
    content: bytes, message: str, blueprint_cli: Cli, tmp_path: Path
) -> None:
    series = tmp_path / "series.csv"
    series.write_bytes(content)
    result = blueprint_cli("simulate", "--stack", "inference", "--series", str(series))
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
