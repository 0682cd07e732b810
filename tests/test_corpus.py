"""Broken stack files, through the CLI as users run it: exit 2, each problem once at its key path, no traceback.

Each file under tests/corpus/bad/ says in its header what it must report, one `# expect: PATH :: FRAGMENT` line per
problem (`FILE` stands for the file's own path). The reported problems must be exactly those: every expected one,
each once, and nothing else (no follow-on errors). Files under tests/corpus/good/ are valid edge cases that must
plan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from blueprint.plan.runner import PROJECT_ROOT
from tests.builders import PLACEMENT_GROUP, CliResult

CORPUS = Path(__file__).parent / "corpus"
BAD = sorted((CORPUS / "bad").glob("*.yaml"))
GOOD = sorted((CORPUS / "good").glob("*.yaml"))
EXPECT = re.compile(r"^# expect: (?P<path>.+?) :: (?P<fragment>.+)$")

#: The bad files refused while their stack file loads (`blueprint.plan.runner.load_stack`: YAML the Pulumi CLI would
#: refuse or misread, a file that is not a stack file), before the program runs; every other one runs the program,
#: which refuses it in validation, so its test is marked `program` (tests/tiers.py).
REFUSED_WHILE_LOADING = frozenset(
    {
        "alias-bomb",
        "alias-cycle",
        "binary",
        "config-a-list",
        "config-a-string",
        "custom-tag",
        "deep-nesting",
        "duplicate-keys",
        "empty",
        "infinity",
        "invalid-yaml",
        "leading-zero-number",
        "merge-key-a-list",
        "merge-key-not-a-mapping",
        "nan",
        "non-string-keys",
        "non-utf8",
        "secrets-provider-a-number",
        "set",
        "stack-file-key-misspelt",
        "tab-indent",
        "timestamp",
        "top-level-list",
        "unquoted-date",
    }
)


def expectations(path: Path) -> list[tuple[str, str]]:
    """(key path, message fragment) pairs from the file's header comments."""
    header = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    found = [EXPECT.match(line) for line in header]
    return [(m["path"].replace("FILE", str(path)), m["fragment"]) for m in found if m]


def problem_lines(stderr: str) -> list[str]:
    """The `  path: message` lines of a ConfigError as the CLI prints it."""
    return [line[2:] for line in stderr.splitlines() if line.startswith("  ")]


def test_the_files_refused_while_loading_are_bad_files() -> None:
    assert {p.stem for p in BAD} >= REFUSED_WHILE_LOADING


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=p.stem, marks=[] if p.stem in REFUSED_WHILE_LOADING else [pytest.mark.program]) for p in BAD],
)
def test_bad_stack_file_is_refused_with_its_problems(path: Path, blueprint_cli: Callable[..., CliResult]) -> None:
    expected = expectations(path)
    assert expected, f"{path.name} names no `# expect:` line"
    code, out, err = blueprint_cli("plan", "--config", str(path), "--format", "json")
    assert code == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = problem_lines(err)
    for key_path, fragment in expected:
        matching = [line for line in lines if line.startswith(f"{key_path}: ") and fragment in line]
        assert len(matching) == 1, f"want one `{key_path}: ...{fragment}...`; got:\n" + "\n".join(lines)
    assert len(lines) == len(expected), "problems beyond the expected ones:\n" + "\n".join(lines)


@pytest.mark.program
@pytest.mark.parametrize("path", GOOD, ids=[p.stem for p in GOOD])
def test_valid_edge_case_plans(path: Path, blueprint_cli: Callable[..., CliResult]) -> None:
    code, out, err = blueprint_cli("plan", "--config", str(path), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["resources"]


@pytest.mark.program
def test_yaml_1_1_words_mean_themselves(blueprint_cli: Callable[..., CliResult]) -> None:
    """`placementGroup: off` is the word `off` (no placement group), as the Pulumi CLI reads it."""
    code, out, err = blueprint_cli(
        "plan", "--config", str(CORPUS / "good" / "placement-group-off.yaml"), "--format", "json"
    )
    assert code == 0, err
    types = [r["type"] for r in json.loads(out)["resources"]]
    assert PLACEMENT_GROUP not in types


def test_unreadable_file_is_an_io_error(tmp_path: Path, blueprint_cli: Callable[..., CliResult]) -> None:
    code, _, err = blueprint_cli("plan", "--config", str(tmp_path))
    assert code == 74
    assert f"{tmp_path}: Is a directory" in err and "Traceback" not in err


def test_missing_file_names_the_stacks(blueprint_cli: Callable[..., CliResult]) -> None:
    code, _, err = blueprint_cli("plan", "--stack", "nope")
    assert code == 74
    assert "training" in err and "Traceback" not in err


@pytest.mark.program
def test_huge_values_are_cut_in_messages(tmp_path: Path, blueprint_cli: Callable[..., CliResult]) -> None:
    """A megabyte-long value is named, never echoed whole."""
    huge = "x" * 200_000
    stack = tmp_path / "Pulumi.huge.yaml"
    stack.write_text(
        f"config:\n  aws:region: {huge}\n  gpu-clusters:cluster: {{name: {huge}, kubernetesVersion: '{huge}'}}\n"
        f"  ? gpu-clusters:{huge}\n  : 1\n  gpu-clusters:nodePools: [{{name: a{huge}, role: system}}]\n"
    )
    code, _, err = blueprint_cli("plan", "--config", str(stack))
    assert code == 2
    lines = problem_lines(err)
    assert len(lines) >= 4
    assert all(len(line) < 1000 for line in lines), max(lines, key=len)[:200]


@pytest.mark.program
def test_shipped_stacks_still_plan(blueprint_cli: Callable[..., CliResult]) -> None:
    for stack in ("training", "inference", "hybrid"):
        result = blueprint_cli("plan", "--stack", stack, "--format", "json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["stack"] == stack
    assert (PROJECT_ROOT / "stacks").is_dir()
