"""What the cluster core hands to every component built on top of it.

The data flow is one-way (design.md): `GpuCluster` builds the network and the EKS cluster first, packs their
outputs into a `ClusterContext`, and passes it to node pools, storage, add-ons and hybrid nodes. Those never re-read
config and never look each other up; whatever they share is here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.config import StackConfig

#: Builds an IAM role that one Kubernetes service account assumes through EKS Pod Identity:
#: (name, namespace, service_account, policy_json or None, managed_policy_arns, parent) -> role.
PodIdentityRoleFactory = Callable[
    [str, str, str, "pulumi.Input[str] | None", "list[str]", pulumi.Resource], aws.iam.Role
]


@dataclass(frozen=True)
class ClusterContext:
    spec: StackConfig
    stack: str
    #: Tags every AWS resource carries (components.tags.cluster_tags).
    tags: Mapping[str, str]
    account_id: pulumi.Output[str]
    partition: pulumi.Output[str]
    # network
    vpc_id: pulumi.Input[str]
    vpc_cidr: str
    #: Private subnet ids by availability zone: EFA pools and their Lustre file system pick one AZ's subnet.
    private_subnet_ids: Mapping[str, pulumi.Input[str]]
    # EKS
    cluster_name: pulumi.Output[str]
    cluster_arn: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    #: Base64 certificate authority data, as nodeadm and kubeconfig take it.
    certificate_authority: pulumi.Output[str]
    #: The EKS-managed cluster security group (control plane <-> nodes).
    cluster_security_group_id: pulumi.Output[str]
    #: Security group shared by every `aws` node: node-to-node and control-plane rules.
    node_security_group_id: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    node_instance_profile_arn: pulumi.Output[str]
    #: The customer-managed KMS key of the cluster (secrets envelope encryption; reused for EBS/FSx/EFS/S3/SQS).
    kms_key_arn: pulumi.Output[str]
    k8s_provider: k8s.Provider
    pod_identity_role: PodIdentityRoleFactory
    #: Resources a Kubernetes object must wait for (e.g. the system pool, so controllers have somewhere to run).
    kubernetes_ready: list[pulumi.Resource] = field(default_factory=list)

    @property
    def cluster_name_plain(self) -> str:
        """The configured cluster name, known at plan time (resource names and tags derive from it)."""
        return self.spec.cluster.name
