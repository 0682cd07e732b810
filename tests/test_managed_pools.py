"""Managed pools: which pools become EKS managed node groups and why, what their node groups and launch templates
register under Pulumi mocks, and how the rest of the stack (access entries, terminate hooks, scale-from-zero tags,
the policy pack, the plan summary) sees them."""

from __future__ import annotations

import base64
import email
from typing import Any

import pulumi
import pytest
import yaml

from blueprint.plan.runner import ProgramRun, run_mocked
from components.config import NodePool as PoolConfig
from components.config import StackConfig
from components.context import ClusterContext
from components.identity import NodeIdentity
from components.node_pool import NodePool, group_tag_suffix
from components.planning.management import choose_management, managed_blockers
from components.planning.node_groups import node_group_settings, update_settings
from components.planning.node_health import STARTUP_TAINT_KEY
from components.planning.node_health_repair import repair_policy
from components.planning.pools import refreshes
from components.planning.stack_plan import plan_pools
from tests.builders import (
    ACCESS_ENTRY,
    AUTOSCALING_GROUP,
    IAM_ROLE,
    LAUNCH_TEMPLATE,
    P5,
    PLACEMENT_GROUP,
    SYSTEM,
    THREE_ZONES,
    once_per_config,
    run_with_context,
    shipped_plan,
    shipped_stack,
    stack_config,
)
from tests.fakes import NODE_SECURITY_GROUP_ID, subnet_id

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
GROUP_TAG = "aws:autoscaling/tag:Tag"
SCHEDULE = "aws:autoscaling/schedule:Schedule"
HOOK = "aws:autoscaling/lifecycleHook:LifecycleHook"
NT = "k8s.io/cluster-autoscaler/node-template"
#: The name the offline mocks give a node group's Auto Scaling group starts with this (EKS: `eks-<node group>-<uuid>`).
GENERATED_PREFIX = "eks-"

#: A p5 training pool that accepts rolling updates: every feature of the training pool, managed.
MANAGED_P5 = {**P5, "instanceRefresh": {"enabled": True}}
SPOT_L40S = {
    "name": "l40s",
    "role": "inference",
    "instanceType": "g6e.12xlarge",
    "capacity": {"type": "spot", "spotInstanceTypes": ["g6e.24xlarge"]},
    "scaling": {"min": 0, "max": 4},
}
BLOCK = {
    **MANAGED_P5,
    "capacity": {
        "type": "capacity-block",
        "reservationId": "cr-0123456789abcdef0",
        "availabilityZone": "us-east-1a",
        "endTime": "2027-01-15T11:30:00Z",
    },
}


def pool(**raw: Any) -> PoolConfig:
    return PoolConfig.model_validate({"name": "pool", "role": "inference", "instanceType": "g6e.xlarge", **raw})


def spec_of(*pools: dict[str, Any]) -> StackConfig:
    return stack_config(*pools, name="t", cluster={"tags": {"team": "ml"}}, zones=THREE_ZONES)


@once_per_config
def build_pools(spec: StackConfig) -> tuple[ProgramRun, dict[str, NodePool]]:
    built: dict[str, NodePool] = {}

    def add(ctx: ClusterContext) -> None:
        for plan in plan_pools(spec):
            built[plan.name] = NodePool(f"t-{plan.name}", plan, ctx)

    return run_with_context(spec, add), built


def build(*pools: dict[str, Any]) -> tuple[ProgramRun, dict[str, NodePool]]:
    return build_pools(spec_of(*pools))


def node_config(lt: Any) -> dict[str, Any]:
    message = email.message_from_string(base64.b64decode(lt.inputs["userData"]).decode())
    (part,) = [p for p in message.walk() if p.get_content_type() == "application/node.eks.aws"]
    loaded: dict[str, Any] = yaml.safe_load(str(part.get_payload()))
    return loaded


def group_tags(run: ProgramRun, pool_name: str) -> dict[str, tuple[str, bool, str]]:
    out = {}
    for t in run.of_type(GROUP_TAG):
        if t.name.startswith(f"t-{pool_name}-"):
            tag = t.inputs["tag"]
            out[tag["key"]] = (tag["value"], tag["propagateAtLaunch"], t.inputs["autoscalingGroupName"])
    return out


