"""Node identity (role, instance profile, EC2_LINUX access entry) and the Pod Identity role helper."""

from __future__ import annotations

import functools
import json
from typing import Any

import pulumi
import pytest

from blueprint.plan.runner import ProgramRun, run_mocked
from components.identity import NODE_MANAGED_POLICIES, NodeIdentity, PodIdentityRoles
from tests.builders import ACCESS_ENTRY, IAM_ROLE, ROLE_POLICY, ROLE_POLICY_ATTACHMENT

pytestmark = pytest.mark.program

TAGS = {"gpu-clusters/cluster": "demo"}
ATTACHMENT = ROLE_POLICY_ATTACHMENT
CLUSTER_ARN = "arn:aws:eks:us-east-1:123456789012:cluster/demo"


POOLS = ("system", "train", "infer")


def build_nodes() -> tuple[ProgramRun, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def program() -> None:
        nodes = NodeIdentity("demo", POOLS, pulumi.Output.from_input("demo"), pulumi.Output.from_input("aws"), TAGS)

        def record(pool: str, values: dict[str, Any]) -> None:
            seen[pool] = values

        for pool in POOLS:
            pulumi.Output.all(
                role=nodes.roles[pool].arn,
                role_arn=nodes.role_arns[pool],
                profile=nodes.instance_profiles[pool].arn,
                profile_arn=nodes.instance_profile_arns[pool],
            ).apply(functools.partial(record, pool))

    return run_mocked(program), seen


def test_each_pool_gets_its_own_node_role_assumed_by_ec2_with_the_node_policies() -> None:
    run, _ = build_nodes()
    assert sorted(r.name for r in run.of_type(IAM_ROLE)) == sorted(f"demo-{pool}-node" for pool in POOLS)
    for pool in POOLS:
        role = run.one(IAM_ROLE, f"demo-{pool}-node")
        assert role.inputs["tags"]["gpu-clusters/pool"] == pool
        trust = json.loads(role.inputs["assumeRolePolicy"])
        assert trust["Statement"] == [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ]
        attached = {a.inputs["policyArn"] for a in run.of_type(ROLE_POLICY_ATTACHMENT) if a.inputs["role"] == role.name}
        assert attached == {
            "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
            "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
            "arn:aws:iam::aws:policy/AmazonSSMManagedEC2InstanceDefaultPolicy",
        }
    assert len(run.of_type(ROLE_POLICY_ATTACHMENT)) == len(NODE_MANAGED_POLICIES) * len(POOLS)


def test_the_node_role_cannot_manage_the_accounts_network_interfaces() -> None:
    """The VPC CNI's rights are on its own Pod Identity role (tests/test_managed_addons.py), not on the role a pod
    that reaches the instance credentials would get."""
    attached = {a.inputs["policyArn"] for a in build_nodes()[0].of_type(ROLE_POLICY_ATTACHMENT)}
    assert not any(arn.endswith("/AmazonEKS_CNI_Policy") for arn in attached)


def test_nodes_get_the_ssm_agents_minimum_not_every_parameter_of_the_account() -> None:
    """`AmazonSSMManagedInstanceCore` grants `ssm:GetParameter*` on every parameter; Session Manager needs only the
    agent's core calls."""
    attached = {a.inputs["policyArn"] for a in build_nodes()[0].of_type(ATTACHMENT)}
    assert not any(arn.endswith("/AmazonSSMManagedInstanceCore") for arn in attached)


def test_one_instance_profile_and_ec2_linux_access_entry_per_pool_role() -> None:
    run, seen = build_nodes()
    profiles = {p.name: p for p in run.of_type("aws:iam/instanceProfile:InstanceProfile")}
    entries = {e.inputs["principalArn"]: e for e in run.of_type(ACCESS_ENTRY)}
    assert len(profiles) == len(entries) == len(POOLS)
    for pool in POOLS:
        assert profiles[f"demo-{pool}-node"].inputs["role"] == f"demo-{pool}-node"
        entry = entries[seen[pool]["role"]]
        assert entry.inputs["type"] == "EC2_LINUX"
        assert entry.inputs["clusterName"] == "demo"
        # What the pool reads resolves to its own role and profile (after the access entry exists).
        assert seen[pool]["role_arn"] == seen[pool]["role"]
        assert seen[pool]["profile_arn"] == seen[pool]["profile"]
    assert len({seen[pool]["role"] for pool in POOLS}) == len(POOLS)


def build_pod_roles(calls: list[tuple[str, str, str, str | None, list[str]]]) -> tuple[ProgramRun, PodIdentityRoles]:
    holder: dict[str, PodIdentityRoles] = {}

    def program() -> None:
        roles = PodIdentityRoles(
            pulumi.Output.from_input("demo"),
            "demo",
            pulumi.Output.from_input("aws"),
            TAGS,
            pulumi.Output.from_input("123456789012"),
            pulumi.Output.from_input(CLUSTER_ARN),
        )
        holder["roles"] = roles
        parent = pulumi.ComponentResource("test:index:Owner", "owner")
        for name, namespace, account, policy, managed in calls:
            roles(name, namespace, account, policy, managed, parent)

    return run_mocked(program), holder["roles"]


AUTOSCALER_POLICY = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "autoscaling:Describe*", "Resource": "*"}]}
)


