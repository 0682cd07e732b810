"""One config, one plan: every shipped stack plans to the same bytes twice (docs/architecture.md, plan contract)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blueprint.plan.plan import make_plan
from blueprint.plan.runner import PLAN_TIME
from tests.builders import KMS_KEY


def _text(plan: dict[str, Any]) -> str:
    """The plan as `blueprint plan --format json` prints it."""
    return json.dumps(plan, indent=2, sort_keys=False, default=str)


@pytest.fixture(scope="module")
def plans(each_shipped_plan: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The session's shared plan of a stack (made earlier, other tests have read it since) and a fresh one."""
    return each_shipped_plan, make_plan(each_shipped_plan["stack"])


def test_two_plans_of_a_stack_are_byte_identical(plans):
    first, second = plans
    assert _text(first) == _text(second)


def test_resources_come_parents_first_then_by_urn(plans):
    resources = plans[0]["resources"]
    position = {r["urn"]: i for i, r in enumerate(resources)}
    for i, r in enumerate(resources):
        assert position.get(r["parent"], -1) < i, f"{r['urn']} comes before its parent"
    siblings: dict[str | None, list[str]] = {}
    for r in resources:
        siblings.setdefault(r["parent"], []).append(r["urn"])
    assert all(urns == sorted(urns) for urns in siblings.values())


def test_unordered_lists_are_sorted(plans):
    for r in plans[0]["resources"]:
        assert r["options"]["dependsOn"] == sorted(r["options"]["dependsOn"])
        assert r["options"]["ignoreChanges"] == sorted(r["options"]["ignoreChanges"])
        assert list(r["propertyDependencies"]) == sorted(r["propertyDependencies"])
        assert all(urns == sorted(urns) for urns in r["propertyDependencies"].values())


def test_clock_derived_values_come_from_the_pinned_time(plans):
    for r in plans[0]["resources"]:
        if r["type"] == "aws:ssm/activation:Activation":
            assert r["inputs"]["expirationDate"].startswith(PLAN_TIME.strftime("%Y-"))


def test_kms_alias_names_the_mocked_key(plans):
    resources = plans[0]["resources"]
    keys = {r["id"] for r in resources if r["type"] == KMS_KEY}
    aliases = [r for r in resources if r["type"] == "aws:kms/alias:Alias"]
    assert aliases and all(a["inputs"]["targetKeyId"] in keys for a in aliases)
