"""Pool identity: the ValidatingAdmissionPolicy that ties a node's pool label to the IAM role it authenticated with.

Each kubelet sets its own `gpu-clusters/pool` label at registration, and NodeRestriction lets it change that label
later; a node whose credentials are taken over could claim another pool and attract that pool's pods. Every pool has
its own node role (`components.identity`, `components.hybrid`), and the API server learns a node's role from its
token, not from the node: the EKS authenticator (aws-iam-authenticator) puts the role in the user's extra info under
`canonicalArn` (`arn:<partition>:iam::<account>:role/<name>`, the assumed-role session converted to its role). So a
policy can refuse a Node create or update by `system:node:*` whose pool label names a pool that role does not belong
to. Built with Kubernetes' own admission engine (ValidatingAdmissionPolicy, GA in 1.30), no controller. Sources and
the residual risk: docs/security.md, "Tenants".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components import tags

#: Name of the policy and of its binding.
POLICY_NAME = "gpu-clusters-pool-identity"
#: The user extra key aws-iam-authenticator sets to the caller's role ARN ([IAMAUTH], `pkg/server/server.go`).
ROLE_EXTRA_KEY = "canonicalArn"
#: Usernames of node identities: EKS maps `EC2_LINUX` and `HYBRID_LINUX` access entries to `system:node:<name>`.
NODE_USER_PREFIX = "system:node:"
#: The audit annotation recorded when a node sets a pool label but its user info carries no role.
UNVERIFIED_ANNOTATION = "unverified-pool-identity"


@dataclass(frozen=True)
class PoolIdentityPolicy:
    """The policy and binding manifests (`apiVersion`, `kind`, `metadata`, `spec`)."""

    policy: dict[str, Any]
    binding: dict[str, Any]


def _cel_string(value: str) -> str:
    """A CEL string literal: JSON string escaping is valid CEL for the characters role ARNs and pool names use."""
    return json.dumps(value)


def pool_roles_literal(pool_roles: Mapping[str, Sequence[str]]) -> str:
    """`{'train': ['arn:...'], ...}` as a CEL map literal, pools and roles sorted so the plan is deterministic."""
    entries = ", ".join(
        f"{_cel_string(pool)}: [{', '.join(_cel_string(arn) for arn in sorted(set(arns)))}]"
        for pool, arns in sorted(pool_roles.items())
    )
    return "{" + entries + "}"


def pool_identity_policy(pool_roles: Mapping[str, Sequence[str]]) -> PoolIdentityPolicy:
    """The policy refusing a node identity that labels its Node with a pool its IAM role does not belong to.

    `pool_roles` maps each pool name to the role ARN(s) its nodes authenticate with. A node whose user info
    carries no role is admitted (the authenticator can omit the extras for accounts it is told to scrub) but
    recorded with the audit annotation `UNVERIFIED_ANNOTATION`, so a cluster where the check is not in force shows
    it in its audit log instead of refusing every node.
    """
    if not pool_roles or any(not arns for arns in pool_roles.values()):
        raise ValueError("every pool needs at least one node role ARN")
    label = _cel_string(tags.POOL)
    key = _cel_string(ROLE_EXTRA_KEY)
    variables = [
        {"name": "allowed", "expression": pool_roles_literal(pool_roles)},
        {
            "name": "pool",
            "expression": (
                f"has(object.metadata.labels) && {label} in object.metadata.labels"
                f" ? object.metadata.labels[{label}] : ''"
            ),
        },
        {
            "name": "roles",
            "expression": (
                f"has(request.userInfo.extra) && {key} in request.userInfo.extra ? request.userInfo.extra[{key}] : []"
            ),
        },
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            # Ignore: an expression the API server cannot compile or evaluate admits the request (and the binding's
            # Audit action still records it) instead of refusing every node's status updates, which would take the
            # whole cluster NotReady. The expressions are checked by reading, not by a CEL engine (docs/security.md).
            "failurePolicy": "Ignore",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["nodes", "nodes/status"],
                    }
                ]
            },
            "matchConditions": [
                {
                    "name": "node-identity",
                    "expression": f"request.userInfo.username.startsWith({_cel_string(NODE_USER_PREFIX)})",
                }
            ],
            "variables": variables,
            "validations": [
                {
                    "expression": (
                        "variables.pool == '' || size(variables.roles) == 0 || "
                        "(variables.pool in variables.allowed && "
                        "variables.roles.exists(r, r in variables.allowed[variables.pool]))"
                    ),
                    "messageExpression": (
                        "'node ' + request.userInfo.username + ' authenticated as ' + variables.roles[0]"
                        f" + ' may not carry {tags.POOL}=' + variables.pool"
                    ),
                    "reason": "Forbidden",
                }
            ],
            "auditAnnotations": [
                {
                    "key": UNVERIFIED_ANNOTATION,
                    "valueExpression": (
                        "variables.pool != '' && size(variables.roles) == 0"
                        " ? request.userInfo.username + ' set pool ' + variables.pool"
                        f" + ' without {ROLE_EXTRA_KEY} in its user info' : null"
                    ),
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny", "Audit"]},
    }
    return PoolIdentityPolicy(policy=policy, binding=binding)
