"""EKS Hybrid Nodes: the cloud side of joining on-prem GPU servers (e.g. 4xA40 boxes) to the cluster.

Per hybrid pool: an IAM role the servers' temporary credentials resolve to, the credentials' source (an SSM hybrid
activation sized to the pool, or an IAM Roles Anywhere trust anchor and profile), an access entry of type
`HYBRID_LINUX` so the role authenticates as a node, cluster security group rules admitting the pool's node and pod
networks to the API server, the rest of AWS's hybrid networking table that touches AWS security groups (control
plane to kubelets and webhooks, DNS from the remote networks to CoreDNS on cloud nodes), and the nodeadm
`NodeConfig` the server owner runs `nodeadm init` with, exported as a secret. Once for all pools: Cilium, the only
CNI AWS supports on hybrid nodes, pinned to them by affinity, with its BGP control plane when a pool peers with its
site router.

What is NOT here: the cluster's `remoteNetworkConfig` and authentication mode are properties of the EKS cluster and
are set by `components.cluster` (from `components.planning.hybrid.remote_network_config`); keeping the VPC CNI off
hybrid nodes is the managed add-on's affinity; the NVIDIA device plugin (add-ons) schedules onto hybrid GPU nodes
through the `nvidia.com/gpu.present=true` label their kubelet flags set. Every value is planned in
`components.planning.hybrid`; this module only turns the plan into resources.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import tags
from components.addons.helm import helm_release
from components.catalog import versions
from components.clock import utc_now
from components.context import ClusterContext
from components.identity import aws_managed_policy_arn
from components.planning.hybrid import (
    ACCESS_ENTRY_TYPE,
    API_SERVER_PORT,
    CILIUM_NAMESPACE,
    ROLES_ANYWHERE_ROLE_MAX_SESSION_SECONDS,
    ROLES_ANYWHERE_SESSION_SECONDS,
    SSM_DEREGISTER_TAG_KEY,
    ClusterDetails,
    NetworkRule,
    Provider,
    RolesAnywhere,
    SsmActivation,
    activation_expiry,
    activation_name,
    cilium_bgp_manifests,
    cilium_values,
    hybrid_node_config,
    hybrid_node_policy,
    hybrid_plans,
    managed_policy_names,
    network_rules,
    nodeadm_install_command,
    registration_limit,
    render_manifests,
    render_node_config,
    roles_anywhere_trust_policy,
    ssm_trust_policy,
)
from components.planning.hybrid.join_script import join_script
from components.planning.pools import PoolPlan
from components.security_groups import cidr_resource_name

Clock = Callable[[], datetime]


@dataclass
class HybridPool:
    """What one hybrid pool's servers need, as built. `node_config` is the secret YAML for `nodeadm init`."""

    plan: PoolPlan
    role: aws.iam.Role
    access_entry: aws.eks.AccessEntry
    api_ingress: list[aws.vpc.SecurityGroupIngressRule]
    node_config: pulumi.Output[str]
    install_command: str
    #: What each server runs as root to join (components.planning.hybrid.join_script): no secret in it.
    join_script: str
    network_rules: list[aws.vpc.SecurityGroupIngressRule | aws.vpc.SecurityGroupEgressRule] = field(
        default_factory=list
    )
    activation: aws.ssm.Activation | None = None
    trust_anchor: aws.rolesanywhere.TrustAnchor | None = None
    profile: aws.rolesanywhere.Profile | None = None
    policy_attachments: list[aws.iam.RolePolicyAttachment] = field(default_factory=list)


