"""The vLLM replica's pod: what it asks of the node and what it carries."""

from __future__ import annotations

from typing import Any

from components.config import ServingWorkload, StackConfig
from components.planning.pools import PoolPlan
from components.planning.serving import deployment_spec, host_requests
from components.planning.stack_plan import plan_pools
from tests.builders import HYBRID_POOL, SYSTEM_POOL, stack_config
from tests.test_serving import serving_stack


def _pod(spec: StackConfig) -> tuple[dict[str, Any], ServingWorkload, PoolPlan]:
    workload = spec.workloads.serving[0]
    plan = next(p for p in plan_pools(spec) if p.name == workload.pool)
    return deployment_spec(workload, plan, "weights")["template"]["spec"], workload, plan


def test_a_replica_requests_half_its_slice_of_the_node() -> None:
    """g6e.12xlarge (48 vCPU, 384 GiB, 4 L40S), one GPU per replica: a quarter of the node, half of it requested."""
    pod, _, _ = _pod(serving_stack())
    (server,) = pod["containers"]
    assert server["resources"]["requests"] == {"nvidia.com/gpu": "1", "cpu": "6", "memory": "48Gi"}
    assert server["resources"]["limits"] == {"nvidia.com/gpu": "1"}


def test_two_gpus_per_replica_request_twice_the_host() -> None:
    workload = {"name": "chat", "pool": "l40s", "model": "m", "gpusPerReplica": 2}
    _, workload_model, plan = _pod(serving_stack(workload=workload))
    assert host_requests(workload_model, plan) == {"cpu": "12", "memory": "96Gi"}


def test_a_hybrid_replica_requests_the_floor() -> None:
    spec = stack_config(SYSTEM_POOL, HYBRID_POOL)
    plan = next(p for p in plan_pools(spec) if p.name == "a40")
    workload = serving_stack().workloads.serving[0]
    assert host_requests(workload, plan) == {"cpu": "4", "memory": "32Gi"}


def test_the_server_carries_no_token_and_reports_no_usage() -> None:
    pod, _, _ = _pod(serving_stack())
    assert pod["automountServiceAccountToken"] is False
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["VLLM_NO_USAGE_STATS"] == "1" and env["DO_NOT_TRACK"] == "1" and env["HF_HUB_OFFLINE"] == "1"
