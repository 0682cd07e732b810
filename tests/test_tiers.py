"""The two tiers (tests/tiers.py): what counts as program-level, the guard that fails a mis-tiered test with the marker
to add, and the conftest that marks the tests taking a shipped stack's run."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import tiers
from tests.tiers import PACK_DIR, TierGuard, cli_tier, spawned_program

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["/work/.venv/bin/blueprint", "plan", "--stack", "training"], "the `blueprint` CLI in a process of its own"),
        ([sys.executable, "-m", "blueprint.cli", "catalog"], "the `blueprint` CLI in a process of its own"),
        ("blueprint check --stack training", "the `blueprint` CLI in a process of its own"),
        ([sys.executable, "-c", f"PACK = {str(PACK_DIR)!r}"], "the policy pack in a process of its own"),
        (["/usr/bin/promtool", "check", "rules", "a.yaml"], "promtool, an external engine"),
        ([Path("/usr/bin/promtool"), "test", "rules"], "promtool, an external engine"),
        (
            ["sh", "-c", "cd /tmp && blueprint plan --stack training | jq ."],
            "the `blueprint` CLI in a process of its own",
        ),
        (["bash", "-c", "set -e\n/usr/bin/promtool check rules a.yaml"], "promtool, an external engine"),
        (
            [sys.executable, "-c", "from blueprint.cli import main; main()"],
            "the `blueprint` CLI in a process of its own",
        ),
        (
            [sys.executable, "-c", "from blueprint import cli; cli.main(['catalog'])"],
            "the `blueprint` CLI in a process of its own",
        ),
        (
            ["sh", "-c", "AWS_REGION=us-east-1 COLUMNS=80 blueprint catalog"],
            "the `blueprint` CLI in a process of its own",
        ),
        (["sh", "-c", "echo 'an unclosed quote"], None),
        (["sh", "-c", "echo blueprint"], None),
        (["bash", "-c", "nodeadm init"], None),
        ([sys.executable, "-c", "print('a')"], None),
        ([sys.executable, "-m", "pytest", "-m", "program"], None),
        (["jq", "-r", ".summary"], None),
        ([], None),
    ],
)
def test_what_a_new_process_runs(args: object, what: str | None) -> None:
    assert spawned_program(args) == what  # type: ignore[arg-type]


def test_the_guard_fails_a_watched_test_naming_the_marker() -> None:
    guard = TierGuard()
    with guard.watching("tests/test_x.py::test_y"), pytest.raises(pytest.fail.Exception) as failed:
        guard.audit("blueprint.run_mocked", ("gpu-clusters", "test"))
    message = str(failed.value)
    assert message.startswith("tests/test_x.py::test_y runs the Pulumi program under mocks")
    assert "mark it `@pytest.mark.program`" in message
    assert guard.violations == [message]


def test_the_guard_fails_a_watched_test_that_starts_the_cli() -> None:
    guard = TierGuard()
    with guard.watching("t"), pytest.raises(pytest.fail.Exception, match="runs the `blueprint` CLI in a process"):
        guard.audit("subprocess.Popen", (sys.executable, [sys.executable, "-m", "blueprint.cli"], None, None))


@pytest.mark.parametrize(
    ("event", "args"),
    [
        ("os.system", (b"blueprint plan --stack training > plan.json",)),
        ("os.posix_spawn", ("/usr/bin/promtool", ["promtool", "check", "rules"], {})),
        ("os.exec", (sys.executable, [sys.executable, "-m", "blueprint.cli"], {})),
        ("os.spawn", (os.P_WAIT, "/bin/sh", ["sh", "-c", "blueprint catalog"], {})),
    ],
)
def test_the_guard_sees_processes_started_without_subprocess(event: str, args: tuple[object, ...]) -> None:
    guard = TierGuard()
    with guard.watching("t"), pytest.raises(pytest.fail.Exception, match="but is not marked `program`"):
        guard.audit(event, args)


def test_the_guard_fails_a_run_at_collection_whatever_the_marker() -> None:
    guard = TierGuard()
    with guard.watching("tests/test_x.py", collecting=True), pytest.raises(pytest.fail.Exception) as failed:
        guard.audit("blueprint.run_mocked", ("gpu-clusters", "test"))
    assert str(failed.value).startswith(
        "tests/test_x.py runs the Pulumi program under mocks (blueprint.plan.runner.run_offline) while it is collected"
    )
    assert "every run pays for it, `program` or not" in str(failed.value)


def test_the_guard_lets_other_events_and_unwatched_tests_be() -> None:
    guard = TierGuard()
    with guard.watching("t"):
        guard.audit("subprocess.Popen", ("sh", ["sh", "-c", "true"], None, None))
        guard.audit("open", ("stacks/Pulumi.training.yaml", "r", 0))
    with guard.watching(None):
        guard.audit("blueprint.run_mocked", ("gpu-clusters", "test"))
    guard.audit("blueprint.run_mocked", ("gpu-clusters", "test"))  # between tests
    assert guard.violations == []


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        (("plan", "--stack", "training"), True),
        (("check", "--config", "Pulumi.x.yaml"), True),
        (("deployer-policy", "--stack", "training"), True),
        (("preflight", "--stack", "mysmoke"), True),
        (("schema", "--write"), True),
        (("check", "--plan", "plan.json"), False),
        (("schema", "--check"), False),
        (("catalog",), False),
        (("simulate", "--stack", "inference"), False),
        (("verify", "--stack", "training"), False),
    ],
)
def test_cli_commands_that_plan_a_stack_are_program_level(argv: tuple[str, ...], program: bool) -> None:
    assert [m.name for m in cli_tier(argv)] == (["program"] if program else [])


def test_the_everyday_run_leaves_out_exactly_the_tiers_the_guard_skips() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    expression = options["addopts"].split("-m '", 1)[1].split("'", 1)[0]
    assert expression == " and ".join(f"not {name}" for name in ("slow", "charts", "training", "program"))
    assert set(tiers.LEFT_OUT) == {"slow", "charts", "training", "program"}
    registered = {line.split(":", 1)[0] for line in options["markers"]}
    assert registered >= set(tiers.LEFT_OUT)


def test_ci_runs_a_program_test_in_one_step_only() -> None:
    """CI's `program` step selects the `program` tier less the tests of the other left-out tiers, whose own steps run
    them (`slow`, `charts`, `training`); the everyday step selects none of them."""
    from _pytest.mark.expression import Expression

    line = next(ln for ln in (ROOT / ".ci/run").read_text().splitlines() if ln.startswith("PROGRAM_TIER="))
    program_step = Expression.compile(line.split("=", 1)[1].strip('"'))
    everyday = Expression.compile(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
        .split("-m '", 1)[1]
        .split("'", 1)[0]
    )
    for marks in ({"program"}, *({"program", other} for other in ("slow", "charts", "training")), set()):
        steps = [program_step.evaluate(_marked(marks)), everyday.evaluate(_marked(marks))]
        assert steps.count(True) <= 1, marks
        assert steps[0] == (marks == {"program"}), marks


def _marked(marks: set[str]) -> Callable[..., bool]:
    """A marker matcher for `Expression.evaluate`: a test with these marks."""

    def matches(name: str, /, **_: str | int | bool | None) -> bool:
        return name in marks

    return matches


@pytest.mark.parametrize(
    ("expression", "left_out"),
    [
        ("not slow and not charts and not training and not program", True),
        ("not charts", True),
        ("charts", False),
        ("slow", False),  # a chart test marked slow too would be selected
        ("program", False),
        ("", False),
    ],
)
def test_a_run_collects_the_chart_tests_unless_its_marker_expression_leaves_them_all_out(
    expression: str, left_out: bool
) -> None:
    assert tiers.leaves_out(expression, "charts") is left_out


def test_every_chart_test_module_is_marked_charts() -> None:
    """The everyday run skips tests/charts/ without importing it, so a test there must be in the `charts` tier."""
    modules = sorted(tiers.CHARTS_DIR.glob("test_*.py"))
    assert modules
    unmarked = [m.name for m in modules if "\npytestmark = pytest.mark.charts\n" not in m.read_text()]
    assert unmarked == []


MIS_TIERED = """
import subprocess, sys
import pytest
from blueprint.plan.runner import run_mocked