# ----------------------------------------------------------------------------------------------- the decision
@pytest.mark.program
@pytest.mark.parametrize(
    ("stack", "expected"),
    [
        ("training", {"system": "self-managed", "h100": "self-managed"}),
        ("inference", {"system": "self-managed", "l40s": "self-managed"}),
        ("smoke", {"system": "self-managed", "l40s": "managed"}),
        ("hybrid", {"system": "self-managed", "h100": "self-managed", "a40": "self-managed", "burst": "managed"}),
    ],
)
def test_shipped_stacks_manage_exactly_the_pools_whose_every_feature_works_there(
    stack: str, expected: dict[str, str]
) -> None:
    summary = {p["name"]: p for p in shipped_stack(stack).plan["summary"]["nodePools"]}
    assert {name: summary[name].get("management", "self-managed") for name in expected} == expected
    for name, management in expected.items():
        if management == "self-managed" and summary[name]["kind"] == "aws":
            assert summary[name]["selfManagedBecause"], f"{stack}/{name} says why it stays self-managed"
        if management == "managed":
            assert summary[name]["nodeRepair"]["enabled"] is True
            assert summary[name]["nodeRepair"]["maxParallelCount"] == 1


@pytest.mark.program
def test_why_the_shipped_pools_stay_self_managed() -> None:
    training = {p["name"]: p for p in shipped_stack("training").plan["summary"]["nodePools"]}
    assert [reason.split(":")[0] for reason in training["h100"]["selfManagedBecause"]] == ["instanceRefresh.enabled"]
    assert [reason.split(":")[0] for reason in training["system"]["selfManagedBecause"]] == ["scaling.mode"]
    inference = {p["name"]: p for p in shipped_stack("inference").plan["summary"]["nodePools"]}
    assert [reason.split(":")[0] for reason in inference["l40s"]["selfManagedBecause"]] == [
        "capacity.onDemandBaseCapacity"
    ]


@pytest.mark.parametrize(
    ("raw", "paths"),
    [
        ({}, []),
        ({"capacity": {"type": "spot", "onDemandPercentageAboveBase": 10}}, ["capacity.onDemandBaseCapacity"]),
        ({"capacity": {"type": "spot", "spotAllocationStrategy": "lowest-price"}}, ["capacity.spotAllocationStrategy"]),
        ({"scaling": {"min": 2, "max": 3, "mode": "fixed"}}, ["scaling.mode"]),
        ({"scaling": {"min": 2, "max": 2, "mode": "fixed"}}, []),
        ({"scaling": {"min": 0, "max": 0}}, ["scaling.max"]),
        ({"role": "training"}, ["instanceRefresh.enabled"]),
        ({"role": "training", "instanceRefresh": {"enabled": True}}, []),
        ({"instanceRefresh": {"enabled": False}}, ["instanceRefresh.enabled"]),
        ({"capacity": {"type": "reservation", "reservationId": "cr-0123456789abcdef0"}}, []),
    ],
)
def test_each_feature_a_managed_node_group_cannot_carry_is_named(raw: dict[str, Any], paths: list[str]) -> None:
    config = pool(**raw)
    assert [b.path for b in managed_blockers(config, refreshes(config))] == paths
    assert choose_management(config, refreshes(config)) == ("self-managed" if paths else "managed")


def test_the_configured_management_wins_and_hybrid_pools_have_no_group() -> None:
    assert choose_management(pool(management="self-managed"), True) == "self-managed"
    assert choose_management(pool(management="managed", role="training"), False) == "managed"
    hybrid = PoolConfig.model_validate({"name": "a40", "kind": "hybrid", "role": "inference", "gpuModel": "A40",
                                        "gpusPerNode": 4, "nodes": 1})  # fmt: skip
    assert choose_management(hybrid, False) == "self-managed"


# --------------------------------------------------------------------------------------------- settings
def test_capacity_types_and_where_the_instance_types_go() -> None:
    spec = spec_of(SYSTEM, MANAGED_P5, SPOT_L40S, {**MANAGED_P5, "name": "odcr", "capacity": {
        "type": "reservation", "reservationId": "cr-0123456789abcdef0", "availabilityZone": "us-east-1a"}}, BLOCK | {
        "name": "block"})  # fmt: skip
    plans = {p.name: p for p in plan_pools(spec)}
    settings = {name: node_group_settings(plan) for name, plan in plans.items()}
    assert {n: s.capacity_type for n, s in settings.items()} == {
        "system": "ON_DEMAND",
        "h100": "ON_DEMAND",
        "l40s": "SPOT",
        "odcr": "ON_DEMAND",
        "block": "CAPACITY_BLOCK",
    }
    assert settings["l40s"].instance_types == ("g6e.12xlarge", "g6e.24xlarge")
    assert settings["l40s"].launch_template_instance_type is None
    assert settings["h100"].instance_types is None and settings["h100"].launch_template_instance_type == "p5.48xlarge"


