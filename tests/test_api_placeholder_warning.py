"""The shipped cloud stacks admit a documentation range (RFC 5737) to the API as a placeholder: the plan summary says
to replace it, because a deployer outside that range could not reach the API on `pulumi up`."""

from __future__ import annotations

from typing import Any

import pytest

from blueprint.plan.summary import summarize
from components.planning.stack_plan import plan_stack
from tests.builders import SYSTEM_POOL, shipped_plan, stack_config


def api_warnings(endpoint: dict[str, Any]) -> list[str]:
    spec = stack_config(SYSTEM_POOL, cluster={"endpoint": endpoint})
    return [w for w in summarize(plan_stack(spec))["warnings"] if w.startswith("cluster.endpoint")]


@pytest.mark.parametrize("placeholder", ["203.0.113.0/24", "198.51.100.7/32", "192.0.2.0/28"])
def test_a_documentation_range_on_the_api_is_a_warning(placeholder: str) -> None:
    public = api_warnings({"public": True, "publicAccessCidrs": [placeholder]})
    private = api_warnings({"privateAccessCidrs": [placeholder]})
    for found in (public, private):
        assert len(found) == 1
        assert placeholder in found[0] and "RFC 5737" in found[0]


def test_a_real_network_is_not_a_warning() -> None:
    assert api_warnings({"public": True, "publicAccessCidrs": ["198.18.0.0/15", "52.94.0.0/22"]}) == []
    assert api_warnings({"privateAccessCidrs": ["192.168.10.0/24"]}) == []


@pytest.mark.program
@pytest.mark.parametrize("stack", ["training", "inference"])
def test_shipped_cloud_stacks_say_to_replace_their_placeholder(stack: str) -> None:
    warnings = shipped_plan(stack)["summary"]["warnings"]
    assert any("203.0.113.0/24" in w and "Reaching the API" in w for w in warnings)
