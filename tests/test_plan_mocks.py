"""The offline mocks give ids and ARNs the shapes AWS documents, the same for the same type and name."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pulumi.runtime.mocks import MockResourceArgs

from blueprint.plan.mocks import ACCOUNT_ID, PlanMocks
from tests.builders import (
    AUTOSCALING_GROUP,
    BUCKET,
    EKS_CLUSTER,
    IAM_ROLE,
    KMS_KEY,
    LAUNCH_TEMPLATE,
    LOG_GROUP,
    SECURITY_GROUP,
    SUBNET,
)

REGION = "us-east-1"
UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
ARN = rf"arn:aws:{{service}}:{REGION}:{ACCOUNT_ID}:"

#: type, name, extra inputs -> (id pattern, ARN pattern), after the formats in AWS's service references.
SHAPES: list[tuple[str, str, dict[str, Any], str, str]] = [
    (KMS_KEY, "eks", {}, UUID4, ARN.format(service="kms") + rf"key/{UUID4}"),
    (IAM_ROLE, "node", {}, r"node", rf"arn:aws:iam::{ACCOUNT_ID}:role/node"),
    (
        "aws:iam/instanceProfile:InstanceProfile",
        "node",
        {},
        "node",
        rf"arn:aws:iam::{ACCOUNT_ID}:instance-profile/node",
    ),
    (
        SECURITY_GROUP,
        "node",
        {},
        r"sg-[0-9a-f]{17}",
        ARN.format(service="ec2") + r"security-group/sg-[0-9a-f]{17}",
    ),
    (
        SUBNET,
        "a",
        {},
        r"subnet-[0-9a-f]{17}",
        ARN.format(service="ec2") + r"subnet/subnet-[0-9a-f]{17}",
    ),
    (
        LAUNCH_TEMPLATE,
        "gpu",
        {},
        r"lt-[0-9a-f]{17}",
        ARN.format(service="ec2") + r"launch-template/lt-[0-9a-f]{17}",
    ),
    (
        "aws:sqs/queue:Queue",
        "interruptions",
        {},
        rf"https://sqs\.{REGION}\.amazonaws\.com/{ACCOUNT_ID}/interruptions",
        ARN.format(service="sqs") + "interruptions",
    ),
    ("aws:sns/topic:Topic", "alerts", {}, ARN.format(service="sns") + "alerts", ARN.format(service="sns") + "alerts"),
    (
        AUTOSCALING_GROUP,
        "gpu",
        {},
        "gpu",
        ARN.format(service="autoscaling") + rf"autoScalingGroup:{UUID4}:autoScalingGroupName/gpu",
    ),
    (EKS_CLUSTER, "eks", {"name": "train"}, "train", ARN.format(service="eks") + "cluster/train"),
    (
        LOG_GROUP,
        "logs",
        {"name": "/aws/eks/train/cluster"},
        "/aws/eks/train/cluster",
        ARN.format(service="logs") + "log-group:/aws/eks/train/cluster",
    ),
    (BUCKET, "data", {"bucket": "train-data"}, "train-data", r"arn:aws:s3:::train-data"),
    (
        "aws:cloudwatch/eventRule:EventRule",
        "rebalance",
        {},
        "rebalance",
        ARN.format(service="events") + "rule/rebalance",
    ),
]


def _new(typ: str, name: str, inputs: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    return PlanMocks(REGION).new_resource(MockResourceArgs(typ, name, dict(inputs), custom=True))


@pytest.mark.parametrize(("typ", "name", "inputs", "id_pattern", "arn_pattern"), SHAPES, ids=[s[0] for s in SHAPES])
def test_ids_and_arns_have_aws_shapes(typ, name, inputs, id_pattern, arn_pattern):
    resource_id, state = _new(typ, name, inputs)
    assert re.fullmatch(id_pattern, resource_id or ""), resource_id
    assert re.fullmatch(arn_pattern, state["arn"]), state["arn"]


@pytest.mark.parametrize(("typ", "name", "inputs"), [s[:3] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_the_same_type_and_name_give_the_same_identity(typ, name, inputs):
    assert _new(typ, name, inputs) == _new(typ, name, inputs)


def test_kms_key_id_matches_its_arn_and_an_alias_resolves_it():
    key_id, key = _new(KMS_KEY, "eks", {})
    assert key["keyId"] == key_id and key["arn"].endswith(f":key/{key_id}")
    alias_id, alias = _new("aws:kms/alias:Alias", "eks", {"name": "alias/eks", "targetKeyId": key_id})
    assert alias_id == "alias/eks"
    assert alias["arn"] == f"arn:aws:kms:{REGION}:{ACCOUNT_ID}:alias/eks"
    assert alias["targetKeyArn"] == key["arn"]


def test_eks_cluster_outputs_look_like_a_real_cluster():
    _, cluster = _new(EKS_CLUSTER, "eks", {"name": "train", "vpcConfig": {"subnetIds": ["subnet-1"]}})
    assert re.fullmatch(r"sg-[0-9a-f]{17}", cluster["vpcConfig"]["clusterSecurityGroupId"])
    assert cluster["vpcConfig"]["subnetIds"] == ["subnet-1"]
    issuer = cluster["identities"][0]["oidcs"][0]["issuer"]
    assert re.fullmatch(rf"https://oidc\.eks\.{REGION}\.amazonaws\.com/id/[0-9A-F]{{32}}", issuer)


def test_ssm_activation_id_is_a_uuid():
    activation_id, _ = _new("aws:ssm/activation:Activation", "a40", {})
    assert re.fullmatch(UUID4, activation_id or "")
