"""Who may use the cluster's KMS key (pure, no Pulumi): its key policy, and the identity policies of the two roles that
use it (the control plane for secrets, the EBS CSI controller for volumes).

The key encrypts Kubernetes secrets, node volumes, file systems and the cluster's log groups. Every grant here is
scoped to this account, this cluster's log groups or this key. The component (`components.cluster`) applies these
functions to deploy-time values (account id, partition, key ARN); docs/security.md lists what each statement allows.
"""

from __future__ import annotations

import hashlib
from typing import Any

from components.planning.key_domains import KEY_DOMAINS, KeyDomain
from components.planning.log_groups import cluster_log_group_arns

#: The EC2 Auto Scaling service-linked role: it launches the nodes, so the key that encrypts their volumes must let it
#: in (https://docs.aws.amazon.com/autoscaling/ec2/userguide/key-policy-requirements-EBS-encryption.html). Each stack
#: has its own, `AWSServiceRoleForAutoScaling_<suffix>`, and names it on every group (docs/network-and-cluster.md,
#: "The Auto Scaling service-linked role").
AUTOSCALING_SERVICE = "autoscaling.amazonaws.com"
AUTOSCALING_ROLE_NAME = "AWSServiceRoleForAutoScaling"
AUTOSCALING_ROLE_PATH = f"/aws-service-role/{AUTOSCALING_SERVICE}/"
#: The name IAM gives each service's service-linked role the stacks create, before `_<custom suffix>`.
SERVICE_LINKED_ROLE_PREFIXES = {AUTOSCALING_SERVICE: AUTOSCALING_ROLE_NAME}
#: An IAM role name is 1-64 of `[\w+=,.@-]`, and so is a service-linked role's custom suffix (IAM API reference,
#: CreateServiceLinkedRole `CustomSuffix` and `RoleName`); the service's prefix and `_` come first, leaving 35.
ROLE_NAME_LIMIT = 64
AUTOSCALING_SUFFIX_LIMIT = ROLE_NAME_LIMIT - len(AUTOSCALING_ROLE_NAME) - 1
#: What a principal that creates encrypted EBS volumes does with the key: the Auto Scaling key-policy page above and
#: the EBS CSI driver's custom-key policy (EKS user guide, ebs-csi.html) list the same five.
EBS_VOLUME_KEY_ACTIONS = ("kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey")
#: What CloudWatch Logs does with the cluster key for the cluster's log groups (CloudWatch Logs user guide, "Encrypt log
#: data in CloudWatch Logs using AWS KMS", step 2, key policy).
LOGS_KEY_ACTIONS = ("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*")
#: What the control plane does with the key for secrets envelope encryption (as terraform-aws-eks grants it).
CONTROL_PLANE_KEY_ACTIONS = ("kms:Encrypt", "kms:Decrypt", "kms:ListGrants", "kms:DescribeKey")
#: The grant calls of the EBS CSI controller's custom-key policy (EKS user guide, ebs-csi.html).
EBS_CSI_GRANT_ACTIONS = ("kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant")


def grants_for_aws_resources_only() -> dict[str, Any]:
    """The condition on grant calls: only grants for AWS resources (volumes EC2 attaches), never for a principal of
    the caller's choosing."""
    return {"Bool": {"kms:GrantIsForAWSResource": True}}


def autoscaling_role_suffix(cluster_name: str, region: str) -> str:
    """The stack's custom suffix, `<cluster>.<region>`: IAM names are account-wide and EKS cluster names only
    Region-wide, so two stacks naming their clusters alike in two Regions of one account still get two roles. A `_`
    of the cluster name is written `.`: the provider reads the suffix back as what follows the role name's only `_`
    (terraform-provider-aws, iam/service_linked_role.go `DecodeServiceLinkedRoleID`), and a second `_` would read as
    no suffix and replace the role on every update. A name too long for `AUTOSCALING_SUFFIX_LIMIT` keeps its start
    and gains 8 hex digits of its SHA-256, so every EKS cluster name (up to 100 characters) has a role and two long
    names that start alike still get two."""
    name = cluster_name.replace("_", ".")
    room = AUTOSCALING_SUFFIX_LIMIT - len(region) - 1
    if len(name) > room:
        digest = hashlib.sha256(cluster_name.encode()).hexdigest()[:8]
        name = f"{name[: room - len(digest) - 1].rstrip('.')}.{digest}"
    return f"{name}.{region}"


def autoscaling_role_name(cluster_name: str, region: str) -> str:
    """`AWSServiceRoleForAutoScaling_<cluster>.<region>`: the name IAM gives the role created with the suffix."""
    return f"{AUTOSCALING_ROLE_NAME}_{autoscaling_role_suffix(cluster_name, region)}"


