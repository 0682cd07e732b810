"""The deployer's least-privilege IAM policy, derived from each stack's plan: every resource type and invoke mapped,
actions named one by one, scoped to the stack's roles, cluster and Region, cut into managed policies that fit, and
kept current in docs/deployer-policy/."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from blueprint.deployer_policy import (
    MANAGED_POLICY_CHARS,
    UnmappedTypes,
    deployer_policy,
    managed_policies,
    planned_actions,
    policy_chars,
    policy_path,
    policy_text,
)
from blueprint.plan.runner import list_stacks
from components.catalog import deployer_permissions
from policies import aws_resource_types
from tests.builders import BUCKET, HELM_RELEASE, IAM_ROLE, KMS_KEY, LUSTRE, CliResult, shipped_stack

COMPONENTS = Path(__file__).resolve().parents[1] / "components"


def policy_of(stack: str) -> dict[str, Any]:
    planned = shipped_stack(stack)
    return deployer_policy(planned.plan, planned.run.invokes)


def actions_of(policy: dict[str, Any]) -> set[str]:
    return {a for statement in policy["Statement"] for a in statement["Action"]}


def statement(policy: dict[str, Any], sid: str) -> dict[str, Any]:
    return next(s for s in policy["Statement"] if s["Sid"] == sid)


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_every_resource_type_and_invoke_of_every_shipped_stack_has_permissions(stack: str) -> None:
    planned = shipped_stack(stack)
    custom = {r["type"] for r in planned.plan["resources"] if r["custom"]}
    unmapped = {t for t in custom if not deployer_permissions.needs_no_iam(t)} - deployer_permissions.mapped_types()
    assert not unmapped
    assert planned_actions(planned.plan["resources"], planned.run.invokes)


def test_every_aws_resource_the_components_can_register_has_permissions() -> None:
    """Also the types no shipped stack plans (an SNS topic for alert emails, Roles Anywhere, a Capacity Block's
    scheduled action): found in the components' source, their type tokens as the provider's classes declare them
    (read from the pinned SDK into policies/aws-resource-types.json; importing its modules here took two seconds).
    A name that is no resource of the SDK (an `...Args` class) has no entry."""
    types = aws_resource_types.types()
    used = {
        aws_resource_types.key(module, name)
        for module, name in re.findall(r"\baws\.([a-z0-9_]+)\.([A-Z]\w+)\(", _components_source())
    }
    assert [key for key in used if key not in types and not key.endswith("Args")] == []  # a resource the table lacks
    tokens = {types[key]["token"] for key in used if key in types}
    assert "aws:sns/topic:Topic" in tokens and "aws:rolesanywhere/trustAnchor:TrustAnchor" in tokens
    assert tokens - deployer_permissions.mapped_types() == set()


def _components_source() -> str:
    return "\n".join(path.read_text() for path in COMPONENTS.rglob("*.py"))


def test_a_type_without_permissions_is_refused_by_name() -> None:
    plan = {"resources": [{"type": "aws:new/thing:Thing", "custom": True}]}
    with pytest.raises(UnmappedTypes, match="aws:new/thing:Thing"):
        planned_actions(plan["resources"], [])
    with pytest.raises(UnmappedTypes, match="aws:index/getNewThing"):
        planned_actions([], ["aws:index/getNewThing:getNewThing"])


def test_component_and_kubernetes_resources_need_no_iam_action() -> None:
    resources = [
        {"type": "gpu-clusters:index:GpuCluster", "custom": False},
        {"type": HELM_RELEASE, "custom": True},
        {"type": "pulumi:providers:kubernetes", "custom": True},
    ]
    assert planned_actions(resources, []) == set()


@pytest.mark.program
def test_the_training_policy_creates_the_cluster_and_the_file_system_and_names_every_action() -> None:
    actions = actions_of(policy_of("training"))
    assert {"eks:CreateCluster", "fsx:CreateFileSystem", "ec2:CreateLaunchTemplate", "iam:PassRole"} <= actions
    assert not [a for a in actions if "*" in a]
    assert all(re.fullmatch(r"[a-z0-9-]+:[A-Za-z0-9]+", a) for a in actions)


@pytest.mark.program
def test_a_stack_without_lustre_gets_no_fsx_action() -> None:
    assert not [a for a in actions_of(policy_of("inference")) if a.startswith("fsx:")]


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_pass_role_is_limited_to_the_stacks_roles_and_the_services_they_trust(stack: str) -> None:
    plan = shipped_stack(stack).plan
    cluster = plan["summary"]["cluster"]
    trusted = set()
    for r in plan["resources"]:
        if r["type"] == IAM_ROLE:
            for s in json.loads(r["inputs"]["assumeRolePolicy"])["Statement"]:
                service = s["Principal"]["Service"]
                trusted |= {service} if isinstance(service, str) else set(service)
    policy = policy_of(stack)
    passing = statement(policy, "PassTheStacksRolesToTheirServices")
    assert passing["Action"] == ["iam:PassRole"]
    assert passing["Resource"] == [f"arn:aws:iam::*:role/{cluster}-*"]
    assert set(passing["Condition"]["StringEquals"]["iam:PassedToService"]) == trusted
    own_role = statement(policy, "PassTheStacksServiceLinkedRolesToTheirServices")
    other = [s for s in policy["Statement"] if s is not passing and s is not own_role]
    assert not [s for s in other if "iam:PassRole" in s["Action"]]


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_the_stacks_auto_scaling_role_is_created_passed_and_deleted_by_its_name_only(stack: str) -> None:
    """Every group names the stack's own role (iam:PassRole to Auto Scaling, Amazon EC2 Auto Scaling User Guide);
    `pulumi destroy` deletes that role and no other service-linked role."""
    summary = shipped_stack(stack).plan["summary"]
    role = (
        "arn:aws:iam::*:role/aws-service-role/autoscaling.amazonaws.com/"
        f"AWSServiceRoleForAutoScaling_{summary['cluster']}.{summary['region']}"
    )
    policy = policy_of(stack)
    passing = statement(policy, "PassTheStacksServiceLinkedRolesToTheirServices")
    assert (passing["Action"], passing["Resource"]) == (["iam:PassRole"], [role])
    assert "Condition" not in passing  # the exact ARN, as the Auto Scaling guide's example grants it
    managing = statement(policy, "ManageTheStacksOwnServiceLinkedRoles")
    assert {"iam:DeleteServiceLinkedRole", "iam:GetServiceLinkedRoleDeletionStatus", "iam:TagRole"} <= set(
        managing["Action"]
    )
    assert managing["Resource"] == [role]
    [create] = _granted(policy, "iam:CreateServiceLinkedRole")
    assert role in create["Resource"]
    assert "arn:aws:iam::*:role/aws-service-role/autoscaling.amazonaws.com/*" not in create["Resource"]
    assert not _granted(policy, "iam:ListRoles")


@pytest.mark.program
def test_role_and_cluster_actions_are_scoped_to_the_stack_and_the_rest_to_its_region() -> None:
    policy = policy_of("training")
    roles = statement(policy, "ManageTheStacksRolesAndInstanceProfiles")
    assert "iam:CreateRole" in roles["Action"]
    assert roles["Resource"] == ["arn:aws:iam::*:role/train-*", "arn:aws:iam::*:instance-profile/train-*"]
    cluster = statement(policy, "TheStacksCluster")
    assert "eks:CreateCluster" in cluster["Action"]
    assert all(":cluster/train" in arn or "/train/" in arn for arn in cluster["Resource"])
    for s in policy["Statement"]:
        if s["Resource"] == ["*"] and not s["Action"][0].startswith("iam:"):
            assert s["Condition"]["StringEquals"]["aws:RequestedRegion"] == ["us-east-1"]


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_the_policy_is_cut_into_managed_policies_that_fit_and_lose_nothing(stack: str) -> None:
    policy = policy_of(stack)
    parts = managed_policies(policy)
    assert policy_chars(policy) > MANAGED_POLICY_CHARS, "the shipped stacks need more than one managed policy"
    assert all(policy_chars(part) <= MANAGED_POLICY_CHARS for part in parts)
    assert set().union(*(actions_of(part) for part in parts)) == actions_of(policy)
    for part in parts:
        sids = [s["Sid"] for s in part["Statement"]]
        assert len(sids) == len(set(sids))


def test_a_statement_larger_than_a_managed_policy_is_split_by_its_actions() -> None:
    actions = [f"ec2:DescribeThing{n:04d}" for n in range(400)]
    big = {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "Big", "Effect": "Allow", "Action": actions, "Resource": ["*"]}],
    }
    parts = managed_policies(big)
    assert len(parts) > 1 and all(policy_chars(p) <= MANAGED_POLICY_CHARS for p in parts)
    assert [a for p in parts for s in p["Statement"] for a in s["Action"]] == actions


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_the_generated_policy_file_is_current(stack: str) -> None:
    """`blueprint schema --write` writes it and CI's `schema --check` fails when it drifts."""
    planned = shipped_stack(stack)
    assert policy_path(stack).read_text() == policy_text(stack, planned.plan, planned.run.invokes)