def test_runs_the_program_unmarked():
    run_mocked(lambda: None)

def test_swallows_the_guards_failure():
    try:
        run_mocked(lambda: None)
    except BaseException:
        pass

def test_starts_the_cli_unmarked():
    subprocess.run([sys.executable, "-m", "blueprint.cli", "--version"], check=False)

@pytest.mark.program
def test_runs_the_program_marked():
    run_mocked(lambda: None)

def test_takes_a_shipped_stack(training_stack):
    pass

def test_pure():
    assert 1 + 1 == 2
"""


def _inner_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pytest in a process of its own on `MIS_TIERED`, with this suite's conftest."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_mis_tiered.py").write_text(MIS_TIERED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-W", "ignore", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.program
def test_a_mis_tiered_test_fails_with_the_marker_to_add(tmp_path: Path) -> None:
    skip_the_stack = "test_mis_tiered.py::test_takes_a_shipped_stack"  # its run takes seconds; marked: see below
    result = _inner_pytest(tmp_path, "-q", "-rf", "--deselect", skip_the_stack, "test_mis_tiered.py")
    assert result.returncode == 1, result.stdout + result.stderr
    failed = sorted(line.split()[1] for line in result.stdout.splitlines() if line.startswith("FAILED"))
    assert failed == [
        "test_mis_tiered.py::test_runs_the_program_unmarked",
        "test_mis_tiered.py::test_starts_the_cli_unmarked",
        "test_mis_tiered.py::test_swallows_the_guards_failure",
    ]
    assert "3 failed, 2 passed, 1 deselected" in result.stdout  # the marked run and the pure test pass
    assert (
        "test_mis_tiered.py::test_runs_the_program_unmarked runs the Pulumi program under mocks "
        "(blueprint.plan.runner.run_offline) but is not marked `program`: mark it `@pytest.mark.program`"
    ) in result.stdout


@pytest.mark.program
def test_a_test_taking_a_shipped_stack_is_marked_program(tmp_path: Path) -> None:
    result = _inner_pytest(tmp_path, "--collect-only", "-q", "-m", "program", "test_mis_tiered.py")
    assert result.returncode == 0, result.stdout + result.stderr
    collected = sorted(line for line in result.stdout.splitlines() if "::" in line)
    assert collected == [
        "test_mis_tiered.py::test_runs_the_program_marked",
        "test_mis_tiered.py::test_takes_a_shipped_stack",
    ]


PLANS_AT_IMPORT = """
import pytest
from blueprint.plan.runner import run_mocked

PLAN = run_mocked(lambda: None)

@pytest.mark.program
def test_marked():
    assert PLAN is not None
"""


@pytest.mark.program
def test_a_module_that_runs_the_program_at_import_fails_to_collect(tmp_path: Path) -> None:
    (tmp_path / "test_plans_at_import.py").write_text(PLANS_AT_IMPORT)
    result = _inner_pytest(tmp_path, "-q", "-m", "not program", "test_plans_at_import.py")
    assert result.returncode == 2, result.stdout + result.stderr  # a collection error, though `-m` leaves it out
    assert (
        "test_plans_at_import.py runs the Pulumi program under mocks (blueprint.plan.runner.run_offline) while it is "
        "collected"
    ) in result.stdout
