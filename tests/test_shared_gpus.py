"""Serving layouts on shared GPUs that the scheduler would place but vLLM could not start: a second replica on a
time-sliced GPU without a memory share that fits, and tensor parallelism across MIG devices."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.errors import ConfigError
from components.planning.serving import server_args
from tests.builders import INFERENCE_POOL, SYSTEM_POOL, CliResult, pool, stack_config

SHARED = pool(INFERENCE_POOL, devicePlugin={"timeSlicingReplicas": 2})
#: A MIG inference pool: p5.48xlarge (8x H100 80GB), each GPU split into seven 1g.10gb devices.
MIG_POOL: dict[str, Any] = {
    "name": "h100",
    "role": "inference",
    "instanceType": "p5.48xlarge",
    "scaling": {"min": 1, "max": 2, "mode": "gpu-utilization"},
    "devicePlugin": {"migDevices": {"1g.10gb": 7}},
}


def problems(*pools: dict[str, Any], workloads: list[dict[str, Any]]) -> dict[str, str]:
    """{path: message} of what validation refuses of a serving stack (empty when it is valid)."""
    try:
        stack_config(
            SYSTEM_POOL,
            *pools,
            validated=True,
            storage={"nfs": {"kind": "efs", "kubernetes": {"namespace": "inference", "claimName": "weights"}}},
            addons={
                "monitoring": {"containerInsights": False, "dcgmPrometheus": True},
                **({"nvidiaDevicePlugin": {"migStrategy": "single"}} if MIG_POOL in pools else {}),
            },
            workloads={"serving": workloads},
        )
    except ConfigError as error:
        return {p.path: p.message for p in error.problems}
    return {}


def chat(**changes: Any) -> dict[str, Any]:
    return {"name": "chat", "pool": "l40s", "model": "m", **changes}


# ----------------------------------------------------------------------------------------- time-sliced GPUs
def test_a_second_replica_on_a_time_sliced_gpu_needs_a_memory_share_that_fits() -> None:
    found = problems(SHARED, workloads=[chat()])
    message = found["workloads.serving[0].gpuMemoryUtilization"]
    assert "2 replicas can share one GPU of l40s" in message
    assert "vLLM's default 0.9" in message and "at most 0.45" in message
    assert list(found) == ["workloads.serving[0].gpuMemoryUtilization"]


def test_a_share_that_fits_passes_and_one_that_does_not_is_named() -> None:
    assert problems(SHARED, workloads=[chat(gpuMemoryUtilization=0.45)]) == {}
    found = problems(SHARED, workloads=[chat(gpuMemoryUtilization=0.5)])
    assert "each takes 0.5 of its memory" in found["workloads.serving[0].gpuMemoryUtilization"]


def test_sharing_counts_every_workload_on_the_pool_up_to_the_replicas_per_gpu() -> None:
    four = pool(INFERENCE_POOL, devicePlugin={"timeSlicingReplicas": 4})
    # One replica at most: nothing shares its GPU.
    assert problems(four, workloads=[chat(replicas={"min": 1, "max": 1})]) == {}
    # Two single-replica workloads can land on one GPU: each must leave room for the other.
    two = [chat(replicas={"min": 1, "max": 1}), chat(name="code", replicas={"min": 1, "max": 1})]
    found = problems(four, workloads=two)
    assert set(found) == {"workloads.serving[0].gpuMemoryUtilization", "workloads.serving[1].gpuMemoryUtilization"}
    # No bound on replicas: as many as the GPU's four slots.
    assert "at most 0.22" in problems(four, workloads=[chat()])["workloads.serving[0].gpuMemoryUtilization"]


def test_whole_gpus_keep_vllms_default() -> None:
    assert problems(INFERENCE_POOL, workloads=[chat()]) == {}


def test_the_share_is_a_field_the_plan_passes_not_an_extra_argument() -> None:
    found = problems(INFERENCE_POOL, workloads=[chat(extraArgs=["--gpu-memory-utilization", "0.4"])])
    assert "set gpuMemoryUtilization" in found["workloads.serving[0].extraArgs"]
    spec = stack_config(SYSTEM_POOL, SHARED, workloads={"serving": [chat(gpuMemoryUtilization=0.45)]})
    args = server_args(spec.workloads.serving[0])
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.45"
    unset = stack_config(SYSTEM_POOL, INFERENCE_POOL, workloads={"serving": [chat()]})
    assert "--gpu-memory-utilization" not in server_args(unset.workloads.serving[0])


# ------------------------------------------------------------------------------------------------- MIG pools
def test_tensor_parallelism_cannot_span_mig_devices() -> None:
    found = problems(MIG_POOL, workloads=[chat(pool="h100", gpusPerReplica=7)])
    assert "a process sees only one of them" in found["workloads.serving[0].gpusPerReplica"]
    assert "set gpusPerReplica: 1" in found["workloads.serving[0].gpusPerReplica"]
    assert problems(MIG_POOL, workloads=[chat(pool="h100")]) == {}


# --------------------------------------------------------------------------------------------------- the CLI
@pytest.mark.program
def test_plan_exits_2_with_the_key_path(blueprint_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    raw = yaml.safe_load(Path("stacks/Pulumi.inference.yaml").read_text())
    pools = raw["config"]["gpu-clusters:nodePools"]
    l40s = next(p for p in pools if p["name"] == "l40s")
    l40s["devicePlugin"] = {"timeSlicingReplicas": 2}
    stack = tmp_path / "Pulumi.shared.yaml"
    stack.write_text(yaml.safe_dump(raw))
    result = blueprint_cli("plan", "--stack", "inference", "--config", str(stack))
    assert result.returncode == 2, result.stderr
    assert "workloads.serving[0].gpuMemoryUtilization" in result.stderr
    assert "Traceback" not in result.stderr


def test_mixed_shares_that_sum_to_the_budget_fit_and_ones_over_it_are_named() -> None:
    four = pool(INFERENCE_POOL, devicePlugin={"timeSlicingReplicas": 4})
    big = chat(replicas={"min": 1, "max": 1}, gpuMemoryUtilization=0.6)
    assert (
        problems(four, workloads=[big, chat(name="code", replicas={"min": 1, "max": 1}, gpuMemoryUtilization=0.3)])
        == {}
    )
    over = [big, chat(name="code", replicas={"min": 1, "max": 1}, gpuMemoryUtilization=0.4)]
    found = problems(four, workloads=over)
    assert set(found) == {"workloads.serving[0].gpuMemoryUtilization", "workloads.serving[1].gpuMemoryUtilization"}
    assert "1 together on one GPU" in found["workloads.serving[0].gpuMemoryUtilization"]


def test_a_replica_on_time_sliced_gpus_asks_for_one() -> None:
    found = problems(SHARED, workloads=[chat(gpusPerReplica=2, gpuMemoryUtilization=0.45)])
    assert list(found) == ["workloads.serving[0].gpusPerReplica"]
    assert "may be slices of one GPU" in found["workloads.serving[0].gpusPerReplica"]
    assert problems(INFERENCE_POOL, workloads=[chat(gpusPerReplica=2)]) == {}