@pytest.mark.parametrize(
    ("refresh", "expected"),
    [
        ({}, ("DEFAULT", 1, None)),
        ({"minHealthyPercentage": 90}, ("DEFAULT", None, 10)),
        ({"minHealthyPercentage": 50, "maxHealthyPercentage": 100}, ("MINIMAL", None, 50)),
    ],
)
def test_instance_refresh_settings_become_the_update_config(refresh: dict[str, Any], expected: tuple[Any, ...]) -> None:
    (plan,) = [p for p in plan_pools(spec_of(SYSTEM, {**SPOT_L40S, "instanceRefresh": refresh})) if p.name == "l40s"]
    update = update_settings(plan)
    assert (update.strategy, update.max_unavailable, update.max_unavailable_percentage) == expected


def test_only_managed_pools_have_node_group_settings() -> None:
    (plan,) = [p for p in plan_pools(spec_of(SYSTEM, P5)) if p.name == "h100"]
    with pytest.raises(ValueError, match="only managed"):
        node_group_settings(plan)


# ------------------------------------------------------------------------------------------- under mocks
@pytest.fixture(scope="module")
def p5_run() -> tuple[ProgramRun, dict[str, NodePool]]:
    return build(MANAGED_P5)


@pytest.mark.program
def test_the_efa_layout_placement_group_and_security_groups_survive_in_the_template(p5_run: Any) -> None:
    run, built = p5_run
    lt = run.one(LAUNCH_TEMPLATE, "t-h100")
    slots = [(i["networkCardIndex"], i["deviceIndex"], i["interfaceType"]) for i in lt.inputs["networkInterfaces"]]
    assert slots == [(0, 0, "interface"), (0, 1, "efa-only")] + [(card, 0, "efa-only") for card in range(1, 32)]
    efa_group = built["h100"].efa_security_group
    assert efa_group is not None
    for interface in lt.inputs["networkInterfaces"]:
        # Security groups on the interfaces, none at the instance level and no subnet: what EKS allows.
        assert interface["securityGroups"][0] == NODE_SECURITY_GROUP_ID and len(interface["securityGroups"]) == 2
        assert "subnetId" not in interface
    assert "vpcSecurityGroupIds" not in lt.inputs
    assert lt.inputs["placement"] == {"groupName": run.one(PLACEMENT_GROUP, "t-h100").name}
    assert lt.inputs["instanceType"] == "p5.48xlarge"
    assert "iamInstanceProfile" not in lt.inputs, "EKS refuses an instance profile in a node group's template"
    assert lt.inputs["metadataOptions"]["httpTokens"] == "required"


@pytest.mark.program
def test_the_node_group_runs_the_template_in_one_az_with_repair_on(p5_run: Any) -> None:
    run, built = p5_run
    group = run.one(NODE_GROUP, "t-h100")
    lt = run.one(LAUNCH_TEMPLATE, "t-h100")
    assert group.inputs["launchTemplate"]["version"] == "1", "the latest version: a change rolls the nodes"
    assert group.inputs["launchTemplate"]["id"].startswith("lt-")
    assert group.property_dependencies["launchTemplate"] == [lt.urn]
    assert group.inputs["subnetIds"] == [subnet_id("us-east-1a")]
    assert group.inputs["capacityType"] == "ON_DEMAND"
    assert "instanceTypes" not in group.inputs
    assert group.inputs["nodeRoleArn"] == "arn:aws:iam::123456789012:role/t-h100-node"
    assert group.inputs["scalingConfig"] == {"minSize": 0, "maxSize": 4, "desiredSize": 0}
    assert group.ignore_changes == ["scalingConfig.desiredSize"]
    assert group.inputs["nodeRepairConfig"] == {"enabled": True, "maxParallelNodesRepairedCount": 1}
    assert group.inputs["updateConfig"] == {"updateStrategy": "DEFAULT", "maxUnavailable": 1}
    assert group.inputs["forceUpdateVersion"] is False
    assert "amiType" not in group.inputs and "releaseVersion" not in group.inputs, "the template names the AMI"
    assert group.inputs["tags"]["gpu-clusters/pool"] == "h100"
    assert [g.name for g in run.of_type(AUTOSCALING_GROUP)] == ["t-system"], "the default system pool's only"
    assert built["h100"].asg is None


