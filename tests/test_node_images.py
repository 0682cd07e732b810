"""Node images are pinned per stack and roll out on purpose: the launch template reads one release's SSM parameter,
a new release in config rolls the system pool launch-before-terminate, and training pools are never refreshed."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from pulumi.runtime.mocks import MockCallArgs

from blueprint.plan.mocks import PlanMocks
from blueprint.plan.runner import ProgramRun, load_stack
from components.config import StackConfig
from components.errors import ConfigError
from components.node_pool import NodePool
from components.planning import nodeadm
from components.planning.stack_plan import plan_pools
from tests.builders import (
    AUTOSCALING_GROUP,
    INFERENCE_POOL,
    LAUNCH_TEMPLATE,
    SYSTEM_POOL,
    TRAINING_POOL,
    once_per_config,
    run_with_context,
    stack_config,
)

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LT = LAUNCH_TEMPLATE
ASG = AUTOSCALING_GROUP
GET_PARAMETER = "aws:ssm/getParameter:getParameter"


@once_per_config
def build(spec: StackConfig) -> ProgramRun:
    return run_with_context(
        spec, lambda ctx: [NodePool(f"{spec.cluster.name}-{p.name}", p, ctx) for p in plan_pools(spec)]
    )


def stack(release: str | None = None, **cluster: Any) -> StackConfig:
    settings = {**cluster, **({"amiRelease": release} if release else {})}
    return stack_config(SYSTEM_POOL, TRAINING_POOL, INFERENCE_POOL, cluster=settings)


def mocked_ami(parameter: str) -> str:
    """The AMI id the offline mocks give a parameter (a hash of its name)."""
    return "ami-" + hashlib.sha1(parameter.encode()).hexdigest()[:17]


@pytest.mark.program
def test_the_launch_template_reads_the_pinned_release_parameter():
    lt = build(stack("v20260601")).one(LT, "demo-h100")
    parameter = nodeadm.ami_ssm_parameter("1.35", "al2023", "x86_64", True, "v20260601")
    assert parameter.endswith("/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.35-v20260601/image_id")
    assert lt.inputs["imageId"] == mocked_ami(parameter)


@pytest.mark.program
def test_without_a_release_the_stack_boots_the_catalog_pin_not_recommended():
    lt = build(stack()).one(LT, "demo-system")
    assert lt.inputs["imageId"] == mocked_ami(nodeadm.ami_ssm_parameter("1.35", "al2023", "x86_64", False, "v20260714"))


@pytest.mark.program
def test_a_new_release_changes_only_the_image_of_each_launch_template():
    before, after = build(stack("v20260601")), build(stack("v20260714"))
    for name in ("demo-system", "demo-h100", "demo-l40s"):
        old, new = before.one(LT, name).inputs, after.one(LT, name).inputs
        assert old["imageId"] != new["imageId"]
        assert {k: v for k, v in old.items() if k != "imageId"} == {k: v for k, v in new.items() if k != "imageId"}


@pytest.mark.program
def test_system_and_inference_pools_roll_launch_before_terminate_and_training_is_never_refreshed():
    run = build(stack())
    system = run.one(ASG, "demo-system").inputs["instanceRefresh"]
    assert system["strategy"] == "Rolling"
    assert system["preferences"]["minHealthyPercentage"] == 100
    assert system["preferences"]["maxHealthyPercentage"] == 200
    assert system["preferences"]["skipMatching"] is True
    assert "instanceRefresh" not in run.one(ASG, "demo-h100").inputs
    # The inference pool is a managed node group: the same rollout as EKS's update config, one node at a time,
    # launching its replacement first.
    inference = run.one(NODE_GROUP, "demo-l40s").inputs["updateConfig"]
    assert inference == {"updateStrategy": "DEFAULT", "maxUnavailable": 1}


@pytest.mark.program
def test_a_training_pool_refreshes_only_when_asked():
    refresh = {"enabled": True, "minHealthyPercentage": 0}
    asked = {**TRAINING_POOL, "management": "self-managed", "instanceRefresh": refresh}
    run = build(stack_config(SYSTEM_POOL, asked))
    assert run.one(ASG, "demo-h100").inputs["instanceRefresh"]["preferences"]["minHealthyPercentage"] == 0


@pytest.mark.program
def test_a_managed_training_pool_that_asks_for_refresh_takes_its_nodes_out_as_configured():
    asked = {**TRAINING_POOL, "instanceRefresh": {"enabled": True, "minHealthyPercentage": 0}}
    run = build(stack_config(SYSTEM_POOL, asked))
    assert run.one(NODE_GROUP, "demo-h100").inputs["updateConfig"] == {
        "updateStrategy": "MINIMAL",
        "maxUnavailablePercentage": 100,
    }


def test_the_offline_mocks_refuse_a_moving_image_parameter():
    mocks = PlanMocks("us-east-1")
    moving = "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
    with pytest.raises(ValueError, match="pinned EKS-optimized AMI release"):
        mocks.call(MockCallArgs(GET_PARAMETER, {"name": moving}, ""))
    for latest in ("/aws/service/bottlerocket/aws-k8s-1.35/x86_64/latest/image_id",):
        with pytest.raises(ValueError):
            mocks.call(MockCallArgs(GET_PARAMETER, {"name": latest}, ""))
    pinned = nodeadm.ami_ssm_parameter("1.35", "bottlerocket", "arm64", True, "1.42.0")
    assert mocks.call(MockCallArgs(GET_PARAMETER, {"name": pinned}, ""))["value"] == mocked_ami(pinned)


@pytest.mark.parametrize(
    ("cluster", "pools", "path", "fragment"),
    [
        ({}, ({**SYSTEM_POOL, "amiFamily": "bottlerocket"},), "cluster.bottlerocketRelease", "pin its release"),
        ({"bottlerocketRelease": "1.42.0"}, (SYSTEM_POOL,), "cluster.bottlerocketRelease", "remove it"),
        ({"amiRelease": "20260714"}, (SYSTEM_POOL,), "cluster.amiRelease", "must match"),
        (
            {},
            ({**SYSTEM_POOL, "instanceRefresh": {"minHealthyPercentage": 50, "maxHealthyPercentage": 200}},),
            "nodePools[0] (system).instanceRefresh.maxHealthyPercentage",
            "more than 100 above",
        ),
    ],
)
def test_image_and_refresh_settings_are_checked(cluster, pools, path, fragment):
    with pytest.raises(ConfigError) as caught:
        stack_config(*pools, cluster=cluster, validated=True)
    found = {p.path: p.message for p in caught.value.problems}
    assert fragment in found[path], found


@pytest.mark.parametrize("name", ["training", "inference", "hybrid"])
def test_shipped_stacks_pin_a_release(name):
    cluster = load_stack(name).config["gpu-clusters:cluster"]
    assert cluster["amiRelease"].startswith("v")
