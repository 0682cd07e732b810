"""Stack configs and a runner for the add-on tests: build an `Addons` component under mocks, without node pools.

Pools are plain config dicts (as a stack file writes them) so each test states the one thing it varies.
"""

from __future__ import annotations

import json
from typing import Any

from blueprint.plan.runner import ProgramRun, run_mocked
from components.addons import Addons
from components.config import StackConfig
from components.planning.pools import PoolPlan, plan_pools
from tests.fakes import fake_context

SYSTEM_POOL: dict[str, Any] = {
    "name": "system",
    "role": "system",
    "instanceType": "m7i.xlarge",
    "scaling": {"min": 2, "max": 3, "mode": "fixed"},
}
TRAINING_POOL: dict[str, Any] = {
    "name": "h100",
    "role": "training",
    "instanceType": "p5.48xlarge",
    "scaling": {"min": 0, "max": 4, "mode": "cluster-autoscaler"},
    "placement": {"availabilityZones": ["us-east-1a"]},
}
INFERENCE_POOL: dict[str, Any] = {
    "name": "l40s",
    "role": "inference",
    "instanceType": "g6e.12xlarge",
    "capacity": {"type": "spot", "spotInstanceTypes": ["g6e.24xlarge"]},
    "scaling": {"min": 1, "max": 8, "mode": "gpu-utilization"},
}
HYBRID_POOL: dict[str, Any] = {
    "name": "a40",
    "kind": "hybrid",
    "role": "inference",
    "gpuModel": "A40",
    "gpusPerNode": 4,
    "nodes": 2,
    "network": {"remoteNodeCidrs": ["192.168.100.0/24"], "remotePodCidrs": ["192.168.128.0/18"]},
}


def pool(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a pool dict with top-level keys replaced (camelCase, as in a stack file)."""
    return {**json.loads(json.dumps(base)), **changes}


def stack(
    *pools: dict[str, Any], addons: dict[str, Any] | None = None, name: str = "gpu", kubernetes: str = "1.35"
) -> StackConfig:
    return StackConfig.model_validate(
        {
            "region": "us-east-1",
            "cluster": {"name": name, "kubernetesVersion": kubernetes},
            "network": {"availabilityZones": ["us-east-1a", "us-east-1b"]},
            "nodePools": list(pools),
            "addons": addons or {},
        }
    )


def asg_name(spec: StackConfig, pool_name: str) -> str:
    return f"{spec.cluster.name}-{pool_name}-asg"


def run_addons(spec: StackConfig, plans: list[PoolPlan] | None = None) -> ProgramRun:
    """Register `Addons` for `spec` (ASG names faked for every `aws` pool) and return every registration."""
    pool_plans = plans if plans is not None else plan_pools(spec)

    def program() -> None:
        ctx = fake_context(spec)
        asgs = {p.name: asg_name(spec, p.name) for p in pool_plans if p.kind == "aws"}
        Addons(f"{spec.cluster.name}-addons", ctx, spec, pool_plans, asgs)

    return run_mocked(program)


def policy_document(run: ProgramRun, role_name: str) -> dict[str, Any]:
    """The inline policy of a Pod Identity role registered by `tests.fakes.fake_pod_identity_role`."""
    role = run.one("aws:iam/role:Role", role_name)
    (inline,) = role.inputs["inlinePolicies"]
    document: dict[str, Any] = json.loads(inline["policy"])
    return document


def releases(run: ProgramRun) -> dict[str, dict[str, Any]]:
    """Helm releases by their release name (not the Pulumi resource name)."""
    return {r.inputs["name"]: r.inputs for r in run.of_type("kubernetes:helm.sh/v3:Release")}
