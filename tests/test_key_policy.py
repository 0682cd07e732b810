"""Who may use the cluster's KMS key: the key policy and the key users' policies, planned without Pulumi."""

from __future__ import annotations

from typing import Any

import pytest

from components.planning.key_policy import (
    AUTOSCALING_SUFFIX_LIMIT,
    autoscaling_role_arn,
    autoscaling_role_name,
    cluster_key_policy,
    control_plane_key_policy,
    ebs_csi_key_policy,
)

ACCOUNT = "210987654321"
KEY_ARN = f"arn:aws-us-gov:kms:us-gov-west-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def policy(account: str, partition: str, region: str, cluster: str) -> dict[str, Any]:
    """The key policy of `cluster`, naming its own Auto Scaling role as the component passes it."""
    role = autoscaling_role_arn(partition, account, cluster, region)
    return cluster_key_policy(account, partition, region, cluster, role)


def by_sid(policy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in policy["Statement"]}


def test_the_account_administers_the_key_through_iam_in_its_own_partition() -> None:
    statement = by_sid(policy(ACCOUNT, "aws-us-gov", "us-gov-west-1", "lab"))["AccountAdministersKeyThroughIam"]
    assert statement["Principal"] == {"AWS": f"arn:aws-us-gov:iam::{ACCOUNT}:root"}
    assert (statement["Effect"], statement["Action"], statement["Resource"]) == ("Allow", "kms:*", "*")


def test_auto_scaling_uses_the_key_for_volumes_and_grants_only_for_aws_resources() -> None:
    statements = by_sid(policy(ACCOUNT, "aws-cn", "cn-north-1", "lab"))
    role = (
        f"arn:aws-cn:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/"
        "AWSServiceRoleForAutoScaling_lab.cn-north-1"
    )
    use, grants = statements["AutoScalingUsesKeyForEncryptedVolumes"], statements["AutoScalingGrantsForAttachedVolumes"]
    assert use["Principal"] == grants["Principal"] == {"AWS": role}
    assert use["Action"] == ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"]
    assert "Condition" not in use
    assert grants["Action"] == "kms:CreateGrant"
    assert grants["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": True}}


def test_cloudwatch_logs_of_the_region_may_use_the_key_for_this_clusters_two_groups_only() -> None:
    statement = by_sid(policy(ACCOUNT, "aws", "eu-west-1", "lab"))["CloudWatchLogsEncryptsTheClustersLogGroups"]
    assert statement["Principal"] == {"Service": "logs.eu-west-1.amazonaws.com"}
    assert statement["Condition"] == {
        "ArnEquals": {
            "kms:EncryptionContext:aws:logs:arn": [
                f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:/aws/eks/lab/cluster",
                f"arn:aws:logs:eu-west-1:{ACCOUNT}:log-group:/aws/vpc/lab/flow-logs",
            ]
        }
    }
    assert not any(action in statement["Action"] for action in ("kms:*", "kms:CreateGrant", "kms:PutKeyPolicy"))


def test_the_key_policy_names_nobody_else() -> None:
    document = policy(ACCOUNT, "aws", "us-east-1", "lab")
    assert [s["Sid"] for s in document["Statement"]] == [
        "AccountAdministersKeyThroughIam",
        "AutoScalingUsesKeyForEncryptedVolumes",
        "AutoScalingGrantsForAttachedVolumes",
        "CloudWatchLogsEncryptsTheClustersLogGroups",
    ]
    assert all(s["Effect"] == "Allow" for s in document["Statement"])
    assert all(s["Principal"] != "*" and s["Principal"] != {"AWS": "*"} for s in document["Statement"])


def test_each_call_returns_its_own_document() -> None:
    """Callers may change what they get without changing the next cluster's policy."""
    first = policy(ACCOUNT, "aws", "us-east-1", "lab")
    first["Statement"][2]["Condition"]["Bool"]["kms:GrantIsForAWSResource"] = False
    second = policy(ACCOUNT, "aws", "us-east-1", "lab")
    assert second["Statement"][2]["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": True}}


def test_the_auto_scaling_role_name_fits_iam_at_the_suffix_limit() -> None:
    """IAM role names and custom suffixes are at most 64 characters (CreateServiceLinkedRole); 35 are left."""
    assert AUTOSCALING_SUFFIX_LIMIT == 35
    longest = "c" * (AUTOSCALING_SUFFIX_LIMIT - len(".us-east-1"))
    assert len(autoscaling_role_name(longest, "us-east-1")) == 64


@pytest.mark.parametrize("region", ["us-east-1", "ap-southeast-1"])
def test_a_cluster_name_too_long_for_the_role_keeps_its_start_and_gains_a_hash(region: str) -> None:
    """Every EKS cluster name (up to 100 characters) gets a role within IAM's 64, and long names alike get two."""
    first, second = "research-cluster-" + "a" * 83, "research-cluster-" + "b" * 83
    names = {autoscaling_role_name(first, region), autoscaling_role_name(second, region)}
    assert len(names) == 2 and all(len(n) <= 64 and n.count("_") == 1 for n in names)
    assert all(n.startswith("AWSServiceRoleForAutoScaling_research") and n.endswith(f".{region}") for n in names)
    fits = "c" * (AUTOSCALING_SUFFIX_LIMIT - len(region) - 1)
    assert autoscaling_role_name(fits, region) == f"AWSServiceRoleForAutoScaling_{fits}.{region}"  # unchanged


def test_an_underscore_of_the_cluster_name_never_reaches_the_suffix() -> None:
    """The provider reads the suffix back after the role name's only `_`: a second would replace the role."""
    assert autoscaling_role_name("gpu_train", "us-east-1") == "AWSServiceRoleForAutoScaling_gpu.train.us-east-1"
    assert autoscaling_role_name("gpu_train", "us-east-1").count("_") == 1


def test_the_control_plane_encrypts_secrets_with_this_key_only() -> None:
    (statement,) = control_plane_key_policy(KEY_ARN)["Statement"]
    assert statement["Resource"] == KEY_ARN
    assert statement["Action"] == ["kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey"]


@pytest.mark.parametrize("key_arn", [KEY_ARN, "arn:aws:kms:us-east-1:123456789012:key/other"])
def test_the_ebs_csi_controller_uses_this_key_only_and_grants_only_for_aws_resources(key_arn: str) -> None:
    grants, data = ebs_csi_key_policy(key_arn)["Statement"]
    assert grants["Resource"] == data["Resource"] == key_arn
    assert grants["Action"] == ["kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"]
    assert grants["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": True}}
    assert "Condition" not in data
    assert "kms:CreateGrant" not in data["Action"]  # a grant is never made outside the condition
