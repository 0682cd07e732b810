"""The repair path as planned: the settings the loop reads (and that the loop's own parser reads them back), the hourly
cap's config, and the IAM of the loop's role, registered under Pulumi mocks with its Pod Identity association."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pulumi
import pytest

from blueprint.plan.runner import run_mocked
from components.errors import ConfigError
from components.identity import PodIdentityRoles
from components.node_health_role import node_health_role
from components.planning import node_groups, node_health, node_health_repair
from components.planning.stack_plan import plan_pools
from policies.rules import iam
from programs.node_health import repair
from tests.builders import (
    HYBRID_POOL,
    IAM_ROLE,
    INFERENCE_POOL,
    ROLE_POLICY,
    SYSTEM_POOL,
    TRAINING_POOL,
    pool,
    stack_config,
)

BLOCK = "cr-0123456789abcdef0"
CLUSTER_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/demo"


def block_pool(**repair_settings: Any) -> dict[str, Any]:
    return pool(
        TRAINING_POOL,
        capacity={"type": "capacity-block", "reservationId": BLOCK},
        **({"repair": repair_settings} if repair_settings else {}),
    )


# ------------------------------------------------------------------------------------------------- the settings
def test_settings_map_every_pool_by_name_with_kind_block_and_cap() -> None:
    spec = stack_config(SYSTEM_POOL, block_pool(maxPerHour=1), HYBRID_POOL)
    settings = node_health_repair.repair_settings(plan_pools(spec), drain_timeout_seconds=600)
    threshold = {"maxUnhealthy": None, "maxUnhealthyPercent": 20}  # EKS node auto-repair's default
    assert settings["pools"] == {
        "system": {
            "kind": "aws",
            "management": "self-managed",
            "capacityBlockId": None,
            "maxRepairsPerHour": 3,
            **threshold,
        },
        "h100": {
            "kind": "aws",
            "management": "self-managed",
            "capacityBlockId": BLOCK,
            "maxRepairsPerHour": 1,
            **threshold,
        },
        "a40": {
            "kind": "hybrid",
            "management": "self-managed",
            "capacityBlockId": None,
            "maxRepairsPerHour": 3,
            **threshold,
        },
    }
    assert settings["drainTimeoutSeconds"] == 600
    # EKS node auto-repair's waits: 10 minutes for accelerated hardware, 30 for the rest.
    assert settings["conditionWaitSeconds"] == {"AcceleratedHardwareReady": 600, "default": 1800}


def test_a_managed_pools_own_unhealthy_threshold_holds_the_loop_too() -> None:
    spec = stack_config(SYSTEM_POOL, pool(TRAINING_POOL, repair={"eks": {"maxUnhealthy": {"count": 2}}}))
    settings = node_health_repair.repair_settings(plan_pools(spec), 600, managed_pools={"h100"})
    assert (settings["pools"]["h100"]["maxUnhealthy"], settings["pools"]["h100"]["maxUnhealthyPercent"]) == (2, None)
    loaded = repair.RepairConfig.from_json(
        node_health_repair.repair_config_data(plan_pools(spec), 600, {"h100"})[repair.CONFIG_KEY]
    )
    assert loaded.pools["h100"].max_unhealthy == 2
    assert loaded.wait_for("AcceleratedHardwareReady") == timedelta(minutes=10)
    assert loaded.wait_for("NetworkingReady") == timedelta(minutes=30)


def test_a_managed_pool_is_marked_so_the_loop_leaves_its_conditions_to_eks() -> None:
    spec = stack_config(SYSTEM_POOL, TRAINING_POOL)
    settings = node_health_repair.repair_settings(plan_pools(spec), 600, managed_pools={"h100"})
    assert settings["pools"]["h100"]["management"] == "managed"
    assert settings["pools"]["system"]["management"] == "self-managed"


def test_the_loop_reads_back_what_planning_writes() -> None:
    spec = stack_config(SYSTEM_POOL, block_pool(maxPerHour=2), HYBRID_POOL)
    data = node_health_repair.repair_config_data(plan_pools(spec), drain_timeout_seconds=900)
    assert list(data) == [repair.CONFIG_KEY]
    loaded = repair.RepairConfig.from_json(data[repair.CONFIG_KEY])
    assert loaded.pools["h100"] == repair.PoolSettings("h100", "aws", "self-managed", BLOCK, 2, None, 20)
    assert loaded.pools["a40"].kind == "hybrid"
    assert loaded.drain_timeout == timedelta(seconds=900)
    assert loaded.capacity_block_lead == node_health_repair.capacity_block_lead(900)


@pytest.mark.parametrize(
    ("drain_seconds", "lead"),
    [
        # 30 min + 12 min hook + 15 min slack is under the one-hour floor: 1 h, then the replacement's hour.
        (600, timedelta(hours=2)),
        # 30 min + 62 min hook + 15 min slack = 107 min, then the replacement's hour.
        (3600, timedelta(minutes=167)),
    ],
)
def test_the_capacity_block_lead_is_the_pools_scale_in_lead_plus_an_hour(drain_seconds: int, lead: timedelta) -> None:
    assert node_health_repair.capacity_block_lead(drain_seconds) == lead


def test_names_shared_with_the_loop_match() -> None:
    assert node_health_repair.REPAIR_CONFIG_KEY == repair.CONFIG_KEY


# --------------------------------------------------------------------------------------------------- the config
def test_the_cap_defaults_to_three_and_zero_means_cordon_only() -> None:
    spec = stack_config(SYSTEM_POOL, block_pool(maxPerHour=0))
    assert {p.name: p.pool.repair.max_per_hour for p in plan_pools(spec)} == {"system": 3, "h100": 0}


def test_bad_caps_are_all_reported_with_their_paths() -> None:
    with pytest.raises(ConfigError) as caught:
        stack_config(
            pool(SYSTEM_POOL, repair={"maxPerHour": -1}),
            pool(TRAINING_POOL, repair={"maxPerHour": "3", "perDay": 4}),
            validated=True,
        )
    # (The fixture's site route is judged too, without the config that parses: only the repair paths matter here.)
    paths = sorted(p.path for p in caught.value.problems if ".repair." in p.path)
    assert paths == [
        "nodePools[0] (system).repair.maxPerHour",
        "nodePools[1] (h100).repair.maxPerHour",
        "nodePools[1] (h100).repair.perDay",
    ]


# ------------------------------------------------------------------------------------------------------ the IAM
def test_the_policy_replaces_only_this_clusters_groups_and_reads_blocks() -> None:
    policy = node_health_repair.repair_policy("demo")
    replace, describe = policy["Statement"]
    assert replace["Action"] == ["autoscaling:SetInstanceHealth"]
    assert replace["Condition"] == {"StringEquals": {"aws:ResourceTag/gpu-clusters/cluster": "demo"}}
    assert describe == {
        "Sid": "ReadCapacityBlocks",
        "Effect": "Allow",
        "Action": ["ec2:DescribeCapacityReservations"],
        "Resource": "*",
    }
    actions = [a for s in policy["Statement"] for a in s["Action"]]
    assert actions == ["autoscaling:SetInstanceHealth", "ec2:DescribeCapacityReservations"]


def test_the_policy_passes_the_packs_iam_rules_and_its_write_is_tag_scoped_by_their_measure() -> None:
    document = node_health_repair.repair_policy("demo")
    replace = document["Statement"][0]
    assert iam.is_scoped(iam.condition_keys(replace))
    assert iam.unscoped_grants(document) == []
    assert iam.escalations(document) == []


@pytest.mark.program
def test_the_role_and_its_association_are_registered_for_the_loops_service_account() -> None:
    def program() -> None:
        roles = PodIdentityRoles(
            pulumi.Output.from_input("demo"),
            "demo",
            pulumi.Output.from_input("aws"),
            {"gpu-clusters/cluster": "demo"},
            pulumi.Output.from_input("123456789012"),
            pulumi.Output.from_input(CLUSTER_ARN),
        )
        node_health_role(roles, "demo", pulumi.ComponentResource("test:index:Owner", "owner"))

    run = run_mocked(program)
    prefix = f"demo-{node_health_repair.ROLE_NAME}"
    trust = json.loads(run.one(IAM_ROLE, prefix).inputs["assumeRolePolicy"])
    conditions = trust["Statement"][0]["Condition"]["StringEquals"]
    assert conditions["aws:RequestTag/kubernetes-namespace"] == node_health.NODE_HEALTH_NAMESPACE
    assert conditions["aws:RequestTag/kubernetes-service-account"] == node_health.SERVICE_ACCOUNT
    assert conditions["aws:RequestTag/eks-cluster-arn"] == CLUSTER_ARN
    assert json.loads(run.one(ROLE_POLICY, prefix).inputs["policy"]) == node_health_repair.repair_policy("demo")
    association = run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", prefix)
    assert association.inputs["namespace"] == node_health.NODE_HEALTH_NAMESPACE
    assert association.inputs["serviceAccount"] == node_health.SERVICE_ACCOUNT


def test_a_startup_taint_set_by_hand_is_refused_at_its_path() -> None:
    """Only the health gate removes a startup taint: one in the pool's own taints would never go (or double the
    gate's)."""
    taints = [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
        {"key": node_health.STARTUP_TAINT_KEY, "value": "pending", "effect": "NoSchedule"},
    ]
    with pytest.raises(ConfigError) as caught:
        stack_config(pool(SYSTEM_POOL), pool(TRAINING_POOL, taints=taints), validated=True)
    refused = [p for p in caught.value.problems if "startup taint" in p.message]
    assert [p.path for p in refused] == ["nodePools[1] (h100).taints[1].key"]
    assert "healthGate.enabled" in refused[0].message


