"""The NVIDIA container runtime on hybrid GPU pools: the `gpuRuntime` setting, the commands each server runs, the
shipped hybrid stack's RuntimeClass and releases, and the plan summary's count of on-prem GPUs."""

from __future__ import annotations

import pytest

from blueprint.plan.summary import pool_summary
from components.errors import ConfigError
from components.planning.cost import StackCost
from components.planning.gpu_runtime import (
    NVIDIA_CONTAINERD_DROP_IN,
    containerd_runtime_commands,
    device_symlink_commands,
)
from tests.builders import (
    HELM_RELEASE,
    HYBRID_POOL,
    SYSTEM_POOL,
    TRAINING_POOL,
    first_pool_plan,
    pool,
    shipped_stack,
    stack_config,
)

#: No priced part: `pool_summary` then shows only what the pool plan says (the GPU runtime here).
NO_COST = StackCost(region="us-east-1", items=(), unpriced=(), committed=(), pools={})


def test_default_runtime_is_the_default_and_the_setting_is_validated():
    assert first_pool_plan(HYBRID_POOL).pool.gpu_runtime == "default-runtime"
    with pytest.raises(ConfigError, match=r"nodePools\[1\] \(h100\)\.gpuRuntime"):
        stack_config(SYSTEM_POOL, pool(TRAINING_POOL, gpuRuntime="default-runtime"), validated=True)
    with pytest.raises(ConfigError, match="gpuRuntime"):
        stack_config(SYSTEM_POOL, pool(HYBRID_POOL, gpuRuntime="runc"), validated=True)


def test_servers_register_the_nvidia_handler_in_nodeadms_imported_directory():
    """`nvidia-ctk` adds the `nvidia` handler as a drop-in nodeadm's containerd config imports
    (`/etc/containerd/config.d/*.toml`); only `default-runtime` makes it the default."""
    assert NVIDIA_CONTAINERD_DROP_IN.startswith("/etc/containerd/config.d/")
    runtime_class = pool(HYBRID_POOL, gpuRuntime="runtime-class")
    by_class = containerd_runtime_commands(first_pool_plan(runtime_class))
    assert by_class == [
        "nvidia-ctk runtime configure --runtime=containerd --nvidia-runtime-name=nvidia "
        "--drop-in-config=/etc/containerd/config.d/99-nvidia.toml",
        "systemctl restart containerd",
    ]
    default = containerd_runtime_commands(first_pool_plan(HYBRID_POOL))
    assert default[0] == by_class[0] + " --set-as-default"
    # the runtime, then the /dev/char links that keep GPUs through a systemctl daemon-reload
    assert pool_summary(first_pool_plan(runtime_class), NO_COST)["gpuRuntime"] == {
        "mode": "runtime-class",
        "serverCommands": [*by_class, *device_symlink_commands()],
    }
    assert pool_summary(first_pool_plan(HYBRID_POOL), NO_COST)["gpuRuntime"] == {
        "mode": "default-runtime",
        "serverCommands": [*default, *device_symlink_commands()],
    }
    assert "gpuRuntime" not in pool_summary(first_pool_plan(TRAINING_POOL), NO_COST)


@pytest.mark.program
def test_shipped_hybrid_stack_makes_nvidia_the_a40s_default_runtime():
    """The shipped A40 servers make `nvidia` containerd's default, so the one device plugin release serves cloud and
    on-prem GPUs alike and no RuntimeClass is needed; the plan prints the commands the servers run."""
    stack = shipped_stack("hybrid")
    assert stack.run.of_type("kubernetes:node.k8s.io/v1:RuntimeClass") == []
    releases = {r.inputs["name"]: r.inputs for r in stack.run.of_type(HELM_RELEASE)}
    assert "nvidia-device-plugin-runtime-class" not in releases
    assert "runtimeClassName" not in releases["nvidia-device-plugin"]["values"]
    a40 = next(p for p in stack.plan["summary"]["nodePools"] if p["name"] == "a40")
    assert a40["gpuRuntime"]["mode"] == "default-runtime"
    assert a40["gpuRuntime"]["serverCommands"][0].endswith("--set-as-default")


@pytest.mark.program
def test_plan_summary_counts_on_prem_gpus_in_capacity_and_bills_only_their_hybrid_nodes_fee():
    summary = shipped_stack("hybrid").plan["summary"]
    a40 = next(p for p in summary["nodePools"] if p["name"] == "a40")
    assert (a40["kind"], a40["gpusPerNode"], a40["minNodes"], a40["maxNodes"]) == ("hybrid", 4, 4, 4)
    assert a40["hourlyUsd"] == {"idle": 0.0, "max": 0.0}
    cloud_min = sum(p["gpusPerNode"] * p["minNodes"] for p in summary["nodePools"] if p["kind"] == "aws")
    assert summary["gpus"]["min"] == cloud_min + 16
    # The servers are owned: AWS bills only the EKS Hybrid Nodes fee, 4 servers x 64 vCPUs x $0.020/vCPU-hour.
    fee = next(b for b in summary["cost"]["breakdown"] if b["kind"] == "hybrid-nodes-fee")
    assert (fee["name"], fee["maxUsd"]) == ("a40", pytest.approx(4 * 64 * 0.020))
    cloud_cost = sum(p["hourlyUsd"]["max"] for p in summary["nodePools"] if p["kind"] == "aws")
    others = sum(b["maxUsd"] for b in summary["cost"]["breakdown"] if b["kind"] != "nodes")
    assert summary["hourlyUsd"]["max"] == pytest.approx(cloud_cost + others, abs=0.01)