@pytest.mark.program
def test_the_cli_prints_the_named_managed_policies(blueprint_cli: Any) -> None:
    result: CliResult = blueprint_cli("deployer-policy", "--stack", "smoke")
    assert result.returncode == 0
    named = json.loads(result.stdout)
    assert list(named) == [f"gpu-clusters-deployer-smoke-{n}" for n in range(1, len(named) + 1)]
    assert set().union(*(actions_of(p) for p in named.values())) == actions_of(policy_of("smoke"))


def test_the_cli_refuses_an_unknown_stack_with_exit_74(blueprint_cli: Any) -> None:
    result: CliResult = blueprint_cli("deployer-policy", "--stack", "nope")
    assert result.returncode == 74 and "no stack file" in result.stderr


def _granted(policy: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in policy["Statement"] if action in s["Action"]]


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_every_planned_resource_type_can_be_read_and_deleted(stack: str) -> None:
    """`pulumi up` reads each resource after creating it and `pulumi destroy` deletes it: the provider's calls for
    both (deployer_provider_calls.yaml) are in the policy for every type the stack plans."""
    planned = shipped_stack(stack)
    actions = actions_of(deployer_policy(planned.plan, planned.run.invokes))
    for resource_type in {r["type"] for r in planned.plan["resources"] if r["custom"]}:
        if deployer_permissions.needs_no_iam(resource_type):
            continue
        calls = deployer_permissions.provider_calls(resource_type)
        assert calls["read"], resource_type
        assert "delete" in calls, resource_type
        assert set(calls["read"]) | set(calls["delete"]) <= actions, resource_type


