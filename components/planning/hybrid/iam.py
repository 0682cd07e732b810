"""Hybrid nodes' identity: the IAM role's trust and policies, its access entry type, and the SSM activation that
registers the servers (pure, no Pulumi).

Invariant: every permission is scoped to this cluster (its ARN, its activations' tag, its trust anchor).
Facts: docs/sources.md (aws-gpu-facts.md §5f, [EKSUG] hybrid-nodes-creds).
The design: docs/operations.md#what-the-cluster-side-builds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from components.config import NodePool

#: Access entry type for the hybrid nodes role ([BC] §5e; [EKSUG] hybrid-nodes-cluster-prep).
ACCESS_ENTRY_TYPE = "HYBRID_LINUX"
#: Managed policies of the hybrid nodes role ([EKSUG] hybrid-nodes-creds, facts §5f): ECR pulls for both
#: providers, the SSM agent's core permissions for SSM only.
ECR_PULL_ONLY_POLICY = "AmazonEC2ContainerRegistryPullOnly"
SSM_CORE_POLICY = "AmazonSSMManagedInstanceCore"

#: Parameter Store reads the hybrid role refuses, whatever a managed policy allows. `AmazonSSMManagedInstanceCore`
#: (required for SSM hybrid activations, [EKSUG] hybrid-nodes-creds) allows `ssm:GetParameter` and
#: `ssm:GetParameters` on every parameter of the account
#: (https://docs.aws.amazon.com/aws-managed-policy/latest/reference/AmazonSSMManagedInstanceCore.html), which anyone
#: with the servers' credentials could read. Neither nodeadm nor joining needs one: nodeadm's only SSM calls are
#: `DescribeInstanceInformation` and `DeregisterManagedInstance` (aws/eks-hybrid internal/ssm/aws.go, for
#: `nodeadm uninstall`), and the agent registers with the activation code and id, not a parameter. The wildcard
#: also covers `GetParametersByPath` and `GetParameterHistory`.
PARAMETER_READS_DENIED = "ssm:GetParameter*"

#: The activation tag the role's `ssm:DeregisterManagedInstance` permission is conditioned on, so a node can only
#: deregister instances of this cluster's activations (default key of AWS's template, facts §5f).
SSM_DEREGISTER_TAG_KEY = "EKSClusterARN"

#: IAM Roles Anywhere sessions: 1 h default, 12 h max, and the role's MaxSessionDuration must exceed the profile's
#: `durationSeconds` (facts §5f). We keep the default session and give the role twice that.
ROLES_ANYWHERE_SESSION_SECONDS = 3600
ROLES_ANYWHERE_ROLE_MAX_SESSION_SECONDS = 2 * ROLES_ANYWHERE_SESSION_SECONDS

Provider = Literal["ssm", "iam-roles-anywhere"]


def registration_limit(pool: NodePool) -> int:
    """How many servers the pool's SSM activation admits: the configured limit, else the node count plus
    `spareRegistrations`.

    Close to the pool's size, so a leaked activation code registers few machines beyond it; the spares let a
    replacement server join without re-issuing. SSM counts registrations, and a deregistered server cannot register
    again with the activation it used ([SSMDEREG]: SSM DeregisterManagedInstance), so rejoins re-issue it
    (`activation_name`).
    """
    if pool.credentials.activation_limit is not None:
        return pool.credentials.activation_limit
    if pool.nodes is None:
        raise ValueError(f"hybrid pool {pool.name!r} has no node count")
    return pool.nodes + pool.credentials.spare_registrations


def activation_name(prefix: str, pool: NodePool) -> str:
    """The SSM activation's name: the pool's prefix, with `-r<n>` from revision 2 on (`activationRevision`).

    Every argument of an activation forces a new one (it has no update; [SSMDEREG]: terraform-provider-aws
    `aws_ssm_activation`, all arguments ForceNew), so bumping the revision re-issues the code and expiry on the
    next `pulumi up`; revision 1 keeps the name stacks were created with.
    """
    revision = pool.credentials.activation_revision
    return prefix if revision == 1 else f"{prefix}-r{revision}"


def activation_expiry(now: datetime, hours: int) -> str:
    """The activation's `expirationDate`: `now` plus the configured hours, RFC 3339 in UTC (SSM CreateActivation).

    `now` must carry a timezone: a naive datetime would silently shift the expiry by the machine's UTC offset.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("activation_expiry needs a timezone-aware datetime (e.g. datetime.now(UTC))")
    expires = (now + timedelta(hours=hours)).astimezone(UTC)
    return expires.strftime("%Y-%m-%dT%H:%M:%SZ")