def autoscaling_role_description(cluster_name: str, region: str) -> str:
    """What the role says it is for; preflight tells the stack's role from one made otherwise by it."""
    return f"EC2 Auto Scaling groups of EKS cluster {cluster_name} ({region})"


def autoscaling_role_arn(partition: str, account_id: str, cluster_name: str, region: str) -> str:
    """The stack's Auto Scaling service-linked role, which the key policy names and every group uses."""
    return f"arn:{partition}:iam::{account_id}:role{AUTOSCALING_ROLE_PATH}{autoscaling_role_name(cluster_name, region)}"


def cluster_key_policy(
    account_id: str, partition: str, region: str, cluster_name: str, autoscaling: str
) -> dict[str, Any]:
    """Key policy of the one cluster key (`cluster.encryption.keyPerDomain` off): it serves every domain, so it holds
    every statement of `domain_key_policy`."""
    return domain_key_policy(frozenset(KEY_DOMAINS), account_id, partition, region, cluster_name, autoscaling)


def domain_key_policy(
    serves: frozenset[KeyDomain], account_id: str, partition: str, region: str, cluster_name: str, autoscaling: str
) -> dict[str, Any]:
    """Key policy of a key that encrypts the domains `serves` (`components.planning.key_domains`): the account
    administers the key through IAM (the default key policy,
    https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html); on the key of `cluster` data, the
    EC2 Auto Scaling service-linked role the stack's groups use (`autoscaling`, its ARN) may use it, which it must to
    launch nodes whose EBS volumes use this key; on the key of `logs`, CloudWatch Logs of the stack's region may use it
    for this cluster's log groups only (encryption context `aws:logs:arn`, `components.planning.log_groups`). The data
    domains need no statement of their own: FSx, EFS and S3 use the key on behalf of the principal that calls them,
    through the account's IAM statement, and FSx's S3 role through a grant (`components.storage.lustre`)."""
    statements = [
        {
            "Sid": "AccountAdministersKeyThroughIam",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
            "Action": "kms:*",
            "Resource": "*",
        }
    ]
    if "cluster" in serves:
        statements += autoscaling_statements(autoscaling)
    if "logs" in serves:
        statements.append(logs_statement(account_id, partition, region, cluster_name))
    return {"Version": "2012-10-17", "Statement": statements}


def autoscaling_statements(autoscaling: str) -> list[dict[str, Any]]:
    """The Auto Scaling service-linked role uses the key for the EBS volumes of the nodes it launches, and creates
    grants for them (attached volumes only)."""
    return [
        {
            "Sid": "AutoScalingUsesKeyForEncryptedVolumes",
            "Effect": "Allow",
            "Principal": {"AWS": autoscaling},
            "Action": list(EBS_VOLUME_KEY_ACTIONS),
            "Resource": "*",
        },
        {
            "Sid": "AutoScalingGrantsForAttachedVolumes",
            "Effect": "Allow",
            "Principal": {"AWS": autoscaling},
            "Action": "kms:CreateGrant",
            "Resource": "*",
            "Condition": grants_for_aws_resources_only(),
        },
    ]


def logs_statement(account_id: str, partition: str, region: str, cluster_name: str) -> dict[str, Any]:
    """CloudWatch Logs of the stack's region uses the key for this cluster's log groups only."""
    return {
        "Sid": "CloudWatchLogsEncryptsTheClustersLogGroups",
        "Effect": "Allow",
        "Principal": {"Service": f"logs.{region}.amazonaws.com"},
        "Action": list(LOGS_KEY_ACTIONS),
        "Resource": "*",
        "Condition": {
            "ArnEquals": {
                "kms:EncryptionContext:aws:logs:arn": cluster_log_group_arns(
                    partition, region, account_id, cluster_name
                )
            }
        },
    }


def control_plane_key_policy(key_arn: str) -> dict[str, Any]:
    """The cluster role's inline policy: the control plane encrypts and decrypts secrets with this key only."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": list(CONTROL_PLANE_KEY_ACTIONS), "Resource": key_arn}],
    }


def ebs_csi_key_policy(key_arn: str) -> dict[str, Any]:
    """The EBS CSI controller's inline policy: create volumes encrypted with this key only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": list(EBS_CSI_GRANT_ACTIONS),
                "Resource": key_arn,
                "Condition": grants_for_aws_resources_only(),
            },
            {"Effect": "Allow", "Action": list(EBS_VOLUME_KEY_ACTIONS), "Resource": key_arn},
        ],
    }