def test_pod_identity_role_trusts_only_its_service_account_in_this_cluster() -> None:
    run, _ = build_pod_roles([("autoscaler", "kube-system", "cluster-autoscaler", AUTOSCALER_POLICY, [])])
    trust = json.loads(run.one(IAM_ROLE, "demo-autoscaler").inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert statement["Condition"] == {
        "StringEquals": {
            "aws:SourceAccount": "123456789012",
            "aws:RequestTag/eks-cluster-name": "demo",
            "aws:RequestTag/eks-cluster-arn": CLUSTER_ARN,
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "cluster-autoscaler",
        }
    }


def test_pod_identity_role_gets_its_inline_policy_and_association() -> None:
    run, roles = build_pod_roles([("autoscaler", "kube-system", "cluster-autoscaler", AUTOSCALER_POLICY, [])])
    inline = run.one(ROLE_POLICY, "demo-autoscaler")
    assert json.loads(inline.inputs["policy"]) == json.loads(AUTOSCALER_POLICY)
    association = run.one("aws:eks/podIdentityAssociation:PodIdentityAssociation", "demo-autoscaler")
    assert association.inputs["clusterName"] == "demo"
    assert association.inputs["namespace"] == "kube-system"
    assert association.inputs["serviceAccount"] == "cluster-autoscaler"
    assert association.inputs["roleArn"] == "arn:aws:iam::123456789012:role/demo-autoscaler"
    assert "disableSessionTags" not in association.inputs  # the trust conditions need the session tags
    assert set(roles.associations) == {"autoscaler"}
    parent = run.one("test:index:Owner", "owner").urn
    assert run.one(IAM_ROLE, "demo-autoscaler").parent == parent


def test_managed_policies_by_path_or_arn_and_no_inline_policy_when_none() -> None:
    run, _ = build_pod_roles(
        [
            (
                "ebs-csi",
                "kube-system",
                "ebs-csi-controller-sa",
                None,
                ["service-role/AmazonEBSCSIDriverPolicy", "arn:aws:iam::123456789012:policy/custom"],
            )
        ]
    )
    assert run.of_type(ROLE_POLICY) == []
    attached = {a.inputs["policyArn"] for a in run.of_type(ROLE_POLICY_ATTACHMENT)}
    assert attached == {
        "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy",
        "arn:aws:iam::123456789012:policy/custom",
    }


def test_a_role_name_is_used_once() -> None:
    with pytest.raises(ValueError, match="already exists"):
        build_pod_roles(
            [
                ("autoscaler", "kube-system", "cluster-autoscaler", None, []),
                ("autoscaler", "kube-system", "other", None, []),
            ]
        )