@pytest.mark.program
def test_labels_taints_and_max_pods_come_from_the_node_config_not_the_node_group(p5_run: Any) -> None:
    run, _ = p5_run
    group = run.one(NODE_GROUP, "t-h100")
    assert "labels" not in group.inputs and "taints" not in group.inputs
    spec = node_config(run.one(LAUNCH_TEMPLATE, "t-h100"))["spec"]
    flags = spec["kubelet"]["flags"]
    assert f"--register-with-taints=nvidia.com/gpu=true:NoSchedule,{STARTUP_TAINT_KEY}=true:NoSchedule" in flags
    assert any(f.startswith("--node-labels=") and "gpu-clusters/pool=h100" in f for f in flags)
    assert spec["kubelet"]["config"]["maxPods"] > 0
    assert spec["instance"] == {"localStorage": {"strategy": "RAID0"}}
    assert spec["cluster"]["name"] == "t", "nodes bootstrap themselves: EKS merges no user data with an AMI id"


@pytest.mark.program
def test_instances_carry_what_a_self_managed_group_would_propagate(p5_run: Any) -> None:
    lt = p5_run[0].one(LAUNCH_TEMPLATE, "t-h100")
    (instance,) = [t for t in lt.inputs["tagSpecifications"] if t["resourceType"] == "instance"]
    assert instance["tags"]["kubernetes.io/cluster/t"] == "owned"
    assert instance["tags"]["aws-node-termination-handler/managed"] == "true"
    assert instance["tags"]["gpu-clusters/pool"] == "h100"


@pytest.mark.program
def test_scale_from_zero_tags_go_on_the_group_eks_created(p5_run: Any) -> None:
    run = p5_run[0]
    tags = group_tags(run, "h100")
    assert tags[f"{NT}/resources/nvidia.com/gpu"][:2] == ("8", False)
    assert tags[f"{NT}/resources/vpc.amazonaws.com/efa"][:2] == ("32", False)
    assert tags[f"{NT}/taint/nvidia.com/gpu"][:2] == ("true:NoSchedule", False)
    assert tags[f"{NT}/label/gpu-clusters/pool"][:2] == ("h100", False)
    (group,) = {group for _, _, group in tags.values()}
    assert group.startswith(f"{GENERATED_PREFIX}t-h100-")
    # EKS puts the auto-discovery tags there itself.
    assert "k8s.io/cluster-autoscaler/enabled" not in tags and "k8s.io/cluster-autoscaler/t" not in tags
    names = [t.name for t in run.of_type(GROUP_TAG)]
    assert f"t-h100-{group_tag_suffix(f'{NT}/resources/nvidia.com/gpu')}" in names
    assert len(names) == len(set(names)) == len(tags)


@pytest.mark.program
def test_the_group_eks_created_carries_the_tag_the_health_loops_role_is_held_to(p5_run: Any) -> None:
    """Without it, SetInstanceHealth on a managed pool's node is refused, and a failed gate stays cordoned."""
    tags = group_tags(p5_run[0], "h100")
    (statement,) = [s for s in repair_policy("t")["Statement"] if s["Sid"] == "ReplaceOwnNodes"]
    ((key, value),) = statement["Condition"]["StringEquals"].items()
    assert tags[key.removeprefix("aws:ResourceTag/")][:2] == (value, False)


@pytest.mark.program
def test_spot_types_go_on_the_node_group_and_the_template_names_none() -> None:
    run, _ = build(SPOT_L40S)
    group = run.one(NODE_GROUP, "t-l40s")
    assert group.inputs["capacityType"] == "SPOT"
    assert group.inputs["instanceTypes"] == ["g6e.12xlarge", "g6e.24xlarge"]
    assert "instanceType" not in run.one(LAUNCH_TEMPLATE, "t-l40s").inputs
    assert group.inputs["subnetIds"] == [subnet_id(zone) for zone in THREE_ZONES]