def test_every_mapped_type_has_its_provider_calls_with_a_source() -> None:
    assert deployer_permissions.provider_call_types() == deployer_permissions.mapped_types()
    sources = deployer_permissions.sources()
    for resource_type in deployer_permissions.provider_call_types():
        calls = deployer_permissions.provider_calls(resource_type)
        assert calls["file"].endswith(".go") and calls.get("source", "TFAWS") in sources


@pytest.mark.program
@pytest.mark.parametrize(
    ("stack", "needed"),
    [
        ("training", {"autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScalingActivities"}),
        ("training", {"ec2:AttachInternetGateway", "ec2:DetachInternetGateway"}),
        ("training", {"ec2:DescribeLaunchTemplateVersions", "ec2:DescribePrefixLists"}),
        ("training", {"iam:ListInstanceProfilesForRole", "iam:RemoveRoleFromInstanceProfile"}),
        ("training", {"s3:GetBucketRequestPayment", "ec2:DescribeAddressesAttribute", "ec2:ModifySecurityGroupRules"}),
        ("inference", {"autoscaling:DescribeAutoScalingGroups", "ec2:DescribeLaunchTemplateVersions"}),
    ],
)
def test_the_calls_a_first_up_and_destroy_make_are_granted(stack: str, needed: set[str]) -> None:
    assert needed <= actions_of(policy_of(stack))


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_no_excluded_action_and_nothing_unrelated_is_granted(stack: str) -> None:
    actions = actions_of(policy_of(stack))
    assert not [a for a in actions if deployer_permissions.is_excluded(a)]
    services = {a.split(":", 1)[0] for a in actions}
    assert not services & {"s3tables", "vpc-lattice", "managed-fleets", "firehose", "vpce"}
    assert not {"s3:PutBucketReplication", "s3:PutBucketWebsite", "s3:PutBucketAcl", "s3:DeleteObject"} & actions


