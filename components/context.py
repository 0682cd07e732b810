"""What the cluster core hands to every component built on top of it.

The data flow is one-way: `GpuCluster` builds the network and the EKS cluster first, packs their outputs into a
`ClusterContext`, and passes it to node pools, storage, add-ons and hybrid nodes. Those never look each other up;
whatever they share is here (docs/architecture.md#from-stack-config-to-plan). The context carries the few config
values every component needs (names, region, versions, protection), not the stack config: a component that owns a
section of the config (storage, add-ons) receives that section from `GpuCluster` as a constructor argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.planning.key_domains import KeyDomain
from components.planning.stateful import Protection, StatefulKind

#: Builds an IAM role that one Kubernetes service account assumes through EKS Pod Identity:
#: (name, namespace, service_account, policy_json or None, managed_policy_arns, parent) -> role.
PodIdentityRoleFactory = Callable[
    [str, str, str, "pulumi.Input[str] | None", "list[str]", pulumi.Resource], aws.iam.Role
]


@dataclass(frozen=True)
class ClusterContext:
    stack: str
    #: The configured cluster name, known at plan time (resource names and tags derive from it).
    cluster_name_plain: str
    region: str
    kubernetes_version: str
    #: Kubernetes service CIDR: nodeadm infers the cluster DNS address from it.
    service_cidr: str
    #: The stack's EKS add-on version pins (`addons.managed.pins`), by add-on name.
    managed_addon_pins: Mapping[str, str]
    #: Resource options of each stateful kind (components.planning.stateful.stateful_protection).
    stateful: Mapping[StatefulKind, Protection]
    #: Tags every AWS resource carries (components.tags.cluster_tags).
    tags: Mapping[str, str]
    account_id: pulumi.Output[str]
    partition: pulumi.Output[str]
    # network
    vpc_id: pulumi.Input[str]
    vpc_cidr: str
    #: Availability zones in config order.
    zones: Sequence[str]
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
    #: Each `aws` pool's node role and instance profile, by pool name (components.identity.NodeIdentity).
    node_role_arns: Mapping[str, pulumi.Output[str]]
    node_instance_profile_arns: Mapping[str, pulumi.Output[str]]
    #: The customer-managed KMS key of the cluster (secrets envelope encryption, node volumes; with one key, reused
    #: for every domain: `key_arn`).
    kms_key_arn: pulumi.Output[str]
    #: The stack's own EC2 Auto Scaling service-linked role, the one the key policy names: every group uses it.
    autoscaling_role_arn: pulumi.Output[str]
    k8s_provider: k8s.Provider
    pod_identity_role: PodIdentityRoleFactory
    #: Resources a Kubernetes object must wait for (e.g. the system pool, so controllers have somewhere to run).
    kubernetes_ready: list[pulumi.Resource] = field(default_factory=list)
    #: The namespaces the stack creates or labels (`components.namespaces`), by name: what installs into one waits
    #: for it, so no pod is admitted before its Pod Security labels exist.
    namespaces: dict[str, pulumi.Resource] = field(default_factory=dict)

    def namespace_ready(self, name: str) -> list[pulumi.Resource]:
        """What an object in namespace `name` waits for: the namespace's own resource, when the stack makes one."""
        return [self.namespaces[name]] if name in self.namespaces else []

    #: The group of the nodes that mount the Lustre file system (only they reach it); None without Lustre.
    lustre_client_security_group_id: pulumi.Output[str] | None = None
    #: The keys of the data domains that have one of their own (`cluster.encryption.keyPerDomain`), by domain.
    domain_key_arns: Mapping[KeyDomain, pulumi.Output[str]] = field(default_factory=dict)
    #: The boot script of the Lustre client nodes that makes the workload directories
    #: (components.planning.lustre_directories); None without Lustre. It names the file system, which is created
    #: after the node pools are declared, so it is a deferred output that the storage step resolves.
    lustre_boot_script: pulumi.Output[str] | None = None

    def key_arn(self, domain: KeyDomain) -> pulumi.Output[str]:
        """The ARN of the key that encrypts `domain`'s data: its own key, else the cluster key."""
        return self.domain_key_arns.get(domain, self.kms_key_arn)


def stateful_options(
    protection: Protection, parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = ()
) -> pulumi.ResourceOptions:
    """Resource options of a stateful resource: its kind's protection (`ClusterContext.stateful`) under `parent`."""
    return pulumi.ResourceOptions(
        parent=parent,
        depends_on=list(depends_on),
        protect=protection.protect,
        retain_on_delete=protection.retain_on_delete,
    )