@pytest.mark.program
def test_a_capacity_block_is_targeted_and_scaled_in_before_its_end() -> None:
    run = build(BLOCK)[0]
    group = run.one(NODE_GROUP, "t-h100")
    assert group.inputs["capacityType"] == "CAPACITY_BLOCK"
    lt = run.one(LAUNCH_TEMPLATE, "t-h100")
    assert lt.inputs["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt.inputs["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert "placement" not in lt.inputs and run.of_type(PLACEMENT_GROUP) == []
    schedule = run.one(SCHEDULE, "t-h100-block-end")
    assert schedule.inputs["autoscalingGroupName"].startswith(f"{GENERATED_PREFIX}t-h100-")
    assert (schedule.inputs["minSize"], schedule.inputs["maxSize"], schedule.inputs["desiredCapacity"]) == (0, 0, 0)


@pytest.mark.program
def test_repair_limits_and_overrides_are_registered_as_configured() -> None:
    repair = {
        "maxParallel": {"percentage": 25},
        "maxUnhealthy": {"count": 3},
        "overrides": [{"condition": "AcceleratedHardwareReady", "reason": "NvidiaXID79Error", "waitMinutes": 5,
                       "action": "Replace"}],
    }  # fmt: skip
    run, _ = build({**SPOT_L40S, "repair": {"eks": repair}})
    assert run.one(NODE_GROUP, "t-l40s").inputs["nodeRepairConfig"] == {
        "enabled": True,
        "maxParallelNodesRepairedPercentage": 25,
        "maxUnhealthyNodeThresholdCount": 3,
        "nodeRepairConfigOverrides": [
            {
                "nodeMonitoringCondition": "AcceleratedHardwareReady",
                "nodeUnhealthyReason": "NvidiaXID79Error",
                "minRepairWaitTimeMins": 5,
                "repairAction": "Replace",
            }
        ],
    }


@pytest.mark.program
def test_a_self_managed_pool_still_builds_its_group() -> None:
    run, built = build({**SPOT_L40S, "management": "self-managed"})
    assert run.of_type(NODE_GROUP) == [] and built["l40s"].asg is not None
    assert run.one(AUTOSCALING_GROUP, "t-l40s").inputs["mixedInstancesPolicy"]
    assert run.of_type(GROUP_TAG) == []


@pytest.mark.program
def test_eks_makes_the_managed_roles_access_entry_and_the_stack_only_the_others() -> None:
    def program() -> None:
        cluster = pulumi.Output.from_input("demo")
        NodeIdentity("demo", ["system", "burst"], cluster, pulumi.Output.from_input("aws"), {}, managed_pools=["burst"])

    run = run_mocked(program)
    entries = run.of_type(ACCESS_ENTRY)
    assert [e.name for e in entries] == ["demo-system-node"]


@pytest.mark.program
def test_a_pool_that_changes_kind_gets_a_new_role_so_no_role_passes_between_access_entries() -> None:
    def roles_and_entries(managed: list[str]) -> tuple[set[str], set[str]]:
        def program() -> None:
            cluster = pulumi.Output.from_input("demo")
            NodeIdentity("demo", ["burst"], cluster, pulumi.Output.from_input("aws"), {}, managed_pools=managed)

        run = run_mocked(program)
        return {r.name for r in run.of_type(IAM_ROLE)}, {e.name for e in run.of_type(ACCESS_ENTRY)}

    self_managed, managed = roles_and_entries([]), roles_and_entries(["burst"])
    assert self_managed == ({"demo-burst-node"}, {"demo-burst-node"})
    # a flip replaces the role (a new resource name): EKS's entry for the new role never meets the stack's entry
    # for the old one, whichever is created or deleted first
    assert managed == ({"demo-burst-managed-node"}, set())


@pytest.mark.program
def test_plan_warns_when_auto_decided_the_kind_and_names_what_would_flip_it() -> None:
    from components.planning.management import DECIDING_SETTINGS, auto_management_warning

    found = [w for w in shipped_plan("smoke")["summary"]["warnings"] if "management auto" in w]
    by_pool = {w.split(":")[0]: w for w in found}
    assert set(by_pool) == {"pool system", "pool l40s"}
    assert "made it managed" in by_pool["pool l40s"] and "set management: managed" in by_pool["pool l40s"]
    assert "made it self-managed" in by_pool["pool system"]
    assert all(setting in by_pool["pool l40s"] for setting in DECIDING_SETTINGS)
    assert "replaces every node" in by_pool["pool l40s"]
    configured = spec_of(SYSTEM, {**SPOT_L40S, "management": "managed"})
    assert [p.name for p in plan_pools(configured) if auto_management_warning(p.name, p.pool, p.management)] == [
        "system"
    ]


# ------------------------------------------------------------------------------------- the shipped stacks
@pytest.mark.program
def test_the_termination_handlers_hook_and_policy_name_the_group_eks_created() -> None:
    run = shipped_stack("smoke").run
    hook = run.one(HOOK, "smoke-l40s-terminate")
    assert hook.inputs["autoscalingGroupName"].startswith(f"{GENERATED_PREFIX}smoke-l40s-")
    assert run.one(HOOK, "smoke-system-terminate").inputs["autoscalingGroupName"] == "smoke-system"


@pytest.mark.program
def test_the_policy_pack_judges_managed_pools_like_self_managed_ones() -> None:
    """The hybrid stack's managed spot pool passes the spot rules (EKS turns on capacity rebalancing itself, and
    cluster-autoscaler discovers every managed group) and the cost bound reads its node group's maximum."""
    plan = shipped_stack("hybrid").plan
    assert not [v for v in plan["violations"] if v["level"] == "mandatory"]
    assert [r["name"] for r in plan["resources"] if r["type"] == NODE_GROUP] == ["hybrid-burst"]
