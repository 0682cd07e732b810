"""The FSx CSI controller's policy, the data bucket's policy and the bucket key grant, planned without Pulumi."""

from __future__ import annotations

from typing import Any

from components.planning.lustre_policies import (
    S3_ACCESS_KEY_OPERATIONS,
    bucket_key_grant_context,
    controller_policy,
    data_bucket_policy,
    fsx_s3_access_role_arn,
)

ACCOUNT = "210987654321"
BUCKET = "arn:aws:s3:::lab-scratch-data-20260101"


def dynamic(partition: str = "aws") -> list[dict[str, Any]]:
    return controller_policy(True, "lab", partition, ACCOUNT)["Statement"]


def test_static_volumes_let_the_controller_describe_file_systems_only() -> None:
    assert controller_policy(False, "lab", "aws", ACCOUNT)["Statement"] == [
        {"Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"}
    ]


def test_the_controller_creates_and_tags_only_with_this_clusters_tag_and_a_claims_volume_tag() -> None:
    (create,) = [s for s in dynamic() if s.get("Sid") == "CreateTaggedForThisCluster"]
    assert create["Action"] == ["fsx:CreateFileSystem", "fsx:TagResource"]
    assert create["Condition"] == {
        "StringEquals": {"aws:RequestTag/gpu-clusters/cluster": "lab"},
        "Null": {"aws:RequestTag/CSIVolumeName": "false"},
    }


def test_the_controller_changes_only_file_systems_of_this_cluster_made_for_a_claim() -> None:
    """The stack's own file system carries the cluster tag but no `CSIVolumeName`, so it is out of reach."""
    (change,) = [s for s in dynamic() if s.get("Sid") == "ChangeOnlyThisClustersFileSystems"]
    assert change["Action"] == ["fsx:UpdateFileSystem", "fsx:DeleteFileSystem"]
    assert change["Condition"] == {
        "StringEquals": {"aws:ResourceTag/gpu-clusters/cluster": "lab"},
        "Null": {"aws:ResourceTag/CSIVolumeName": "false"},
    }


def actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


def test_every_fsx_write_is_conditioned_and_iam_calls_are_scoped_to_fsx() -> None:
    statements = dynamic("aws-cn")
    writes = [s for s in statements if any(a.startswith("fsx:") and a != "fsx:DescribeFileSystems" for a in actions(s))]
    assert writes and all("Condition" in s for s in writes)
    iam = [s for s in statements if any(a.startswith("iam:") for a in actions(s))]
    assert [(s["Resource"], s.get("Condition")) for s in iam] == [
        (f"arn:aws-cn:iam::{ACCOUNT}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*", None),
        ("*", {"StringLike": {"iam:AWSServiceName": ["fsx.amazonaws.com"]}}),
    ]


def test_the_data_bucket_refuses_plain_http_for_the_bucket_and_its_objects() -> None:
    (statement,) = data_bucket_policy(BUCKET)["Statement"]
    assert (statement["Effect"], statement["Principal"], statement["Action"]) == ("Deny", "*", "s3:*")
    assert statement["Resource"] == [BUCKET, f"{BUCKET}/*"]
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_fsx_uses_the_key_through_its_per_file_system_role_for_this_bucket_only() -> None:
    assert fsx_s3_access_role_arn("aws-us-gov", ACCOUNT, "fs-0123456789abcdef0") == (
        f"arn:aws-us-gov:iam::{ACCOUNT}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
        "AWSServiceRoleForFSxS3Access_fs-0123456789abcdef0"
    )
    assert bucket_key_grant_context(BUCKET) == {"aws:s3:arn": BUCKET}
    # KMS refuses encryption-context constraints on operations without an encryption context, such as DescribeKey.
    assert "DescribeKey" not in S3_ACCESS_KEY_OPERATIONS
    assert {"Encrypt", "Decrypt", "GenerateDataKey"} <= set(S3_ACCESS_KEY_OPERATIONS)
