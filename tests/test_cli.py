"""The `blueprint` command: one run of the installed console script (real exit code and stderr, no traceback),
the rest in-process through `blueprint.cli.main` on the session's shared plans."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from blueprint.plan.runner import PROJECT_ROOT, list_stacks
from tests.builders import CliResult

BROKEN_STACK = """
config:
  aws:region: us-east-1
  gpu-clusters:cluster: {name: broken, kubernetesVersion: "1.27"}
  gpu-clusters:network: {availabilityZones: [us-east-1a]}
  gpu-clusters:nodePools:
    - {name: h100, role: training, instanceType: p5.48xlarge, efa: "on", scaling: {min: 3, max: 1}}
    - {name: a40, role: inference, gpuModel: A40, gpusPerNode: 4}
"""
CONSOLE_SCRIPT = Path(sys.executable).with_name("blueprint")


@pytest.mark.program
def test_console_script_prints_every_config_problem_and_exits_2(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.broken.yaml"
    stack.write_text(BROKEN_STACK)
    result = subprocess.run(
        [str(CONSOLE_SCRIPT), "plan", "--config", str(stack), "--format", "json"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stdout == ""  # nothing planned, nothing registered
    assert "Traceback" not in result.stderr
    for line in (
        "cluster.kubernetesVersion: 1.27 is not a Kubernetes version EKS supports",
        "network.availabilityZones: list at least 2 AZs",
        "nodePools[0] (h100).scaling.min: min 3 is above max 1",
        "nodePools[1] (a40).gpuModel: AWS does not rent A40",
    ):
        assert line in result.stderr


def test_unknown_stack_is_an_io_error_naming_the_stacks(blueprint_cli: Callable[..., CliResult]) -> None:
    result = blueprint_cli("plan", "--stack", "nope")
    assert result.returncode == 74
    assert "training" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.program
@pytest.mark.parametrize("fmt", ["json", "markdown", "table"])
def test_plan_formats(fmt: str, blueprint_cli: Callable[..., CliResult]) -> None:
    result = blueprint_cli("plan", "--stack", "training", "--format", fmt)
    assert result.returncode == 0, result.stderr
    if fmt == "json":
        assert json.loads(result.stdout)["stack"] == "training"
    elif fmt == "markdown":
        assert "```mermaid" in result.stdout and "| h100 |" in result.stdout
    else:
        assert "h100" in result.stdout and "Cost:" in result.stdout


def test_catalog_lists_the_instance_types(blueprint_cli: Callable[..., CliResult]) -> None:
    result = blueprint_cli("catalog", "--format", "json")
    assert result.returncode == 0, result.stderr
    names = {row["type"] for row in json.loads(result.stdout)}
    assert {"p5.48xlarge", "p6-b300.48xlarge", "g6e.12xlarge", "m7i.xlarge"} <= names


def test_shipped_stacks_exist() -> None:
    assert {"training", "inference", "hybrid"} <= set(list_stacks())