def managed_policy_names(provider: Provider) -> tuple[str, ...]:
    """AWS managed policies the hybrid nodes role carries, per credential provider ([EKSUG] hybrid-nodes-creds)."""
    if provider == "ssm":
        return (SSM_CORE_POLICY, ECR_PULL_ONLY_POLICY)
    return (ECR_PULL_ONLY_POLICY,)


def ssm_trust_policy(account_id: str, region: str, partition: str = "aws") -> dict[str, Any]:
    """Trust for SSM hybrid activations: `ssm.amazonaws.com` may assume the role, for this account's SSM only.

    The source-account/source-ARN conditions are the confused-deputy guard of AWS's SSM hybrid service role
    (https://docs.aws.amazon.com/systems-manager/latest/userguide/hybrid-multicloud-service-role.html), which
    the peers' hybrid roles leave out.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ssm.amazonaws.com"},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account_id},
                    "ArnEquals": {"aws:SourceArn": f"arn:{partition}:ssm:{region}:{account_id}:*"},
                },
            }
        ],
    }


def roles_anywhere_trust_policy(trust_anchor_arn: str) -> dict[str, Any]:
    """Trust for IAM Roles Anywhere (facts §5f, [EKSUG] hybrid-nodes-creds).

    Only sessions vended through this pool's trust anchor (`aws:SourceArn`) may assume the role, and the role
    session name must be the certificate's CN, which is what nodeadm registers as the node name: a certificate
    cannot impersonate another node.
    """
    source = {"ArnEquals": {"aws:SourceArn": trust_anchor_arn}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "rolesanywhere.amazonaws.com"},
                "Action": ["sts:TagSession", "sts:SetSourceIdentity"],
                "Condition": source,
            },
            {
                "Effect": "Allow",
                "Principal": {"Service": "rolesanywhere.amazonaws.com"},
                "Action": "sts:AssumeRole",
                "Condition": {
                    **source,
                    "StringEquals": {"sts:RoleSessionName": "${aws:PrincipalTag/x509Subject/CN}"},
                },
            },
        ],
    }


def hybrid_node_policy(cluster_arn: str, provider: Provider) -> dict[str, Any]:
    """The inline policy of the hybrid nodes role, scoped to this cluster.

    - `eks:DescribeCluster` lets nodeadm read endpoint, CA and service CIDR, so the NodeConfig needs only name and
      region; `eks:ListAccessEntries` lets it check the node role's access entry (both [EKSUG]
      hybrid-nodes-creds, https://docs.aws.amazon.com/eks/latest/userguide/hybrid-nodes-creds.html).
    - `eks-auth:AssumeRoleForPodIdentity`: the Pod Identity agent on hybrid nodes fetches pod credentials with it
      (same page, optional); our add-ons use Pod Identity.
    - SSM only: `ssm:DescribeInstanceInformation` and `ssm:DeregisterManagedInstance` for `nodeadm uninstall`,
      the latter only on managed instances tagged with this cluster's ARN (the activation's tag); and an explicit
      deny of every Parameter Store read (`PARAMETER_READS_DENIED`), which `AmazonSSMManagedInstanceCore` allows.
    """
    statements: list[dict[str, Any]] = [
        {
            "Sid": "NodeadmReadsCluster",
            "Effect": "Allow",
            "Action": ["eks:DescribeCluster", "eks:ListAccessEntries"],
            "Resource": cluster_arn,
        },
        {
            "Sid": "PodIdentityAgent",
            "Effect": "Allow",
            "Action": "eks-auth:AssumeRoleForPodIdentity",
            "Resource": cluster_arn,
        },
    ]
    if provider == "ssm":
        statements += [
            {
                "Sid": "NodeadmUninstallDescribes",
                "Effect": "Allow",
                "Action": "ssm:DescribeInstanceInformation",
                "Resource": "*",
            },
            {
                "Sid": "NodeadmUninstallDeregistersOwnInstances",
                "Effect": "Allow",
                "Action": "ssm:DeregisterManagedInstance",
                "Resource": "*",
                "Condition": {"StringEquals": {f"ssm:resourceTag/{SSM_DEREGISTER_TAG_KEY}": cluster_arn}},
            },
            {
                "Sid": "NoParameterStoreReads",
                "Effect": "Deny",
                "Action": PARAMETER_READS_DENIED,
                "Resource": "*",
            },
        ]
    return {"Version": "2012-10-17", "Statement": statements}
