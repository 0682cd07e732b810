"""The pull-request workflow runs the same steps as `.ci/run`, so the two cannot drift."""

from __future__ import annotations

import json
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.charts.rendering import CLOUDWATCH_CHART, releases_of

ROOT = Path(__file__).resolve().parent.parent


def test_the_workflow_test_job_runs_every_ci_step_in_order() -> None:
    steps = subprocess.run([ROOT / ".ci/run", "--list"], capture_output=True, text=True, check=True).stdout.split()
    assert steps[:2] == ["install", "ruff"] and "pytest" in steps
    workflow = yaml.safe_load((ROOT / ".github/workflows/pull-request.yml").read_text())
    runs = [step["run"] for step in workflow["jobs"]["test"]["steps"] if "run" in step]
    assert runs == [f".ci/run {step}" for step in steps]


def test_an_unknown_step_is_a_usage_error() -> None:
    result = subprocess.run([ROOT / ".ci/run", "lint"], capture_output=True, text=True)
    assert result.returncode == 64
    assert "no step 'lint'" in result.stderr


def _fetched_folders(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The folders `.ci/fetch-charts --list` names, from its `main` in this process (the script puts the checkout on
    `sys.path`, which is restored after); the script's own process is run once, by the test after this one."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = runpy.run_path(str(ROOT / ".ci/fetch-charts"), run_name="fetch_charts")
    capsys.readouterr()
    assert script["main"](["--list"]) == 0
    return {line.split(":", 1)[0] for line in capsys.readouterr().out.splitlines()}


def test_the_chart_fetch_covers_every_release_the_chart_tests_render(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the shared reference is absent (GitHub's runners) the charts step pulls the pinned charts first: every
    chart a shipped stack's plan releases, and the CloudWatch add-on's, must be among them."""
    rendered = set()
    for recorded in sorted((ROOT / "tests/data/plans").glob("*.json")):
        plan = json.loads(recorded.read_text())
        rendered |= {r.chart_dir for r in releases_of(plan["resources"], plan["summary"]["region"])}
    assert CLOUDWATCH_CHART in rendered  # the training stack's Container Insights add-on
    fetched = _fetched_folders(capsys, monkeypatch)
    assert rendered <= fetched, rendered - fetched


def test_the_chart_fetch_refuses_a_call_without_a_folder() -> None:
    """The script as CI runs it, in its own process: its exit code and usage reach the caller."""
    result = subprocess.run([sys.executable, ROOT / ".ci/fetch-charts"], capture_output=True, text=True)
    assert result.returncode == 64 and "Usage" in result.stderr


def test_the_promql_step_runs_every_module_that_uses_promtool() -> None:
    """The `promql` step runs `tests/test_*_promtool.py` with promtool required; a module using promtool under
    another name would only ever skip in CI."""
    step = (ROOT / ".ci/run").read_text().split("promql() {", 1)[1].split("\n}", 1)[0]
    assert "BLUEPRINT_REQUIRE_PROMTOOL=1 .venv/bin/python -m pytest -q -m program tests/test_*_promtool.py" in step
    uses = re.compile(r"^from tests\.promtool import", re.M)
    users = {p.name for p in (ROOT / "tests").glob("test_*.py") if uses.search(p.read_text())}
    assert users and users == {p.name for p in (ROOT / "tests").glob("test_*_promtool.py")}


def test_the_training_step_runs_every_module_marked_training() -> None:
    """The `training` step runs the reference script's tests with torch required; a `training` test in another
    module would be left out of the everyday run and never run in CI."""
    step = (ROOT / ".ci/run").read_text().split("training() {", 1)[1].split("\n}", 1)[0]
    command = re.search(r"BLUEPRINT_REQUIRE_TORCH=1 \.venv/bin/python -m pytest -q -m training -n 0 (.+)", step)
    assert command, step
    marks = re.compile(r"^\s*(@|pytestmark = \[?)?pytest\.mark\.training\b", re.M)
    marked = {p.name for p in (ROOT / "tests").rglob("test_*.py") if marks.search(p.read_text())}
    assert marked and {f"tests/{name}" for name in marked} == set(command[1].split())