def test_an_exclusion_wins_over_the_generated_actions_but_never_removes_a_provider_call() -> None:
    excluded = deployer_permissions.excluded()
    assert all(reason for reason in excluded.values())
    for resource_type in deployer_permissions.provider_call_types():
        calls = deployer_permissions.provider_calls(resource_type)
        own = [*calls["read"], *calls["delete"], *calls.get("write", [])]
        assert not [a for a in own if deployer_permissions.is_excluded(a)], resource_type


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_service_linked_roles_are_created_only_for_the_services_the_stack_uses(stack: str) -> None:
    policy = policy_of(stack)
    [create] = _granted(policy, "iam:CreateServiceLinkedRole")
    services = create["Condition"]["StringEquals"]["iam:AWSServiceName"]
    assert "autoscaling.amazonaws.com" in services and "eks.amazonaws.com" in services
    implicit = [f"arn:aws:iam::*:role/aws-service-role/{s}/*" for s in services if s != "autoscaling.amazonaws.com"]
    assert create["Resource"][: len(implicit)] == implicit
    types = {r["type"] for r in shipped_stack(stack).plan["resources"]}
    assert ("fsx.amazonaws.com" in services) == (LUSTRE in types)


@pytest.mark.program
def test_the_lustre_link_attaches_policies_to_fsx_s3_role_only() -> None:
    policy = policy_of("training")
    fsx = statement(policy, "FsxLinksTheFileSystemToS3")
    assert fsx["Action"] == ["iam:AttachRolePolicy", "iam:PutRolePolicy"]
    assert fsx["Resource"] == [
        "arn:aws:iam::*:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
    ]
    assert "FsxLinksTheFileSystemToS3" not in [s["Sid"] for s in policy_of("inference")["Statement"]]


@pytest.mark.program
def test_s3_is_scoped_to_the_stacks_bucket_names() -> None:
    plan = shipped_stack("training").plan
    prefixes = sorted(r["inputs"]["bucketPrefix"] for r in plan["resources"] if r["type"] == BUCKET)
    policy = policy_of("training")
    buckets = statement(policy, "TheStacksBuckets")
    assert buckets["Resource"] == [f"arn:aws:s3:::{p}*" for p in prefixes]
    assert all(p.startswith("train-") for p in prefixes)
    assert [s["Sid"] for s in policy["Statement"] if any(a.startswith("s3:") for a in s["Action"])] == [
        "TheStacksBuckets"
    ]


@pytest.mark.program
@pytest.mark.parametrize("stack", list_stacks())
def test_kms_keys_are_created_and_managed_only_with_the_clusters_tag(stack: str) -> None:
    plan = shipped_stack(stack).plan
    cluster = plan["summary"]["cluster"]
    keys = [r for r in plan["resources"] if r["type"] == KMS_KEY]
    assert keys and all(k["inputs"]["tags"]["gpu-clusters/cluster"] == cluster for k in keys)
    policy = policy_of(stack)
    create = statement(policy, "CreateKeysTaggedWithTheCluster")
    assert create["Condition"]["StringEquals"]["aws:RequestTag/gpu-clusters/cluster"] == [cluster]
    managed = statement(policy, "KeysTaggedWithTheCluster")
    assert {"kms:ScheduleKeyDeletion", "kms:PutKeyPolicy", "kms:DescribeKey"} <= set(managed["Action"])
    assert managed["Condition"] == {"StringEquals": {"aws:ResourceTag/gpu-clusters/cluster": [cluster]}}
    unconditioned = [s for s in policy["Statement"] if any(a.startswith("kms:") for a in s["Action"])]
    for s in unconditioned:
        if "Condition" not in s:
            assert s["Sid"] == "TheClustersAliases"
            assert s["Resource"][0].endswith(f":alias/{cluster}-*")
