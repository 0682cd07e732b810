"""Every shipped stack plans offline and its JSON matches the contract in docs/architecture.md."""

from __future__ import annotations

from typing import Any

import pytest

POOL_KEYS = {
    "name",
    "kind",
    "role",
    "instanceType",
    "gpuModel",
    "gpusPerNode",
    "minNodes",
    "maxNodes",
    "capacityType",
    "efaDevicesPerNode",
    "maxEfaDevicesPerNode",
    "fabricGbpsPerNode",
    "hourlyUsdPerNode",
}
OPTION_KEYS = {"protect", "retainOnDelete", "dependsOn", "ignoreChanges", "aliases", "additionalSecretOutputs"}


@pytest.fixture
def plan(each_shipped_plan: dict[str, Any]) -> dict[str, Any]:
    return each_shipped_plan


def test_top_level_shape(plan: dict[str, Any]) -> None:
    assert plan["project"] == "gpu-clusters"
    assert set(plan) >= {"project", "stack", "resources", "summary", "violations"}
    assert set(plan["summary"]) >= {"nodePools", "storage", "gpus", "hourlyUsd"}
    assert set(plan["summary"]["gpus"]) == {"min", "max"}
    assert set(plan["summary"]["hourlyUsd"]) >= {"idle", "max"}


def test_resources_shape(plan: dict[str, Any]) -> None:
    urns = {r["urn"] for r in plan["resources"]}
    assert plan["resources"], "a stack registers resources"
    for r in plan["resources"]:
        assert set(r) >= {"urn", "type", "name", "parent", "custom", "inputs", "options"}
        assert set(r["options"]) == OPTION_KEYS
        assert isinstance(r["custom"], bool)
        assert (
            r["parent"] is None
            or r["parent"] in urns
            or r["parent"].endswith("pulumi:pulumi:Stack::" + r["parent"].split("::")[-1])
        )


def test_pool_summaries(plan: dict[str, Any]) -> None:
    for pool in plan["summary"]["nodePools"]:
        assert set(pool) >= POOL_KEYS
        assert pool["kind"] in ("aws", "hybrid")
        assert pool["capacityType"] in ("on-demand", "spot", "capacity-block", "reservation")
        assert 0 <= pool["minNodes"] <= pool["maxNodes"]
        assert pool["efaDevicesPerNode"] <= pool["maxEfaDevicesPerNode"]


def test_storage_and_violations_shape(plan: dict[str, Any]) -> None:
    for fs in plan["summary"]["storage"]:
        assert set(fs) >= {"name", "kind", "capacityGiB", "throughputMBps"}
        assert fs["kind"] in ("lustre", "efs", "nfs")
    for v in plan["violations"]:
        assert set(v) >= {"policy", "level", "urn", "message"}
        assert v["level"] in ("mandatory", "advisory")
