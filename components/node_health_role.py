"""Registers the node health loop's Pod Identity role: the one identity allowed to have this cluster's Auto Scaling
groups replace a failed node, and to read the Capacity Blocks it must not take the last nodes of. Its policy is
planned in `components.planning.node_health_repair`; why it is shaped so: docs/security.md, "The health loop's
role"."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.context import PodIdentityRoleFactory
from components.planning.node_health import NODE_HEALTH_NAMESPACE, SERVICE_ACCOUNT
from components.planning.node_health_repair import ROLE_NAME, repair_policy


def node_health_role(
    pod_identity_role: PodIdentityRoleFactory,
    cluster_name: str,
    parent: pulumi.Resource,
    metrics_namespace: str | None = None,
) -> aws.iam.Role:
    """The role, trusted by the loop's service account in its namespace only, and its association
    (`ClusterContext.pod_identity_role` builds both); called by the loop's add-on. `metrics_namespace`: the
    CloudWatch namespace the loop publishes to, on Container Insights stacks."""
    policy = json.dumps(repair_policy(cluster_name, metrics_namespace))
    return pod_identity_role(ROLE_NAME, NODE_HEALTH_NAMESPACE, SERVICE_ACCOUNT, policy, [], parent)