class HybridNodes(pulumi.ComponentResource):
    """Hybrid pools of one cluster. `clock` is injectable so the SSM activation's expiry is deterministic in tests."""

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        plans: Sequence[PoolPlan],
        clock: Clock = utc_now,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:HybridNodes", name, None, opts)
        self._ctx = ctx
        self._clock = clock
        hybrid = hybrid_plans(plans)
        if not hybrid:
            raise ValueError("HybridNodes needs at least one `kind: hybrid` pool plan")
        self.pools: dict[str, HybridPool] = {plan.name: self._pool(plan) for plan in hybrid}
        self.cilium = self._cilium(hybrid)
        self.register_outputs({"roleArns": {name: pool.role.arn for name, pool in self.pools.items()}})

    # ------------------------------------------------------------------------------------------------- per pool
    def _pool(self, plan: PoolPlan) -> HybridPool:
        """Everything one hybrid pool's servers need to join: a role their credentials resolve to, the credentials'
        source, an access entry, API ingress from their networks, and the NodeConfig for `nodeadm init`."""
        ctx = self._ctx
        prefix = f"{ctx.cluster_name_plain}-{plan.name}"
        pool_tags = tags.with_tags(
            ctx.tags, pool=plan.name, role=plan.role, **({"gpu_model": plan.gpu_model} if plan.gpu_model else {})
        )
        roles_anywhere = plan.pool.credentials.provider == "iam-roles-anywhere"
        trust_anchor = self._trust_anchor(plan, prefix, pool_tags) if roles_anywhere else None
        role, attachments, inline = self._node_role(plan, prefix, pool_tags, trust_anchor)
        access_entry = aws.eks.AccessEntry(
            f"{prefix}-hybrid-node",
            cluster_name=ctx.cluster_name,
            principal_arn=role.arn,
            type=ACCESS_ENTRY_TYPE,
            tags=pool_tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        activation = profile = None
        credentials: pulumi.Output[SsmActivation | RolesAnywhere]
        if trust_anchor is not None:
            profile, credentials = self._roles_anywhere_profile(prefix, pool_tags, trust_anchor, role)
        else:
            activation, credentials = self._ssm_activation(plan, prefix, pool_tags, role, [*attachments, inline])
        return HybridPool(
            plan=plan,
            role=role,
            access_entry=access_entry,
            api_ingress=self._api_ingress(plan, prefix, pool_tags),
            network_rules=[self._network_rule(plan, rule, prefix, pool_tags) for rule in network_rules(plan.pool)],
            node_config=self._node_config(plan, credentials),
            install_command=nodeadm_install_command(ctx.kubernetes_version, plan.pool.credentials.provider, ctx.region),
            join_script=join_script(plan, ctx.kubernetes_version, ctx.vpc_cidr, ctx.region),
            activation=activation,
            trust_anchor=trust_anchor,
            profile=profile,
            policy_attachments=attachments,
        )

    def _trust_anchor(self, plan: PoolPlan, prefix: str, pool_tags: Mapping[str, str]) -> aws.rolesanywhere.TrustAnchor:
        """IAM Roles Anywhere: the CA bundle the servers' certificates chain to."""
        return aws.rolesanywhere.TrustAnchor(
            f"{prefix}-trust-anchor",
            enabled=True,
            source=aws.rolesanywhere.TrustAnchorSourceArgs(
                source_type="CERTIFICATE_BUNDLE",
                source_data=aws.rolesanywhere.TrustAnchorSourceSourceDataArgs(
                    x509_certificate_data=plan.pool.credentials.trust_anchor_certificate
                ),
            ),
            tags=dict(pool_tags),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _node_role(
        self,
        plan: PoolPlan,
        prefix: str,
        pool_tags: Mapping[str, str],
        trust_anchor: aws.rolesanywhere.TrustAnchor | None,
    ) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment], aws.iam.RolePolicy]:
        """The role the servers' temporary credentials resolve to, trusted by SSM or by the trust anchor, with the
        managed policies of its provider and the inline policy that lets a node describe the cluster."""
        ctx = self._ctx
        child = pulumi.ResourceOptions(parent=self)
        provider: Provider = plan.pool.credentials.provider
        if trust_anchor is not None:
            trust_policy = trust_anchor.arn.apply(lambda arn: json.dumps(roles_anywhere_trust_policy(arn)))
        else:
            region = ctx.region
            trust_policy = pulumi.Output.all(ctx.account_id, ctx.partition).apply(
                lambda v: json.dumps(ssm_trust_policy(v[0], region, v[1]))
            )
        role = aws.iam.Role(
            f"{prefix}-hybrid-node",
            description=f"EKS hybrid nodes of pool {plan.name} ({provider}), cluster {ctx.cluster_name_plain}",
            assume_role_policy=trust_policy,
            max_session_duration=(
                ROLES_ANYWHERE_ROLE_MAX_SESSION_SECONDS if provider == "iam-roles-anywhere" else None
            ),
            tags=dict(pool_tags),
            opts=child,
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{prefix}-hybrid-node-{policy}",
                role=role.name,
                policy_arn=aws_managed_policy_arn(ctx.partition, policy),
                opts=child,
            )
            for policy in managed_policy_names(provider)
        ]
        inline = aws.iam.RolePolicy(
            f"{prefix}-hybrid-node",
            role=role.id,
            policy=ctx.cluster_arn.apply(lambda arn: json.dumps(hybrid_node_policy(arn, provider))),
            opts=child,
        )
        return role, attachments, inline

    def _roles_anywhere_profile(
        self,
        prefix: str,
        pool_tags: Mapping[str, str],
        trust_anchor: aws.rolesanywhere.TrustAnchor,
        role: aws.iam.Role,
    ) -> tuple[aws.rolesanywhere.Profile, pulumi.Output[SsmActivation | RolesAnywhere]]:
        """The Roles Anywhere profile that maps a server's certificate to the role; returns it and the credentials
        the NodeConfig names. nodeadm uses the node name as role session name, which the trust policy ties to the
        certificate's CN."""
        profile = aws.rolesanywhere.Profile(
            f"{prefix}-hybrid-node",
            enabled=True,
            role_arns=[role.arn],
            accept_role_session_name=True,
            duration_seconds=ROLES_ANYWHERE_SESSION_SECONDS,
            tags=dict(pool_tags),
            opts=pulumi.ResourceOptions(parent=self),
        )
        credentials: pulumi.Output[SsmActivation | RolesAnywhere] = pulumi.Output.all(
            trust_anchor.arn, profile.arn, role.arn
        ).apply(lambda v: RolesAnywhere(trust_anchor_arn=v[0], profile_arn=v[1], role_arn=v[2]))
        return profile, credentials

    def _ssm_activation(
        self,
        plan: PoolPlan,
        prefix: str,
        pool_tags: Mapping[str, str],
        role: aws.iam.Role,
        role_policies: Sequence[pulumi.Resource],
    ) -> tuple[aws.ssm.Activation, pulumi.Output[SsmActivation | RolesAnywhere]]:
        """An SSM hybrid activation sized to the pool (a leaked code registers no more servers than it has); returns
        it and the credentials the NodeConfig names. It waits for the role's policies, which registration uses."""
        ctx = self._ctx
        activation = aws.ssm.Activation(
            f"{prefix}-hybrid-node",
            name=activation_name(prefix, plan.pool),
            description=f"EKS hybrid nodes of pool {plan.name}, cluster {ctx.cluster_name_plain}",
            iam_role=role.name,
            registration_limit=registration_limit(plan.pool),
            expiration_date=activation_expiry(self._clock(), plan.pool.credentials.activation_expiry_hours),
            # Registered instances inherit the activation's tags; the role may deregister only those.
            tags={**pool_tags, SSM_DEREGISTER_TAG_KEY: ctx.cluster_arn},
            # The expiry is computed from the clock: without this, every `pulumi up` would replace the
            # activation (a new code for servers that already joined). Replace it on purpose to re-issue.
            # The provider does not mark the code secret: without this it would sit in the state in plain text, and
            # anyone who reads the state could register servers into the cluster until the activation expires.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(role_policies),
                ignore_changes=["expirationDate"],
                additional_secret_outputs=["activation_code"],
            ),
        )
        credentials: pulumi.Output[SsmActivation | RolesAnywhere] = pulumi.Output.all(
            activation.id, activation.activation_code
        ).apply(lambda v: SsmActivation(activation_id=v[0], activation_code=v[1]))
        return activation, credentials

    def _node_config(
        self, plan: PoolPlan, credentials: pulumi.Output[SsmActivation | RolesAnywhere]
    ) -> pulumi.Output[str]:
        """The pool's `nodeadm init` NodeConfig, a secret: it carries the activation code. Built from the cluster's
        endpoint and CA outputs, so nodeadm needs no `eks:DescribeCluster` call."""
        ctx = self._ctx
        cluster_name, region, service_cidr = ctx.cluster_name_plain, ctx.region, ctx.service_cidr
        rendered: pulumi.Output[str] = pulumi.Output.all(ctx.endpoint, ctx.certificate_authority, credentials).apply(
            lambda v: render_node_config(
                hybrid_node_config(cluster_name, region, ClusterDetails(v[0], v[1], service_cidr), v[2], plan)
            )
        )
        return pulumi.Output.secret(rendered)

    def _api_ingress(
        self, plan: PoolPlan, prefix: str, pool_tags: dict[str, str]
    ) -> list[aws.vpc.SecurityGroupIngressRule]:
        """TCP 443 into the cluster security group from the pool's node and pod networks (facts §5f)."""
        network = plan.pool.network
        if network is None:
            return []
        sources = [("nodes", str(c)) for c in network.remote_node_cidrs]
        sources += [("pods", str(c)) for c in network.remote_pod_cidrs]
        return [
            aws.vpc.SecurityGroupIngressRule(
                f"{prefix}-api-from-{kind}-{cidr_resource_name(cidr)}",
                security_group_id=self._ctx.cluster_security_group_id,
                cidr_ipv4=cidr,
                ip_protocol="tcp",
                from_port=API_SERVER_PORT,
                to_port=API_SERVER_PORT,
                description=f"Kubernetes API from hybrid pool {plan.name} remote {kind} {cidr}",
                tags=pool_tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for kind, cidr in sources
        ]

    def _network_rule(
        self, plan: PoolPlan, rule: NetworkRule, prefix: str, pool_tags: dict[str, str]
    ) -> aws.vpc.SecurityGroupIngressRule | aws.vpc.SecurityGroupEgressRule:
        """One of the pool's planned kubelet, webhook and DNS rules (`components.planning.hybrid.network_rules`), on
        the cluster security group (control plane) or the node security group (CoreDNS on cloud nodes)."""
        group = self._ctx.cluster_security_group_id if rule.group == "cluster" else self._ctx.node_security_group_id
        rule_type = aws.vpc.SecurityGroupIngressRule if rule.direction == "ingress" else aws.vpc.SecurityGroupEgressRule
        return rule_type(
            f"{prefix}-{rule.name}-{cidr_resource_name(rule.cidr)}",
            security_group_id=group,
            cidr_ipv4=rule.cidr,
            ip_protocol=rule.protocol,
            from_port=rule.from_port,
            to_port=rule.to_port,
            description=rule.description,
            tags=pool_tags,
            opts=pulumi.ResourceOptions(parent=self),
        )

    # ------------------------------------------------------------------------------------------------- Cilium
    def _cilium(self, plans: Sequence[PoolPlan]) -> k8s.helm.v3.Release:
        """Cilium from the AWS-maintained chart (pin in the catalog), for every hybrid pool at once.

        `skip_await`: Helm's wait would block `pulumi up` until Cilium runs, but it can only run once servers
        have joined, which they do after this stack exists, with the NodeConfig it outputs.
        """
        return helm_release(
            f"{self._ctx.cluster_name_plain}-cilium",
            "cilium",
            versions.chart("cilium"),
            CILIUM_NAMESPACE,
            cilium_values(plans),
            self._ctx,
            parent=self,
            skip_await=True,
        )

    # ------------------------------------------------------------------------------------------------ outputs
    def exports(self) -> dict[str, Any]:
        """Per pool: the NodeConfig (secret), the `nodeadm install` command line and the join script the server owner
        runs; with BGP pools, the Cilium BGP objects to `kubectl apply` once the first server is Ready
        (`hybridCiliumBgp`)."""
        out: dict[str, Any] = {}
        for name, pool in self.pools.items():
            out[f"hybridNodeConfig-{name}"] = pool.node_config
            out[f"hybridNodeadmInstall-{name}"] = pool.install_command
            out[f"hybridJoinScript-{name}"] = pool.join_script
            out[f"hybridNodeRoleArn-{name}"] = pool.role.arn
        bgp = cilium_bgp_manifests([pool.plan for pool in self.pools.values()])
        if bgp:
            out["hybridCiliumBgp"] = render_manifests(bgp)
        return out
