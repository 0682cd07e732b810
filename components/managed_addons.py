"""EKS managed add-ons: VPC CNI, kube-proxy, Pod Identity agent, node monitoring agent, CoreDNS, EBS CSI driver.

They are built in two steps because EKS only reports an add-on ACTIVE once its pods run:

1. node agents (`NODE_AGENT_ADDONS`, DaemonSets: vpc-cni, kube-proxy, eks-pod-identity-agent; and on a stack with
   GPU pools the node monitoring agent, `node_agent_addons`) right after the control plane. A DaemonSet with no
   nodes is healthy, and nodes need the CNI to become Ready at all, so these must not wait for any node;
2. system add-ons (`SYSTEM_ADDONS`, Deployments: coredns, aws-ebs-csi-driver) once the system pool exists. Their
   pods are pinned to the system pool (`gpu-clusters/role=system`), so CoreDNS and the EBS controller never land on
   (or wait for) a GPU node. Created before any node, they would sit DEGRADED until the create times out.

`GpuCluster` builds step 1 with the cluster core and step 2 after the node pools:

    ManagedAddons(f"{name}-system-addons", ctx, SYSTEM_ADDONS, after=[system_pool, node_agents])

Versions (`addon_version`): the stack's pin (`addons.managed.pins`) when given, else the exact version
`components/catalog/versions.yaml` records for the cluster's Kubernetes version. EKS is never asked for its default
version: that default moves when AWS publishes a build, and with `OVERWRITE` an unrelated `pulumi up` would then
upgrade every add-on. Pins are checked against the catalog minimum (vpc-cni: the first release that accepts
efa-only interfaces); the catalog's own versions are checked against it when the catalog loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.catalog import versions
from components.context import ClusterContext
from components.errors import ConfigError, Problem
from components.identity import PodIdentityRoles
from components.planning import compute_types
from components.planning.addons.node_monitoring import (
    NODE_MONITORING_AGENT,
    agent_wanted,
    node_monitoring_configuration,
)
from components.planning.addons.placement import CRITICAL_ADDONS_ONLY, SYSTEM_NODE_SELECTOR, tolerations_for
from components.planning.hybrid import ZONE_LABEL, pod_identity_agent_hybrid_configuration
from components.planning.key_policy import ebs_csi_key_policy
from components.planning.max_pods import VPC_CNI_PREFIX_DELEGATION
from components.planning.pools import PoolPlan
from components.planning.tolerations import hybrid_outage_tolerations

POD_IDENTITY_AGENT = "eks-pod-identity-agent"
NODE_AGENT_ADDONS: tuple[str, ...] = ("vpc-cni", "kube-proxy", POD_IDENTITY_AGENT)


def node_agent_addons(plans: Sequence[PoolPlan]) -> tuple[str, ...]:
    """The node agents a stack gets: `NODE_AGENT_ADDONS`, and the node monitoring agent when a pool has GPUs (it
    sets the GPU nodes' health conditions, `components.planning.addons.node_monitoring`). Its DaemonSets run on the
    host network or a host port, so they need no CNI, and with no node yet EKS reports them ACTIVE."""
    return NODE_AGENT_ADDONS + ((NODE_MONITORING_AGENT,) if agent_wanted(plans) else ())


#: Cluster DNS. Kubernetes objects wait for this add-on (`ClusterContext.kubernetes_ready`): ACTIVE means its pods
#: run on a Ready system node.
DNS_ADDON = "coredns"
SYSTEM_ADDONS: tuple[str, ...] = (DNS_ADDON, "aws-ebs-csi-driver")
#: Existing add-on objects (e.g. a self-managed copy) are taken over; the stack is the source of truth.
RESOLVE_CONFLICTS = "OVERWRITE"

#: CoreDNS replicas: two, so DNS survives a node drain; the system pool has two nodes by default.
COREDNS_REPLICAS = 2
#: With hybrid pools, one more replica for the on-prem side: AWS recommends "at least one CoreDNS replica on hybrid
#: nodes and at least one CoreDNS replica on your nodes in AWS Cloud" (EKS user guide, "Configure webhooks for hybrid
#: nodes", Configure CoreDNS replicas).
COREDNS_HYBRID_REPLICAS = 1
#: The label CoreDNS pods carry, which its anti-affinity and spread constraint select by (AWS's CoreDNS example).
COREDNS_POD_LABEL = {"k8s-app": "kube-dns"}
#: AWS's weights: spread replicas over nodes first (100), then over zones (50), the on-prem zone among them.
COREDNS_SPREAD = (("kubernetes.io/hostname", 100), (ZONE_LABEL, 50))
#: The label a Deployment's ReplicaSet stamps on its pods; counting only the pods of the same ReplicaSet
#: (`matchLabelKeys`, [K8SSPREAD]) makes a rollout place its new pods one per zone
#: whatever the old ones did, which is how a replica gets on-prem after the first server joins.
POD_TEMPLATE_HASH = "pod-template-hash"
#: The `kube-dns` Service routes to the closest replica: a pod on a server resolves through the on-prem replica, a
#: pod in an AZ through that AZ's ([EKSHYBDNS] "Configure Service Traffic Distribution"; [K8STD]). `PreferClose` is
#: the value AWS's guide sets and the one Cilium's service topology matches on the servers; Kubernetes 1.34+ reads it
#: as its new name `PreferSameZone`.
KUBE_DNS_SERVICE = "kube-dns"
KUBE_DNS_TRAFFIC_DISTRIBUTION = "PreferClose"


#: The VPC CNI's network policy agent, on: without it the NetworkPolicies (components.planning.network_policies) are
#: accepted and never enforced on EC2 nodes. The add-on's configuration key and value, a string ([EKSNP] step 2 and
#: step 4, `{"enableNetworkPolicy": "true"}`); it needs VPC CNI 1.14+ (the catalog pins 1.22), a 1.25+ cluster and
#: kernel 5.10+ with the BPF file system mounted, which the EKS AL2023 and Bottlerocket AMIs for 1.27+ have.
#: Standard mode (the default `NETWORK_POLICY_ENFORCING_MODE`): a new pod starts open until its policies are
#: programmed; strict mode would deny every pod's traffic, CoreDNS's included, until a policy allows it.
VPC_CNI_NETWORK_POLICY = "true"

#: The VPC CNI's service account and the AWS managed policy its IPv4 cluster needs ("Configure Amazon VPC CNI plugin
#: to use IRSA", https://docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html: the plugin runs as `aws-node`
#: and "also supports Amazon EKS Pod Identities"; AWS recommends a separate role over the node role). Through Pod
#: Identity the permissions (every network interface of the account) stay with the `aws-node` pods: a pod that
#: reaches the node's instance credentials gets no CNI rights. The cluster is IPv4 only (`components.cluster`).
VPC_CNI_NAMESPACE = "kube-system"
VPC_CNI_SERVICE_ACCOUNT = "aws-node"
VPC_CNI_MANAGED_POLICY = "AmazonEKS_CNI_Policy"

#: The EBS CSI controller's service account and the AWS managed policy it needs
#: (https://docs.aws.amazon.com/eks/latest/userguide/ebs-csi.html).
EBS_CSI_NAMESPACE = "kube-system"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
EBS_CSI_MANAGED_POLICY = "service-role/AmazonEBSCSIDriverPolicy"


def coredns_replicas(cloud_zones: int) -> int:
    """Replicas with hybrid pools: one per zone a system node can be in (at least the two that survive a drain),
    plus the on-prem one. With at least as many replicas as zones, a spread of skew 1 leaves no zone, the on-prem
    one included, without a replica."""
    return max(COREDNS_REPLICAS, cloud_zones) + COREDNS_HYBRID_REPLICAS


def coredns_configuration(hybrid_pools: Sequence[PoolPlan], cloud_zones: int = COREDNS_REPLICAS) -> dict[str, Any]:
    """CoreDNS: two replicas on the system pool; with hybrid pools, one per zone, the on-prem zone included.

    The hybrid case follows AWS's mixed-mode guidance (EKS user guide, "Configure webhooks for hybrid nodes",
    Configure CoreDNS replicas), set through the add-on's configuration as that page allows (its schema declares
    `affinity`, `tolerations` and `topologySpreadConstraints`): the nodes are the system pool or hybrid nodes (two node
    selector terms, either matches), the hybrid pools' taints are tolerated (the A40 servers are tainted
    `nvidia.com/gpu`), and a preferred pod anti-affinity spreads replicas over nodes (100) and zones (50). Hybrid
    nodes register `topology.kubernetes.io/zone=onprem` (`components.planning.hybrid.hybrid_node_config`).

    What puts a replica on-prem and keeps it there (docs/operations.md, "CoreDNS on the servers"):
    - a required zone spread of skew 1 over the replicas of one ReplicaSet (`matchLabelKeys: pod-template-hash`),
      with `coredns_replicas` replicas: before any server joins every replica fits the cloud zones (the add-on becomes
      ACTIVE); from the first rollout after a server joins, exactly one lands on-prem. `nodeTaintsPolicy: Honor`
      leaves a zone whose nodes are all unreachable (tainted, not tolerated for scheduling) out of the count, so a
      lost AZ or a lost site sends the replacement to the zones that remain instead of leaving it Pending;
    - the hybrid pools' outage tolerations (`hybrid_outage_tolerations`): the on-prem replica is not evicted during
      a site-link outage shorter than that, and keeps answering the servers' pods from its cache.
    """
    if not hybrid_pools:
        return {
            "replicaCount": COREDNS_REPLICAS,
            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
            "tolerations": [dict(CRITICAL_ADDONS_ONLY)],
        }
    system_term = [{"key": key, "operator": "In", "values": [value]} for key, value in SYSTEM_NODE_SELECTOR.items()]
    selector = {"matchExpressions": [{"key": k, "operator": "In", "values": [v]} for k, v in COREDNS_POD_LABEL.items()]}
    return {
        "replicaCount": coredns_replicas(cloud_zones),
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": system_term},
                        {"matchExpressions": [compute_types.on_compute_type(compute_types.HYBRID)]},
                    ]
                }
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": weight, "podAffinityTerm": {"labelSelector": selector, "topologyKey": key}}
                    for key, weight in COREDNS_SPREAD
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE_LABEL,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": dict(COREDNS_POD_LABEL)},
                "matchLabelKeys": [POD_TEMPLATE_HASH],
                "nodeTaintsPolicy": "Honor",
            }
        ],
        "tolerations": [*tolerations_for(hybrid_pools), *hybrid_outage_tolerations(hybrid_pools)],
    }


def kube_dns_service_patch(hybrid_pools: Sequence[PoolPlan]) -> dict[str, Any] | None:
    """The `kube-dns` Service's `spec` fields the stack sets with hybrid pools (None without them). The CoreDNS
    add-on's configuration schema ([EKSCOREDNSCFG]) has no field for the Service's traffic distribution, so a
    server-side apply patch sets it: EKS's add-on manager applies only the fields it owns, and leaves this one to
    its own manager."""
    return {"trafficDistribution": KUBE_DNS_TRAFFIC_DISTRIBUTION} if hybrid_pools else None


def addon_configuration(
    name: str,
    hybrid_pools: Sequence[PoolPlan] = (),
    cloud_zones: int = COREDNS_REPLICAS,
    plans: Sequence[PoolPlan] = (),
) -> dict[str, Any] | None:
    """The `configuration_values` of an add-on (pure; validated by EKS against the add-on's JSON schema).
    `hybrid_pools` are the stack's hybrid pool plans: CoreDNS puts a replica on them, and the Pod Identity agent
    runs its hybrid DaemonSet for them. `cloud_zones`: how many AZs the system pool spans (CoreDNS's replicas).
    `plans`: every pool plan (the node monitoring agent's DCGM server tolerates the GPU pools' taints)."""
    if name == "vpc-cni":
        # Replaces the add-on's default affinity, so it restates linux/amd64|arm64 and adds the exclusions. Prefix
        # delegation is stated, not left to the default: every node's maxPods is computed from it. The network
        # policy agent enforces the stack's NetworkPolicies on EC2 nodes (`VPC_CNI_NETWORK_POLICY`).
        return {
            "enableNetworkPolicy": VPC_CNI_NETWORK_POLICY,
            "env": {"ENABLE_PREFIX_DELEGATION": "true" if VPC_CNI_PREFIX_DELEGATION else "false"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                                    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
                                    compute_types.in_vpc_only(),
                                ]
                            }
                        ]
                    }
                }
            },
        }
    if name == DNS_ADDON:
        return coredns_configuration(hybrid_pools, cloud_zones)
    if name == POD_IDENTITY_AGENT:
        # Pods of hybrid nodes get Pod Identity credentials only from the add-on's hybrid DaemonSet.
        return pod_identity_agent_hybrid_configuration() if hybrid_pools else None
    if name == NODE_MONITORING_AGENT:
        return node_monitoring_configuration(plans)
    if name == "aws-ebs-csi-driver":
        # The controller runs on the system pool; the node DaemonSet keeps its default of tolerating every taint,
        # so GPU pods can mount EBS volumes too. Its default affinity keeps it off hybrid nodes: AWS gave the add-ons
        # that do not support them an affinity on `eks.amazonaws.com/compute-type` (hybrid-nodes-add-ons.html).
        return {
            "controller": {
                "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
                "tolerations": [dict(CRITICAL_ADDONS_ONLY)],
            }
        }
    return None


def addon_version(name: str, kubernetes_version: str, pins: Mapping[str, str]) -> str:
    """The exact version an add-on installs: the stack's pin, checked against the catalog minimum (ConfigError below
    it), else the catalog's version for the cluster's Kubernetes version. Unknown add-on names raise KeyError."""
    catalog_pin = versions.managed_addon(name)
    pin = pins.get(name)
    if pin is None:
        return catalog_pin.version_for(kubernetes_version)
    if not catalog_pin.accepts(pin):
        raise ConfigError(
            [
                Problem(
                    f"addons.managed.pins.{name}",
                    f"{pin} is below the minimum {catalog_pin.minimum_version} "
                    f"({catalog_pin.reason}; source {catalog_pin.source})",
                )
            ]
        )
    return pin


class ManagedAddons(pulumi.ComponentResource):
    """A set of EKS managed add-ons, each an `aws.eks.Addon` named `<cluster>-<add-on>`.

    `addons` picks the set (NODE_AGENT_ADDONS or SYSTEM_ADDONS, or any catalog add-on); `after` lists what they
    must wait for (the system pool for SYSTEM_ADDONS); `hybrid_pools` the hybrid pool plans CoreDNS also runs
    on and the Pod Identity agent serves; `plans` every pool plan (the node monitoring agent's tolerations).
    Attributes: `addons` ({name: aws.eks.Addon}) and `roles` ({name: IAM role} for add-ons with a Pod Identity role).
    """

    def __init__(
        self,
        name: str,
        ctx: ClusterContext,
        addons: Sequence[str],
        after: Sequence[pulumi.Resource] = (),
        hybrid_pools: Sequence[PoolPlan] = (),
        cloud_zones: int = COREDNS_REPLICAS,
        plans: Sequence[PoolPlan] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:ManagedAddons", name, None, opts)
        self.kube_dns: k8s.core.v1.ServicePatch | None = None
        self.addons: dict[str, aws.eks.Addon] = {}
        self.roles: dict[str, aws.iam.Role] = {}
        for addon in addons:
            version = addon_version(addon, ctx.kubernetes_version, ctx.managed_addon_pins)
            wait_for: list[pulumi.Resource] = list(after)
            if addon == "aws-ebs-csi-driver":
                wait_for.extend(self._ebs_csi_identity(ctx))
            if addon == "vpc-cni":
                wait_for.extend(self._vpc_cni_identity(ctx))
            config = addon_configuration(addon, hybrid_pools, cloud_zones, plans)
            self.addons[addon] = aws.eks.Addon(
                f"{ctx.cluster_name_plain}-{addon}",
                cluster_name=ctx.cluster_name,
                addon_name=addon,
                addon_version=version,
                configuration_values=json.dumps(config, sort_keys=True) if config is not None else None,
                resolve_conflicts_on_create=RESOLVE_CONFLICTS,
                resolve_conflicts_on_update=RESOLVE_CONFLICTS,
                tags=dict(ctx.tags),
                opts=pulumi.ResourceOptions(parent=self, depends_on=wait_for),
            )
            service = kube_dns_service_patch(hybrid_pools) if addon == DNS_ADDON else None
            if service is not None:
                self.kube_dns = self._kube_dns(ctx, service, self.addons[addon])
        self.register_outputs({name: a.addon_version for name, a in self.addons.items()})

    def _kube_dns(self, ctx: ClusterContext, spec: dict[str, Any], dns: aws.eks.Addon) -> k8s.core.v1.ServicePatch:
        """Server-side apply of the stack's fields of the `kube-dns` Service, once the add-on is ACTIVE (the Service is
        the add-on's; the patch adds the traffic distribution and removes only it when the stack goes)."""
        return k8s.core.v1.ServicePatch(
            f"{ctx.cluster_name_plain}-{KUBE_DNS_SERVICE}",
            metadata=k8s.meta.v1.ObjectMetaPatchArgs(name=KUBE_DNS_SERVICE, namespace="kube-system"),
            spec=cast(Any, spec),
            opts=pulumi.ResourceOptions(parent=self, provider=ctx.k8s_provider, depends_on=[dns]),
        )

    def _vpc_cni_identity(self, ctx: ClusterContext) -> list[pulumi.Resource]:
        """The VPC CNI's Pod Identity role (`AmazonEKS_CNI_Policy`, off the node role); returns what to wait for.

        The add-on waits for the association, so the first `aws-node` pod is admitted with Pod Identity credentials
        (EKS injects them when a pod is created). Nodes join only after the node agents, and the Pod Identity agent
        runs on the host network (`hostNetwork: true` in aws/eks-pod-identity-agent's chart), so it serves the
        `aws-node` pods of a node before that node has pod networking."""
        role = ctx.pod_identity_role(
            "vpc-cni", VPC_CNI_NAMESPACE, VPC_CNI_SERVICE_ACCOUNT, None, [VPC_CNI_MANAGED_POLICY], self
        )
        self.roles["vpc-cni"] = role
        if isinstance(ctx.pod_identity_role, PodIdentityRoles):
            return [role, ctx.pod_identity_role.associations["vpc-cni"]]
        return [role]

    def _ebs_csi_identity(self, ctx: ClusterContext) -> list[pulumi.Resource]:
        """The EBS CSI controller's Pod Identity role (managed policy + the cluster key); returns what to wait for."""
        role = ctx.pod_identity_role(
            "ebs-csi",
            EBS_CSI_NAMESPACE,
            EBS_CSI_SERVICE_ACCOUNT,
            pulumi.Output.from_input(ctx.kms_key_arn).apply(lambda arn: json.dumps(ebs_csi_key_policy(arn))),
            [EBS_CSI_MANAGED_POLICY],
            self,
        )
        self.roles["aws-ebs-csi-driver"] = role
        # The controller's pods get credentials only if the association exists when they start.
        if isinstance(ctx.pod_identity_role, PodIdentityRoles):
            return [role, ctx.pod_identity_role.associations["ebs-csi"]]
        return [role]
