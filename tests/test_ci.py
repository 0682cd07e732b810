"""The pull-request workflow runs the same steps as `.ci/run`, so the two cannot drift."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

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
