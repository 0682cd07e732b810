"""A `ClusterContext` made of plain values, for testing components built on the cluster core without building it.

Tests get one through `tests.builders.run_with_context`, which calls `fake_context(spec)` inside the mocked program:
it registers a Kubernetes provider, and the `pod_identity_role` fake registers a real `aws.iam.Role` so tests can
assert on the roles a component asks for.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import tags
from components.config import StackConfig
from components.context import ClusterContext
from components.planning.key_policy import autoscaling_role_arn
from components.planning.stateful import stateful_protection

ACCOUNT_ID = "123456789012"
CLUSTER_ENDPOINT = "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com"
#: base64 of a placeholder PEM: what EKS returns as `certificateAuthority.data`.
CERTIFICATE_AUTHORITY = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
NODE_SECURITY_GROUP_ID = "sg-0n0de0000000000a1"
CLUSTER_SECURITY_GROUP_ID = "sg-0c1u5t3r00000000b"
KMS_KEY_ARN = f"arn:aws:kms:us-east-1:{ACCOUNT_ID}:key/11111111-2222-3333-4444-555555555555"


def subnet_id(zone: str) -> str:
    """A stable fake subnet id per AZ, so tests can check which AZ a pool landed in."""
    return f"subnet-{zone.replace('-', '')[-8:]:0>8}"


def fake_pod_identity_role(
    name: str,
    namespace: str,
    service_account: str,
    policy_json: pulumi.Input[str] | None,
    managed_policy_arns: list[str],
    parent: pulumi.Resource,
) -> aws.iam.Role:
    """Registers the role an add-on would get, trusting EKS Pod Identity, with its inline policy if any."""
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ],
    }
    inline = [aws.iam.RoleInlinePolicyArgs(name=name, policy=policy_json)] if policy_json is not None else None
    return aws.iam.Role(
        name,
        assume_role_policy=json.dumps(trust),
        inline_policies=inline,
        managed_policy_arns=managed_policy_arns or None,
        tags={"namespace": namespace, "service-account": service_account},
        opts=pulumi.ResourceOptions(parent=parent),
    )


class PerPool(dict[str, pulumi.Output[str]]):
    """A pool's node role or instance profile ARN, for any pool asked for (the default system pool included)."""

    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = pattern

    def __missing__(self, pool: str) -> pulumi.Output[str]:
        return pulumi.Output.from_input(self.pattern.format(pool=pool))


def fake_context(spec: StackConfig, stack: str = "test") -> ClusterContext:
    """A ClusterContext for `spec` whose outputs are known plain values."""
    zones = spec.network.zones or [f"{spec.region}{suffix}" for suffix in "abc"]
    return ClusterContext(
        stack=stack,
        cluster_name_plain=spec.cluster.name,
        region=spec.region,
        kubernetes_version=spec.cluster.kubernetes_version,
        service_cidr=str(spec.cluster.service_cidr),
        managed_addon_pins=dict(spec.addons.managed.pins),
        stateful=stateful_protection(spec.cluster.protect_stateful),
        tags=tags.cluster_tags(spec.cluster.name, stack, spec.cluster.tags),
        account_id=pulumi.Output.from_input(ACCOUNT_ID),
        partition=pulumi.Output.from_input("aws"),
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr=str(spec.network.vpc_cidr),
        zones=list(spec.network.zones),
        private_subnet_ids={zone: subnet_id(zone) for zone in zones},
        cluster_name=pulumi.Output.from_input(spec.cluster.name),
        cluster_arn=pulumi.Output.from_input(f"arn:aws:eks:{spec.region}:{ACCOUNT_ID}:cluster/{spec.cluster.name}"),
        endpoint=pulumi.Output.from_input(CLUSTER_ENDPOINT),
        certificate_authority=pulumi.Output.from_input(CERTIFICATE_AUTHORITY),
        cluster_security_group_id=pulumi.Output.from_input(CLUSTER_SECURITY_GROUP_ID),
        node_security_group_id=pulumi.Output.from_input(NODE_SECURITY_GROUP_ID),
        node_role_arns=PerPool(f"arn:aws:iam::{ACCOUNT_ID}:role/{spec.cluster.name}-{{pool}}-node"),
        node_instance_profile_arns=PerPool(
            f"arn:aws:iam::{ACCOUNT_ID}:instance-profile/{spec.cluster.name}-{{pool}}-node"
        ),
        kms_key_arn=pulumi.Output.from_input(KMS_KEY_ARN),
        autoscaling_role_arn=pulumi.Output.from_input(
            autoscaling_role_arn("aws", ACCOUNT_ID, spec.cluster.name, spec.region)
        ),
        k8s_provider=k8s.Provider("k8s", kubeconfig="{}"),
        pod_identity_role=fake_pod_identity_role,
    )
