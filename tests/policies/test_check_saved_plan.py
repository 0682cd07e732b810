"""`blueprint check --plan FILE`: the pack over a saved `blueprint plan --format json`, so a pipeline checks the
artifact it deploys; a file that is no plan exits 2 with every problem, an unreadable one 74."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.builders import CliResult

Cli = Callable[..., CliResult]
BROKEN = Path(__file__).with_name("fixtures") / "broken_plan.json"


def save(tmp_path: Path, plan: Any) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return path


@pytest.mark.program
def test_a_saved_shipped_plan_checks_as_the_stack_does(blueprint_cli: Cli, tmp_path: Path) -> None:
    saved = blueprint_cli("plan", "--stack", "smoke", "--format", "json")
    assert saved.returncode == 0
    from_file = blueprint_cli("check", "--plan", str(save(tmp_path, json.loads(saved.stdout))), "--format", "json")
    from_stack = blueprint_cli("check", "--stack", "smoke", "--format", "json")
    assert (
        (from_file.returncode, from_file.stdout) == (from_stack.returncode, from_stack.stdout) == (0, from_stack.stdout)
    )


def test_a_saved_plan_with_a_mandatory_violation_fails(blueprint_cli: Cli, tmp_path: Path) -> None:
    plan = {"project": "gpu-clusters", "stack": "broken", "resources": json.loads(BROKEN.read_text())}
    result = blueprint_cli("check", "--plan", str(save(tmp_path, plan)), "--format", "json")
    assert result.returncode == 1
    found = {(v["policy"], v["resource"]) for v in json.loads(result.stdout)}
    assert ("k8s-pod-host-access", "broken-chat") in found
    assert ("no-public-ingress-combined", "broken-efa") in found


@pytest.mark.program
def test_a_plan_edited_after_planning_is_judged_as_saved(blueprint_cli: Cli, tmp_path: Path) -> None:
    plan = json.loads(blueprint_cli("plan", "--stack", "smoke", "--format", "json").stdout)
    namespace = next(
        r
        for r in plan["resources"]
        if r["type"] == "kubernetes:core/v1:Namespace" and r["inputs"]["metadata"]["name"] == "smoke"
    )
    namespace["inputs"]["metadata"]["labels"].pop("pod-security.kubernetes.io/enforce")
    result = blueprint_cli("check", "--plan", str(save(tmp_path, plan)), "--format", "json")
    assert result.returncode == 1
    assert [v["policy"] for v in json.loads(result.stdout) if v["level"] == "mandatory"] == [
        "k8s-namespace-pod-security"
    ]


def test_a_file_that_is_no_plan_exits_2_with_every_problem(blueprint_cli: Cli, tmp_path: Path) -> None:
    bad = save(
        tmp_path, {"resources": [{"urn": "u", "type": "t"}, "x", {"urn": "v", "type": "t", "name": "n", "inputs": 3}]}
    )
    result = blueprint_cli("check", "--plan", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"blueprint: {bad}: resources[0].name: expected a non-empty string; resources[1]: expected an object; "
        "resources[2].inputs: expected an object"
    )
    not_json = tmp_path / "plan.txt"
    not_json.write_text("plan: yes")
    assert blueprint_cli("check", "--plan", str(not_json)).returncode == 2
    assert blueprint_cli("check", "--plan", str(save(tmp_path, []))).returncode == 2


def test_an_unreadable_plan_exits_74_and_plan_with_stack_is_a_usage_error(blueprint_cli: Cli, tmp_path: Path) -> None:
    missing = blueprint_cli("check", "--plan", str(tmp_path / "absent.json"))
    assert missing.returncode == 74 and "absent.json" in missing.stderr
    both = blueprint_cli("check", "--plan", str(tmp_path / "absent.json"), "--stack", "smoke")
    assert both.returncode == 64
    assert "not both" in both.stderr
