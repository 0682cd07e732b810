"""The security controls of docs/security.md, as every shipped stack registers them (its offline plan)."""

from __future__ import annotations

import json
from typing import Any

from components.planning.management import node_role_suffix
from tests.builders import EKS_CLUSTER, IAM_ROLE, LAUNCH_TEMPLATE, LOG_GROUP, ROLE_POLICY_ATTACHMENT

POD_IDENTITY = "pods.eks.amazonaws.com"


def of_type(plan: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in plan["resources"] if r["type"] == kind]


def one(plan: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = of_type(plan, kind)
    return found


def test_the_vpc_records_every_flow_and_its_default_group_is_closed(each_shipped_plan: dict[str, Any]) -> None:
    plan = each_shipped_plan
    vpc = one(plan, "aws:ec2/vpc:Vpc")
    flow = one(plan, "aws:ec2/flowLog:FlowLog")["inputs"]
    assert flow["vpcId"] == vpc["id"] and flow["trafficType"] == "ALL"
    group = one(plan, "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")["inputs"]
    assert group["vpcId"] == vpc["id"] and group["ingress"] == [] and group["egress"] == []


def test_every_log_group_is_encrypted_and_kept_a_year(each_shipped_plan: dict[str, Any]) -> None:
    groups = of_type(each_shipped_plan, LOG_GROUP)
    cluster = each_shipped_plan["summary"]["cluster"]
    assert {g["inputs"]["name"] for g in groups} == {f"/aws/eks/{cluster}/cluster", f"/aws/vpc/{cluster}/flow-logs"}
    for group in groups:
        assert group["inputs"]["kmsKeyId"].startswith("arn:aws:kms:")
        assert group["inputs"]["retentionInDays"] == 365


def test_the_cluster_logs_everything_into_its_own_group_and_has_no_implicit_admin(
    each_shipped_plan: dict[str, Any],
) -> None:
    plan = each_shipped_plan
    cluster = one(plan, EKS_CLUSTER)
    assert cluster["inputs"]["enabledClusterLogTypes"] == [
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    ]
    assert cluster["inputs"]["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] is False
    log_group = next(g for g in of_type(plan, LOG_GROUP) if g["name"].endswith("-control-plane"))
    assert log_group["urn"] in cluster["options"]["dependsOn"]
    # the shipped stacks list no admins: the one association is the deployer's
    (deployer,) = of_type(plan, "aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert deployer["name"].endswith("-deployer")
    assert deployer["inputs"]["policyArn"].endswith("/AmazonEKSClusterAdminPolicy")


def test_nodes_keep_imds_at_hop_limit_1_and_carry_no_broad_ssm_policy(each_shipped_plan: dict[str, Any]) -> None:
    plan = each_shipped_plan
    for template in of_type(plan, LAUNCH_TEMPLATE):
        assert template["inputs"]["metadataOptions"]["httpTokens"] == "required"
        assert template["inputs"]["metadataOptions"]["httpPutResponseHopLimit"] == 1
    cluster = plan["summary"]["cluster"]
    pools = [p for p in plan["summary"]["nodePools"] if p["kind"] == "aws"]
    assert pools
    for pool in pools:
        node_policies = [
            a["inputs"]["policyArn"]
            for a in of_type(plan, ROLE_POLICY_ATTACHMENT)
            if a["inputs"]["role"] == f"{cluster}-{pool['name']}-{node_role_suffix(pool['management'])}"
        ]
        assert any(p.endswith("/AmazonSSMManagedEC2InstanceDefaultPolicy") for p in node_policies), pool["name"]
        assert not any(p.endswith("/AmazonSSMManagedInstanceCore") for p in node_policies)


def test_every_pod_identity_role_names_this_account_and_this_cluster(each_shipped_plan: dict[str, Any]) -> None:
    plan = each_shipped_plan
    roles = [
        r for r in of_type(plan, IAM_ROLE) if POD_IDENTITY in json.dumps(json.loads(r["inputs"]["assumeRolePolicy"]))
    ]
    assert roles
    for role in roles:
        (statement,) = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
        conditions = statement["Condition"]["StringEquals"]
        assert conditions["aws:SourceAccount"] == "123456789012"
        assert conditions["aws:RequestTag/eks-cluster-arn"].endswith(f":cluster/{plan['summary']['cluster']}")


def test_queues_and_secrets(each_shipped_plan: dict[str, Any]) -> None:
    plan = each_shipped_plan
    for queue in of_type(plan, "aws:sqs/queue:Queue"):
        assert queue["inputs"]["sqsManagedSseEnabled"] is True
    assert "offline-activation-code" not in json.dumps(plan)
