"""The policies around the stack's FSx for Lustre file system (pure, no Pulumi): the CSI controller's IAM policy, the
data bucket's policy, and what FSx's S3 access role may do with the cluster key.

Everything is scoped to this cluster: the controller creates, changes and deletes only file systems tagged for this
cluster and for a claim, the bucket refuses plain HTTP, and FSx may use the key for this bucket only. The component
(`components.storage.lustre`) applies these functions to deploy-time values (account id, partition, ARNs).
"""

from __future__ import annotations

from typing import Any

from components import tags

#: The tag the driver puts on every file system it creates (aws-fsx-csi-driver pkg/cloud/cloud.go,
#: `VolumeNameTagKey` [FSXCSI]).
CSI_VOLUME_TAG = "CSIVolumeName"
#: The role FSx uses to reach a linked S3 bucket, one per file system:
#: `aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_<file system id>`
#: (FSx for Lustre guide, s3-server-side-encryption-support.html).
FSX_S3_ACCESS_ROLE_PATH = "aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
FSX_S3_ACCESS_ROLE_PREFIX = "AWSServiceRoleForFSxS3Access_"
#: The service-linked role FSx itself needs to create file systems (aws-fsx-csi-driver docs/install.md).
FSX_SERVICE = "fsx.amazonaws.com"
#: What S3 does with the key on FSx's behalf (same page); DescribeKey is left out because KMS refuses
#: encryption-context constraints on operations that take no encryption context.
S3_ACCESS_KEY_OPERATIONS = (
    "Encrypt",
    "Decrypt",
    "ReEncryptFrom",
    "ReEncryptTo",
    "GenerateDataKey",
    "GenerateDataKeyWithoutPlaintext",
)
#: With bucket keys on, S3's encryption context is the bucket's ARN under this key (same page).
S3_ENCRYPTION_CONTEXT_KEY = "aws:s3:arn"


def controller_policy(dynamic_provisioning: bool, cluster_name: str, partition: str, account_id: str) -> dict[str, Any]:
    """Least-privilege policy of the CSI controller.

    Static volumes need no AWS call from the driver at all (the node plugin mounts by DNS and mount name), so the
    controller may only describe file systems. With a StorageClass it creates, tags, resizes and deletes them, and
    FSx needs its service-linked roles: the IAM policy the driver documents for that
    (kubernetes-sigs/aws-fsx-csi-driver docs/install.md), instead of the much broader AmazonFSxFullAccess, and
    narrower still. The driver tags every file system it creates with `CSIVolumeName` (the claim's volume name), and
    the StorageClass makes it add this cluster's tag too (`extraTags`; both go into the `CreateFileSystem` request,
    pkg/cloud/cloud.go [FSXCSI]). So it may create and tag only with both tags in the request (`aws:RequestTag`), and
    resize or delete only file systems that carry both (`aws:ResourceTag`): never another cluster's, and never the
    stack's own file system, which carries the cluster tag but no `CSIVolumeName`. The service-linked role it may
    create is this account's, in this partition.
    """
    read = {"Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"}
    if not dynamic_provisioning:
        return {"Version": "2012-10-17", "Statement": [read]}
    request_tag = {
        "StringEquals": {f"aws:RequestTag/{tags.CLUSTER}": cluster_name},
        "Null": {f"aws:RequestTag/{CSI_VOLUME_TAG}": "false"},
    }
    resource_tag = {
        "StringEquals": {f"aws:ResourceTag/{tags.CLUSTER}": cluster_name},
        "Null": {f"aws:ResourceTag/{CSI_VOLUME_TAG}": "false"},
    }
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
                "Resource": f"arn:{partition}:iam::{account_id}:role/{FSX_S3_ACCESS_ROLE_PATH}*",
            },
            {
                "Effect": "Allow",
                "Action": "iam:CreateServiceLinkedRole",
                "Resource": "*",
                "Condition": {"StringLike": {"iam:AWSServiceName": [FSX_SERVICE]}},
            },
            read,
            {
                "Sid": "CreateTaggedForThisCluster",
                "Effect": "Allow",
                "Action": ["fsx:CreateFileSystem", "fsx:TagResource"],
                "Resource": "*",
                "Condition": request_tag,
            },
            {
                "Sid": "ChangeOnlyThisClustersFileSystems",
                "Effect": "Allow",
                "Action": ["fsx:UpdateFileSystem", "fsx:DeleteFileSystem"],
                "Resource": "*",
                "Condition": resource_tag,
            },
        ],
    }


def data_bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """The stack's data bucket: no request over plain HTTP, from anyone."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket_arn, f"{bucket_arn}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


def fsx_s3_access_role_arn(partition: str, account_id: str, file_system_id: str) -> str:
    """The role FSx creates to move one file system's data to and from S3, the grantee of the bucket key grant."""
    return (
        f"arn:{partition}:iam::{account_id}:role/{FSX_S3_ACCESS_ROLE_PATH}{FSX_S3_ACCESS_ROLE_PREFIX}{file_system_id}"
    )


def bucket_key_grant_context(bucket_arn: str) -> dict[str, str]:
    """The grant's constraint: S3 may use the key on FSx's behalf for this bucket only."""
    return {S3_ENCRYPTION_CONTEXT_KEY: bucket_arn}
