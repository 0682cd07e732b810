"""The system pool is for cluster add-ons: it carries `CriticalAddonsOnly=true:NoSchedule` unless the stack says
otherwise, and every add-on pod placed on it tolerates that taint, so user pods stay off and add-ons still land."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from blueprint.plan.runner import list_stacks
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR
from components.planning.pools import DEFAULT_SYSTEM_TAINT
from components.planning.tolerations import tolerates
from tests.builders import EKS_ADDON, HELM_RELEASE, SYSTEM_POOL, first_pool_plan, pool, shipped_plan

RELEASE = HELM_RELEASE
ADDON = EKS_ADDON


def test_system_pools_are_tainted_unless_they_say_otherwise() -> None:
    assert first_pool_plan(SYSTEM_POOL).taints == (DEFAULT_SYSTEM_TAINT,)
    assert DEFAULT_SYSTEM_TAINT.render() == "CriticalAddonsOnly=true:NoSchedule"
    assert first_pool_plan(pool(SYSTEM_POOL, taints=[])).taints == ()


SYSTEM_TERM = [{"key": key, "operator": "In", "values": [value]} for key, value in SYSTEM_NODE_SELECTOR.items()]


def selects_the_system_pool(values: dict[str, Any]) -> bool:
    """By node selector, or by a required node affinity term (CoreDNS beside hybrid pools: system or hybrid)."""
    selector = values.get("nodeSelector")
    if isinstance(selector, dict) and SYSTEM_NODE_SELECTOR.items() <= selector.items():
        return True
    affinity = values.get("affinity")
    required = (affinity or {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
    return any(term.get("matchExpressions") == SYSTEM_TERM for term in required.get("nodeSelectorTerms", []))


def pod_specs_on_the_system_pool(values: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every part of a chart's values or an add-on's configuration that selects the system pool's nodes."""
    if isinstance(values, dict):
        if selects_the_system_pool(values):
            yield where, values
        for key, value in values.items():
            yield from pod_specs_on_the_system_pool(value, f"{where}.{key}")
    elif isinstance(values, list):
        for i, value in enumerate(values):
            yield from pod_specs_on_the_system_pool(value, f"{where}[{i}]")


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_every_add_on_on_the_system_pool_tolerates_its_taint(stack: str) -> None:
    plan = shipped_plan(stack)
    system = next(p for p in plan["summary"]["nodePools"] if p["role"] == "system")
    assert DEFAULT_SYSTEM_TAINT.render() in system["taints"]
    found: list[tuple[str, dict[str, Any]]] = []
    for r in plan["resources"]:
        if r["type"] == RELEASE:
            found += pod_specs_on_the_system_pool(r["inputs"].get("values", {}), r["inputs"]["name"])
        elif r["type"] == ADDON and r["inputs"].get("configurationValues"):
            config = json.loads(r["inputs"]["configurationValues"])
            found += pod_specs_on_the_system_pool(config, r["inputs"]["addonName"])
    assert {where for where, _ in found} >= {"coredns", "aws-ebs-csi-driver.controller"}
    for where, spec in found:
        assert tolerates(spec.get("tolerations", []), DEFAULT_SYSTEM_TAINT), where
