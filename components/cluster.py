"""The EKS control plane: cluster role, secrets encryption key, the cluster itself, admin access, security groups.

Defaults that peers get wrong (peers.md, feature matrix) are the safe ones here: a private API endpoint unless the
stack asks for a public one with an allow-list, envelope encryption of Kubernetes secrets with a customer-managed
KMS key (rotation on, protected), control-plane logs on (into a log group the stack creates first, encrypted, with a
retention), and authentication mode `API` (access entries, no `aws-auth` ConfigMap), which EKS Hybrid Nodes require
anyway (aws-gpu-facts.md §5e, §5f). Nobody is an implicit admin: the deployer and `cluster.admins` get explicit
access entries.

The node security group lives here too, because its rules are about the control plane: every `aws` node joins it,
nodes talk to each other freely (EFA needs all traffic to and from the group itself, in and out, §2), the control
plane reaches kubelets and webhooks, and nodes reach the API server. Nothing is open to 0.0.0.0/0 inbound.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

from components.catalog import versions
from components.config import AdminAccess, ClusterConfig, EndpointAccess
from components.context import stateful_options
from components.identity import aws_managed_policy_arn
from components.network import Network
from components.planning.key_domains import (
    DOMAIN_DATA,
    KeyDomain,
    key_alias,
    key_of,
    key_resource_name,
    served_domains,
)
from components.planning.key_policy import (
    AUTOSCALING_SERVICE,
    autoscaling_role_description,
    autoscaling_role_suffix,
    control_plane_key_policy,
    domain_key_policy,
)
from components.planning.log_groups import control_plane_log_group
from components.planning.stateful import Protection
from components.planning.trust_policies import EKS_SERVICE, service_trust_policy
from components.security_groups import allow_all_within, cidr_resource_name
from components.tags import OWNED, STATEFUL, kubernetes_cluster

#: Kubernetes resources EKS envelope-encrypts with the cluster's KMS key (EKS API: EncryptionConfig.resources).
ENCRYPTED_RESOURCES = ("secrets",)
#: Authentication mode: access entries only. Hybrid Nodes need API or API_AND_CONFIG_MAP (aws-gpu-facts.md §5f).
AUTHENTICATION_MODE = "API"
#: KMS waiting period before a deleted key is gone (7-30 days; the longest gives the most time to undo a mistake,
#: https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys.html).
KMS_DELETION_WINDOW_DAYS = 30
#: Access entry type for human and CI principals; access policies can only be associated with STANDARD entries (§5e).
ADMIN_ACCESS_ENTRY_TYPE = "STANDARD"
#: What the principal running `pulumi up` gets: the program creates Kubernetes objects (namespaces, RBAC, Helm
#: releases) right after the cluster, and EKS's implicit creator admin is off.
DEPLOYER_ACCESS_POLICY = "AmazonEKSClusterAdminPolicy"
#: The cluster input that decides whether EKS gives its creator an implicit admin entry (off here).
CREATOR_ADMIN_PROPERTY = "accessConfig.bootstrapClusterCreatorAdminPermissions"
#: Ports the control plane opens towards nodes: 443 for webhooks served on 443, and 1025-65535 for the kubelet
#: (10250) and webhooks / aggregated APIs on high ports (EKS user guide, "View Amazon EKS security group
#: requirements for clusters", https://docs.aws.amazon.com/eks/latest/userguide/sec-group-reqs.html).
CONTROL_PLANE_TO_NODE_PORTS: tuple[tuple[int, int, str], ...] = (
    (443, 443, "control plane to webhooks on 443"),
    (1025, 65535, "control plane to kubelet (10250) and webhooks on high ports"),
)
API_SERVER_PORT = 443


def require_supported_version(kubernetes_version: str) -> None:
    """Refuse a Kubernetes version EKS does not run. `components.validation` reports this with its key path first;
    this guards direct construction."""
    supported = versions.supported_kubernetes_versions()
    if kubernetes_version not in supported:
        raise ValueError(f"Kubernetes {kubernetes_version} is not supported by EKS; supported: {', '.join(supported)}")


def remote_network_args(
    remote_network: Mapping[str, Any] | None,
) -> aws.eks.ClusterRemoteNetworkConfigArgs | None:
    """The planned `remoteNetworkConfig` (`components.planning.hybrid.remote_network_config`) as pulumi-aws args."""
    if remote_network is None:
        return None
    pods = remote_network.get("remotePodNetworks")
    return aws.eks.ClusterRemoteNetworkConfigArgs(
        remote_node_networks=aws.eks.ClusterRemoteNetworkConfigRemoteNodeNetworksArgs(
            cidrs=list(remote_network["remoteNodeNetworks"]["cidrs"])
        ),
        remote_pod_networks=(
            aws.eks.ClusterRemoteNetworkConfigRemotePodNetworksArgs(cidrs=list(pods["cidrs"])) if pods else None
        ),
    )


def admin_resource_name(cluster_name: str, principal_arn: str) -> str:
    """`<cluster>-admin-role-platform` for `arn:aws:iam::123:role/platform`: stable when the admin list is reordered
    (validation refuses two admins that would share a name)."""
    kind_and_name = principal_arn.split(":", 5)[-1]  # "role/path/name" or "user/name"
    kind, _, rest = kind_and_name.partition("/")
    return f"{cluster_name}-admin-{kind}-{rest.rsplit('/', 1)[-1]}"


def access_policy_arn(partition: pulumi.Input[str], policy: str) -> pulumi.Output[str]:
    """EKS access policy ARN, `arn:<partition>:eks::aws:cluster-access-policy/<Name>` (aws-gpu-facts.md §5e)."""
    return pulumi.Output.concat("arn:", partition, ":eks::aws:cluster-access-policy/", policy)


def access_scope(admin: AdminAccess) -> aws.eks.AccessPolicyAssociationAccessScopeArgs:
    """Access scope `namespace` with the admin's namespaces, else `cluster` (EKS API `AccessScope`: type `cluster` or
    `namespace`, namespaces required for the latter)."""
    if admin.namespaces:
        return aws.eks.AccessPolicyAssociationAccessScopeArgs(type="namespace", namespaces=list(admin.namespaces))
    return aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster")


def deployer_sources(endpoint: EndpointAccess, vpc_cidr: str) -> list[tuple[str, str, str]]:
    """`(resource suffix, kind, source)` of every network the stack admits to the private endpoint (TCP 443 on the
    cluster security group): `kind` is `cidr` or `security-group`. The EKS user guide ("Accessing a private only API
    server", https://docs.aws.amazon.com/eks/latest/userguide/cluster-endpoint.html) names the three ways in, each
    needing such a rule: a connected network (VPN, Direct Connect, transit gateway), a bastion, a host in the VPC."""
    sources = [(f"cidr-{cidr_resource_name(str(c))}", "cidr", str(c)) for c in endpoint.private_access_cidrs]
    sources += [(group, "security-group", group) for group in endpoint.private_access_security_group_ids]
    if endpoint.deploy_from_vpc:
        sources.append(("vpc", "cidr", vpc_cidr))
    return sources


class EksCluster(pulumi.ComponentResource):
    """IAM role, KMS key, `aws.eks.Cluster`, admin access entries and the node security group.

    Attributes: `cluster` (aws.eks.Cluster), `name`, `arn`, `endpoint`, `certificate_authority` (base64),
    `cluster_security_group_id` (EKS-managed), `node_security_group` / `node_security_group_id`, `kms_key`,
    `autoscaling_role` (the stack's Auto Scaling service-linked role, which every node group uses), `role`,
    `admin_entries` ({resource name: AccessEntry}).

    `remote_network` is the planned `remoteNetworkConfig` of the hybrid pools
    (`components.planning.hybrid.remote_network_config`), None without hybrid pools; `key_protection` the
    options of the cluster's KMS keys (`components.planning.stateful`); `key_domains` the domains that get a key of
    their own (`components.planning.key_domains`; `keys` holds them, `key_arn(domain)` names the key of any domain).
    """

    def __init__(
        self,
        name: str,
        config: ClusterConfig,
        network: Network,
        remote_network: Mapping[str, Any] | None,
        key_protection: Protection,
        tags: Mapping[str, str],
        account_id: pulumi.Input[str],
        partition: pulumi.Input[str],
        region: str,
        key_domains: tuple[KeyDomain, ...] = ("cluster",),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:EksCluster", name, None, opts)
        require_supported_version(config.kubernetes_version)
        self.config = config
        self.cluster_name = config.name
        self.tags = dict(tags)
        self.partition = partition
        self.region = region
        cluster_policy = self._cluster_role()
        self.key_domains = key_domains
        self._kms_keys(key_protection, account_id)
        encryption_policy = self._encryption_policy()
        self._control_plane_log_group(key_protection)
        self._control_plane(
            network, remote_network, depends_on=[cluster_policy, encryption_policy, self.control_plane_logs]
        )
        self._admin_access()
        self._deployer_admin()
        self._node_security_group(network.vpc_id)
        self._node_security_rules()
        self._deployer_access(str(network.vpc_cidr))
        self.register_outputs(
            {
                "name": self.name,
                "endpoint": self.endpoint,
                "kmsKeyArn": self.kms_key.arn,
                "nodeSecurityGroupId": self.node_security_group_id,
            }
        )

    def _cluster_role(self) -> aws.iam.RolePolicyAttachment:
        """The role EKS assumes to run the control plane (https://docs.aws.amazon.com/eks/latest/userguide/
        cluster-iam-role.html); returns its policy attachment, which the cluster must outlive."""
        cluster_name = self.cluster_name
        self.role = aws.iam.Role(
            f"{cluster_name}-cluster",
            assume_role_policy=json.dumps(service_trust_policy(EKS_SERVICE)),
            description=f"EKS control plane of {cluster_name}",
            tags=self.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        return aws.iam.RolePolicyAttachment(
            f"{cluster_name}-cluster-AmazonEKSClusterPolicy",
            role=self.role.name,
            policy_arn=aws_managed_policy_arn(self.partition, "AmazonEKSClusterPolicy"),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _kms_keys(self, protection: Protection, account_id: pulumi.Input[str]) -> None:
        """The cluster key (secrets envelope encryption, node volumes, and every domain without a key of its own) and
        one key per other domain in `key_domains`. Losing a key makes everything encrypted with it unreadable, so each
        gets the stateful protection."""
        self.autoscaling_role = self._autoscaling_service_linked_role()
        self.keys: dict[KeyDomain, aws.kms.Key] = {}
        for domain in self.key_domains:
            self.keys[domain] = self._kms_key(domain, protection, account_id)
        self.kms_key = self.keys["cluster"]

    def _kms_key(self, domain: KeyDomain, protection: Protection, account_id: pulumi.Input[str]) -> aws.kms.Key:
        """One key, its policy naming only the services of the domains it serves, and its alias."""
        cluster_name, serves = self.cluster_name, served_domains(domain, self.key_domains)
        name = key_resource_name(cluster_name, domain)
        if len(self.key_domains) == 1:
            description = f"EKS secrets and data encryption for cluster {cluster_name}"
        else:
            description = f"EKS cluster {cluster_name}, {domain} data: {DOMAIN_DATA[domain]}"
        key = aws.kms.Key(
            name,
            description=description,
            enable_key_rotation=True,
            deletion_window_in_days=KMS_DELETION_WINDOW_DAYS,
            policy=pulumi.Output.all(account_id, self.partition, self.autoscaling_role.arn).apply(
                lambda v: json.dumps(domain_key_policy(serves, v[0], v[1], self.region, cluster_name, v[2]))
            ),
            tags={**self.tags, STATEFUL: "true"},
            opts=stateful_options(protection, self, depends_on=[self.autoscaling_role] if "cluster" in serves else []),
        )
        aws.kms.Alias(
            name,
            name=key_alias(cluster_name, domain),
            target_key_id=key.key_id,
            opts=pulumi.ResourceOptions(parent=self),
        )
        return key

    def key_arn(self, domain: KeyDomain) -> pulumi.Output[str]:
        """The ARN of the key that encrypts `domain`'s data."""
        return self.keys[key_of(domain, self.key_domains)].arn

    def _autoscaling_service_linked_role(self) -> aws.iam.ServiceLinkedRole:
        """This stack's own EC2 Auto Scaling service-linked role, `AWSServiceRoleForAutoScaling_<cluster>.<region>`,
        which the key policy names and every node group is given (`service_linked_role_arn`). Created before the key:
        KMS refuses a key policy naming a principal that does not exist (MalformedPolicyDocumentException,
        https://repost.aws/knowledge-center/kms-policy-error-invalid-principals). Its own role, not the account's
        default one, so nothing is looked up, no two stacks create the same role, and `pulumi destroy` deletes it
        after the groups (IAM refuses while a group still uses it: docs/network-and-cluster.md, "The Auto Scaling
        service-linked role"); custom suffixes: Amazon EC2 Auto Scaling User Guide, service-linked roles."""
        return aws.iam.ServiceLinkedRole(
            f"{self.cluster_name}-autoscaling-role",
            aws_service_name=AUTOSCALING_SERVICE,
            custom_suffix=autoscaling_role_suffix(self.cluster_name, self.region),
            description=autoscaling_role_description(self.cluster_name, self.region),
            tags=self.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _encryption_policy(self) -> aws.iam.RolePolicy:
        """The control plane encrypts and decrypts secrets with the key (as terraform-aws-eks grants it)."""
        return aws.iam.RolePolicy(
            f"{self.cluster_name}-cluster-encryption",
            role=self.role.id,
            policy=self.kms_key.arn.apply(lambda arn: json.dumps(control_plane_key_policy(arn))),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _control_plane_log_group(self, key_protection: Protection) -> None:
        """`/aws/eks/<cluster>/cluster`, created before the cluster so EKS does not create it itself without retention
        or encryption (`components.planning.log_groups`): encrypted with the cluster key, kept for
        `cluster.logRetentionDays`. It holds the audit log, so `pulumi destroy` leaves it in the account whenever the
        key that decrypts it is kept (`protectStateful`)."""
        self.control_plane_logs = aws.cloudwatch.LogGroup(
            f"{self.cluster_name}-control-plane",
            name=control_plane_log_group(self.cluster_name),
            retention_in_days=self.config.log_retention_days,
            kms_key_id=self.key_arn("logs"),
            tags=self.tags,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=key_protection.retain_on_delete),
        )

    def _control_plane(
        self, network: Network, remote_network: Mapping[str, Any] | None, depends_on: list[pulumi.Resource]
    ) -> None:
        """The cluster: private subnets, API endpoint access, access entries only, encrypted secrets, control-plane
        logs, and the hybrid pools' remote networks. It waits for the role's policies: EKS cannot clean up its ENIs
        and security groups if the role loses them first."""
        cfg = self.config
        endpoint = cfg.endpoint
        vpc_config: dict[str, Any] = {
            "subnet_ids": network.cluster_subnet_ids(),
            "endpoint_private_access": endpoint.private,
            "endpoint_public_access": endpoint.public,
        }
        if endpoint.public:
            vpc_config["public_access_cidrs"] = [str(c) for c in endpoint.public_access_cidrs]
        self.cluster = aws.eks.Cluster(
            f"{self.cluster_name}-eks",
            name=self.cluster_name,
            version=cfg.kubernetes_version,
            role_arn=self.role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(**vpc_config),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode=AUTHENTICATION_MODE,
                # No implicit, invisible admin: the deployer gets an explicit access entry (`_deployer_admin`).
                bootstrap_cluster_creator_admin_permissions=False,
            ),
            # The add-ons are EKS managed add-ons (ManagedAddons); EKS's self-managed copies would only have to be
            # overwritten, and the bootstrap VPC CNI would land on hybrid nodes where it does not work (§5f).
            bootstrap_self_managed_addons=False,
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=self.kms_key.arn),
                resources=list(ENCRYPTED_RESOURCES),
            ),
            enabled_cluster_log_types=list(cfg.logging),
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=cfg.support_type),
            kubernetes_network_config=aws.eks.ClusterKubernetesNetworkConfigArgs(
                ip_family="ipv4", service_ipv4_cidr=str(cfg.service_cidr)
            ),
            remote_network_config=remote_network_args(remote_network),
            # EKS refuses DeleteCluster while this is on ("Protect EKS clusters from accidental deletion",
            # https://docs.aws.amazon.com/eks/latest/userguide/deletion-protection.html).
            deletion_protection=cfg.deletion_protection,
            tags=self.tags,
            # EKS reads the creator-admin switch at creation only, and the provider replaces the cluster when it
            # changes (pulumi/pulumi-aws#3997): a cluster created with it on keeps it (docs/operations.md, "Clusters
            # deployed before the security hardening").
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on, ignore_changes=[CREATOR_ADMIN_PROPERTY]),
        )
        self.name: pulumi.Output[str] = self.cluster.name
        self.arn: pulumi.Output[str] = self.cluster.arn
        self.endpoint: pulumi.Output[str] = self.cluster.endpoint
        self.certificate_authority: pulumi.Output[str] = self.cluster.certificate_authority.apply(
            lambda ca: ca.data if ca is not None and ca.data is not None else ""
        )
        self.cluster_security_group_id: pulumi.Output[str] = self.cluster.vpc_config.apply(
            lambda v: v.cluster_security_group_id or ""
        )

    def _admin_access(self) -> None:
        """One STANDARD access entry and access policy per configured admin: the API authentication mode has no
        `aws-auth` ConfigMap, so access entries are the only way in (§5e)."""
        self.admin_entries: dict[str, aws.eks.AccessEntry] = {}
        self._admin_associations: dict[aws.eks.AccessEntry, list[pulumi.Resource]] = {}
        self.deployer_arn = self.config.deployer_principal_arn or self._caller_principal()
        deployer = f"{self.cluster_name}-deployer"
        for admin in self.config.admins:
            resource = admin_resource_name(self.cluster_name, admin.principal_arn)
            # The deployer listed as an admin takes over its `-deployer` entry (and its cluster-admin association):
            # the same principal under a new name would be created before the old one is deleted, and EKS refuses
            # a second entry for a principal (ResourceInUseException).
            is_deployer = admin.principal_arn == self.deployer_arn
            entry = aws.eks.AccessEntry(
                resource,
                cluster_name=self.cluster.name,
                principal_arn=admin.principal_arn,
                type=ADMIN_ACCESS_ENTRY_TYPE,
                tags=self.tags,
                opts=pulumi.ResourceOptions(
                    parent=self, aliases=[pulumi.Alias(name=deployer)] if is_deployer else None
                ),
            )
            takes_over = is_deployer and admin.policy == DEPLOYER_ACCESS_POLICY
            association = aws.eks.AccessPolicyAssociation(
                resource,
                cluster_name=self.cluster.name,
                principal_arn=entry.principal_arn,
                policy_arn=access_policy_arn(self.partition, admin.policy),
                access_scope=access_scope(admin),
                opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=deployer)] if takes_over else None),
            )
            self.admin_entries[resource] = entry
            self._admin_associations[entry] = [association]

    def _deployer_admin(self) -> None:
        """An explicit access entry with `AmazonEKSClusterAdminPolicy` for the IAM principal running `pulumi up`: with
        `bootstrapClusterCreatorAdminPermissions` off it has no Kubernetes access otherwise, and the program creates
        Kubernetes objects. The principal is `cluster.deployerPrincipalArn` when set, else the caller: an assumed-role
        session is turned into its role's ARN (an access entry names a role, not a
        session). When that principal is also in `cluster.admins`, its entry is reused (a second entry for the same
        principal fails with ResourceInUseException) and only the cluster-admin association is added, if its listed
        policy is another one. `deployer_access` lists what every Kubernetes object must wait for."""
        principal = self.deployer_arn
        listed = {admin.principal_arn: admin for admin in self.config.admins}
        admin = listed.get(principal)
        # Taken out of `admins`, the deployer's entry (and cluster-admin association) keep their state under
        # `-deployer`, for the same reason as above.
        was_admin = admin_resource_name(self.cluster_name, principal)
        if admin is not None:
            entry = self.admin_entries[admin_resource_name(self.cluster_name, admin.principal_arn)]
            if admin.policy == DEPLOYER_ACCESS_POLICY:
                self.deployer_access: list[pulumi.Resource] = [entry, *self._admin_associations[entry]]
                return
        else:
            entry = aws.eks.AccessEntry(
                f"{self.cluster_name}-deployer",
                cluster_name=self.cluster.name,
                principal_arn=principal,
                type=ADMIN_ACCESS_ENTRY_TYPE,
                tags=self.tags,
                opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=was_admin)]),
            )
        association = aws.eks.AccessPolicyAssociation(
            f"{self.cluster_name}-deployer",
            cluster_name=self.cluster.name,
            principal_arn=entry.principal_arn,
            policy_arn=access_policy_arn(self.partition, DEPLOYER_ACCESS_POLICY),
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            opts=pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(name=was_admin)] if admin is None else None),
        )
        self.deployer_access = [entry, association]

    def _caller_principal(self) -> str:
        """The IAM role or user behind the credentials running the program (`aws.iam.get_session_context` turns an
        `sts::...:assumed-role/<role>/<session>` ARN into the role's, path included)."""
        caller = aws.get_caller_identity(opts=pulumi.InvokeOptions(parent=self))
        return aws.iam.get_session_context(arn=caller.arn, opts=pulumi.InvokeOptions(parent=self)).issuer_arn

    def _node_security_group(self, vpc_id: pulumi.Input[str]) -> None:
        """The group every `aws` node joins. Nodes talk to each other freely (EFA needs all traffic to and from
        the group itself, in and out, §2) and reach AWS APIs, registries and the internet through NAT."""
        cluster_name = self.cluster_name
        child = pulumi.ResourceOptions(parent=self)
        self.node_security_group = aws.ec2.SecurityGroup(
            f"{cluster_name}-node",
            vpc_id=vpc_id,
            description=f"EKS nodes of {cluster_name}: node-to-node (EFA), control plane to nodes",
            tags={**self.tags, "Name": f"{cluster_name}-node", kubernetes_cluster(cluster_name): OWNED},
            opts=child,
        )
        node_sg = self.node_security_group.id
        self.node_security_group_id: pulumi.Output[str] = node_sg
        allow_all_within(f"{cluster_name}-node", node_sg, "node-to-node (pods, EFA)", self.tags, child)
        aws.vpc.SecurityGroupEgressRule(
            f"{cluster_name}-node-to-anywhere",
            security_group_id=node_sg,
            cidr_ipv4="0.0.0.0/0",
            ip_protocol="-1",
            description="nodes reach AWS APIs, registries and the internet through NAT",
            tags=self.tags,
            opts=child,
        )

    def _node_security_rules(self) -> None:
        """Control plane and nodes reach each other: the control plane to kubelets and webhooks, the nodes to the
        API server. Nothing is open to 0.0.0.0/0 inbound."""
        cluster_name = self.cluster_name
        child = pulumi.ResourceOptions(parent=self)
        node_sg = self.node_security_group_id
        for from_port, to_port, why in CONTROL_PLANE_TO_NODE_PORTS:
            aws.vpc.SecurityGroupIngressRule(
                f"{cluster_name}-node-from-control-plane-{from_port}",
                security_group_id=node_sg,
                referenced_security_group_id=self.cluster_security_group_id,
                ip_protocol="tcp",
                from_port=from_port,
                to_port=to_port,
                description=why,
                tags=self.tags,
                opts=child,
            )
        aws.vpc.SecurityGroupIngressRule(
            f"{cluster_name}-control-plane-from-nodes",
            security_group_id=self.cluster_security_group_id,
            referenced_security_group_id=node_sg,
            ip_protocol="tcp",
            from_port=API_SERVER_PORT,
            to_port=API_SERVER_PORT,
            description="nodes to the Kubernetes API server",
            tags=self.tags,
            opts=child,
        )

    def _deployer_access(self, vpc_cidr: str) -> None:
        """Let the machine running `pulumi up` reach the private endpoint (`cluster.endpoint.privateAccessCidrs`,
        `privateAccessSecurityGroupIds`, `deployFromVpc`). `endpoint` waits for these rules, so the kubeconfig
        built from it (and every other reader, such as node configs) comes after them: the first Kubernetes call
        never races them."""
        cluster_name = self.cluster_name
        rules = [
            aws.vpc.SecurityGroupIngressRule(
                f"{cluster_name}-control-plane-from-deployer-{suffix}",
                security_group_id=self.cluster_security_group_id,
                cidr_ipv4=source if kind == "cidr" else None,
                referenced_security_group_id=source if kind == "security-group" else None,
                ip_protocol="tcp",
                from_port=API_SERVER_PORT,
                to_port=API_SERVER_PORT,
                description=f"Kubernetes API from {source} (the deployer and operators)",
                tags=self.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for suffix, kind, source in deployer_sources(self.config.endpoint, vpc_cidr)
        ]
        if rules:
            self.endpoint = pulumi.Output.all(self.cluster.endpoint, *(rule.id for rule in rules)).apply(
                lambda values: str(values[0])
            )
