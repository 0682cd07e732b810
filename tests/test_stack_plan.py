"""The stack's plan, built once (`components.planning.stack_plan.plan_stack`): its steps, the add-on registry that
builds from it, the default system pool and the Lustre clients it decides."""

from __future__ import annotations

from typing import Any

import pytest

from blueprint.verify.expectations import load_spec
from components.addons import ADDONS
from components.planning.stack_plan import plan_stack
from tests.builders import INFERENCE_POOL, P5, SYSTEM_POOL, pool, shipped_stack, stack_config

SERVING: dict[str, Any] = {
    "storage": {"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
    "addons": {"monitoring": {"containerInsights": False, "dcgmPrometheus": True}},
    "workloads": {"serving": [{"name": "chat", "pool": "l40s", "model": "m"}]},
}


def test_later_steps_see_what_earlier_ones_decided() -> None:
    spec = stack_config(SYSTEM_POOL, P5, validated=True, storage={"lustre": {"storageCapacityGib": 4800}})
    plan = plan_stack(spec)
    assert {p.name: p.lustre_client for p in plan.pools} == {"system": None, "h100": "tcp"}
    assert plan.storage[0]["mountedBy"] == ["h100"]


def test_serving_workloads_set_their_pool_threshold_keda_and_their_rule() -> None:
    spec = stack_config(SYSTEM_POOL, INFERENCE_POOL, validated=True, **SERVING)
    plan = plan_stack(spec)
    # g6e.12xlarge holds 4 one-GPU replicas: a node is removed below 3/4 of its GPUs requested, plus 0.01.
    assert plan.pool("l40s").scale_down_gpu_utilization == 0.76
    assert plan.addons.on("keda") and "keda" in plan.addons.enabled
    assert plan.serving["chat"].replicas_per_node == 4


def test_a_stack_without_workloads_gets_no_keda() -> None:
    assert not plan_stack(stack_config(SYSTEM_POOL, P5, validated=True)).addons.on("keda")


def test_the_default_system_pool_comes_from_the_plan_not_the_config() -> None:
    spec = stack_config(P5, validated=True)
    assert [p.name for p in spec.node_pools] == ["h100"]
    plan = plan_stack(spec)
    assert [(p.name, p.role, p.instance_types, p.min_nodes) for p in plan.pools][-1] == (
        "system",
        "system",
        ("m7i.xlarge",),
        2,
    )
    named = plan_stack(stack_config(pool(SYSTEM_POOL, name="ops"), P5, validated=True))
    assert [p.name for p in named.pools] == ["ops", "h100"]


def test_a_listed_inference_pool_mounts_lustre() -> None:
    spec = stack_config(
        SYSTEM_POOL, P5, INFERENCE_POOL, storage={"lustre": {"storageCapacityGib": 4800, "pools": ["l40s"]}}
    )
    plan = plan_stack(spec)
    assert {p.name: p.lustre_client for p in plan.pools} == {"system": None, "h100": None, "l40s": "tcp"}


@pytest.mark.program
def test_each_registered_addon_is_built_exactly_when_the_plan_enables_it() -> None:
    for stack in ("training", "inference"):
        spec = load_spec(stack, None)
        selection = plan_stack(spec).addons
        names = {r.name for r in shipped_stack(stack).run.registrations}
        for addon in ADDONS:
            built = f"{spec.cluster.name}-addons-{addon.name}" in names
            assert built == addon.wanted(selection), (stack, addon.name)


def test_addon_names_are_unique() -> None:
    names = [addon.name for addon in ADDONS]
    assert len(names) == len(set(names))