def test_repair_keys_a_pools_kind_does_not_read_are_all_refused_at_their_paths() -> None:
    """`repair.eks` is EKS node auto repair, which only managed node groups have; `repair.maxPerHour` caps
    replacements, which on-prem servers never get."""
    with pytest.raises(ConfigError) as caught:
        stack_config(
            pool(SYSTEM_POOL, management="self-managed", repair={"eks": {"enabled": True}}),
            pool(HYBRID_POOL, repair={"maxPerHour": 2, "eks": {"maxParallel": {"count": 1}}}),
            validated=True,
        )
    refused = {p.path: p.message for p in caught.value.problems if ".repair." in p.path}
    assert sorted(refused) == [
        "nodePools[0] (system).repair.eks",
        "nodePools[1] (a40).repair.eks",
        "nodePools[1] (a40).repair.maxPerHour",
    ]
    assert "management: managed" in refused["nodePools[0] (system).repair.eks"]


def test_an_eks_limit_is_a_count_or_a_percentage_and_defaults_to_one_node_at_a_time() -> None:
    default = {p.name: p for p in plan_pools(stack_config(SYSTEM_POOL, pool(INFERENCE_POOL, management="managed")))}
    assert node_groups.repair_settings(default["l40s"]).max_parallel_count == 1
    by_share = pool(INFERENCE_POOL, management="managed", repair={"eks": {"maxParallel": {"percentage": 10}}})
    shared = {p.name: p for p in plan_pools(stack_config(SYSTEM_POOL, by_share))}
    settings = node_groups.repair_settings(shared["l40s"])
    assert (settings.max_parallel_count, settings.max_parallel_percentage) == (None, 10)
    with pytest.raises(ConfigError) as caught:
        stack_config(
            pool(SYSTEM_POOL),
            pool(
                INFERENCE_POOL,
                management="managed",
                repair={"eks": {"maxParallel": {}, "maxUnhealthy": {"count": 2, "percentage": 5}}},
            ),
            validated=True,
        )
    paths = sorted(p.path for p in caught.value.problems if ".repair." in p.path)
    assert paths == ["nodePools[1] (l40s).repair.eks.maxParallel", "nodePools[1] (l40s).repair.eks.maxUnhealthy"]
