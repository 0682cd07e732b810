"""EKS Hybrid Nodes, planned: remote networks, IAM documents, Cilium values and the nodeadm NodeConfig.

Hybrid pools are servers we do not launch (the 4xA40 inference boxes AWS does not rent). The cloud side can only
prepare what those servers need to join: the cluster's remote network configuration, an IAM role their
credentials resolve to, an SSM hybrid activation or an IAM Roles Anywhere trust anchor, an access entry, API
server reachability, a CNI that runs on them, and the `NodeConfig` the server owner feeds to `nodeadm init`.
Everything here is a pure function of the validated spec and the pool plans (no Pulumi), so the component, the plan
summary and the tests read the same values. Facts come from docs/sources.md: aws-gpu-facts.md §5f ([BC], [EKSUG])
unless a line cites another source.

Config rules for hybrid pools (RFC 1918, overlaps, activation limit, pod CIDRs for Cilium's pool) live in
`components.validation`; this module assumes a spec that passed them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Network
from typing import Any, Literal

import yaml

from components import tags
from components.config import NodePool
from components.planning import compute_types
from components.planning.nodeadm import NODEADM_API_VERSION, kubelet_flags
from components.planning.pools import PoolPlan
from components.planning.tolerations import toleration

# ----------------------------------------------------------------------------------------------------- constants
#: Access entry type for the hybrid nodes role ([BC] §5e; [EKSUG] hybrid-nodes-cluster-prep).
ACCESS_ENTRY_TYPE = "HYBRID_LINUX"
#: Remote nodes and pods reach the Kubernetes API on TCP 443; the cluster security group must admit both remote
#: networks (facts §5f "Cluster SG must allow inbound 443 from remote node (and pod) CIDRs").
API_SERVER_PORT = 443

#: `nodeadm install --credential-provider` values per config provider (facts §5f: `ssm|iam-ra`).
NODEADM_CREDENTIAL_PROVIDER: Mapping[str, str] = {"ssm": "ssm", "iam-roles-anywhere": "iam-ra"}

#: Managed policies of the hybrid nodes role ([EKSUG] hybrid-nodes-creds, facts §5f): ECR pulls for both
#: providers, the SSM agent's core permissions for SSM only.
ECR_PULL_ONLY_POLICY = "AmazonEC2ContainerRegistryPullOnly"
SSM_CORE_POLICY = "AmazonSSMManagedInstanceCore"

#: The activation tag the role's `ssm:DeregisterManagedInstance` permission is conditioned on, so a node can only
#: deregister instances of this cluster's activations (default key of AWS's template, facts §5f).
SSM_DEREGISTER_TAG_KEY = "EKSClusterARN"

#: IAM Roles Anywhere sessions: 1 h default, 12 h max, and the role's MaxSessionDuration must exceed the profile's
#: `durationSeconds` (facts §5f). We keep the default session and give the role twice that.
ROLES_ANYWHERE_SESSION_SECONDS = 3600
ROLES_ANYWHERE_ROLE_MAX_SESSION_SECONDS = 2 * ROLES_ANYWHERE_SESSION_SECONDS
#: Where nodeadm's IAM Roles Anywhere examples and AWS's own end-to-end tests put the node certificate and key
#: (aws/eks-hybrid test/e2e credentials provider: `/etc/iam/pki/server.pem`, `/etc/iam/pki/server.key`).
ROLES_ANYWHERE_CERTIFICATE_PATH = "/etc/iam/pki/server.pem"
ROLES_ANYWHERE_PRIVATE_KEY_PATH = "/etc/iam/pki/server.key"
#: The Roles Anywhere `nodeName` must equal the node certificate's CN and is at most 64 characters (facts §5f), so
#: it is per server and unknown here: the rendered NodeConfig carries this placeholder, replaced on each server.
ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER = "REPLACE-WITH-CERTIFICATE-CN"

#: The kubelet's port: the control plane reaches it on remote nodes for logs, exec and port-forward (EKS user guide,
#: "Prepare networking for hybrid nodes", cluster security group table: outbound TCP 10250 to remote node CIDRs).
KUBELET_PORT = 10250
#: Port ranges the control plane calls webhooks on in remote pods (same table: outbound "webhook ports" to remote pod
#: CIDRs): 443, and the high ports webhooks and aggregated APIs usually serve on, as for cloud nodes.
WEBHOOK_PORT_RANGES: tuple[tuple[int, int], ...] = ((443, 443), (1025, 65535))
#: DNS: pods on hybrid nodes reach CoreDNS on cloud nodes on TCP and UDP 53 (same page, on-premises table: "If you
#: run at least 1 replica of CoreDNS in the cloud, you must allow DNS traffic to the VPC where CoreDNS is running").
DNS_PORT = 53
DNS_PROTOCOLS: tuple[Literal["udp", "tcp"], ...] = ("udp", "tcp")
#: The zone label hybrid nodes register with, so CoreDNS's zone anti-affinity places a replica on-prem beside the
#: cloud ones (EKS user guide, "Configure webhooks for hybrid nodes", Configure CoreDNS replicas: "Add a topology
#: zone label for each of your hybrid nodes, for example `topology.kubernetes.io/zone: onprem` ... in your nodeadm
#: configuration"). Cloud nodes carry their AZ in the same label.
ZONE_LABEL = "topology.kubernetes.io/zone"
HYBRID_ZONE = "onprem"

#: Each node gets one /25 from the cluster pool (128 addresses, AWS's hybrid-nodes-cni example value and the
#: eks-workshop's), enough for kubelet's default 110 pods. Cilium cannot change it after the first install.
CILIUM_NODE_MASK_SIZE = 25
CILIUM_NAMESPACE = "kube-system"
#: Taints the Cilium operator must tolerate to start on a hybrid node before that node is Ready: the node stays
#: NotReady until a CNI runs (https://docs.aws.amazon.com/eks/latest/userguide/hybrid-nodes-cni.html), and Cilium
#: taints nodes with `node.cilium.io/agent-not-ready` until its agent is up (Cilium "agentNotReadyTaintKey").
CILIUM_OPERATOR_STARTUP_TAINTS = ("node.kubernetes.io/not-ready", "node.cilium.io/agent-not-ready")

Provider = Literal["ssm", "iam-roles-anywhere"]


# ---------------------------------------------------------------------------------------------- remote networks
def hybrid_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """The plans of `kind: hybrid` pools, in config order."""
    return [plan for plan in plans if plan.kind == "hybrid"]


def _cidrs(pools: Iterable[NodePool], key: Literal["remote_node_cidrs", "remote_pod_cidrs"]) -> list[str]:
    found: dict[str, None] = {}
    for pool in pools:
        if pool.network is not None:
            found.update((str(cidr), None) for cidr in getattr(pool.network, key))
    return list(found)


def remote_node_cidrs(hybrid_pools: Iterable[NodePool]) -> list[str]:
    """Every hybrid pool's on-prem node networks, in config order, each once."""
    return _cidrs(hybrid_pools, "remote_node_cidrs")


def remote_pod_cidrs(hybrid_pools: Iterable[NodePool]) -> list[str]:
    """Every hybrid pool's on-prem pod networks, in config order, each once."""
    return _cidrs(hybrid_pools, "remote_pod_cidrs")


def remote_network_config(hybrid_pools: Sequence[NodePool]) -> dict[str, Any] | None:
    """The EKS cluster's `remoteNetworkConfig`, or None when the stack has no hybrid pools.

    The API takes at most one node-network object and one pod-network object, each a list of CIDRs ([BC] §5f),
    so every hybrid pool's networks go into the same object. Validation requires pod networks on every hybrid
    pool (they are Cilium's pool); a pool built without them leaves the pod network out. Shaped as pulumi-aws
    `ClusterRemoteNetworkConfigArgs` wire names, so `components.cluster` can pass it straight to
    `aws.eks.Cluster(remote_network_config=...)`.
    """
    nodes = remote_node_cidrs(hybrid_pools)
    if not nodes:
        return None
    config: dict[str, Any] = {"remoteNodeNetworks": {"cidrs": nodes}}
    pods = remote_pod_cidrs(hybrid_pools)
    if pods:
        config["remotePodNetworks"] = {"cidrs": pods}
    return config


def cilium_node_blocks(cidrs: Iterable[IPv4Network | str]) -> int:
    """How many nodes the pod CIDRs can serve: Cilium hands each node one /25 (`CILIUM_NODE_MASK_SIZE`).

    For a config rule: a hybrid pool whose pod CIDRs give fewer blocks than its node count leaves servers without
    pod addresses (a CIDR smaller than /25 gives none).
    """
    blocks = 0
    for cidr in cidrs:
        prefix = IPv4Network(str(cidr)).prefixlen
        if prefix <= CILIUM_NODE_MASK_SIZE:
            blocks += 2 ** (CILIUM_NODE_MASK_SIZE - prefix)
    return blocks


@dataclass(frozen=True)
class NetworkRule:
    """One security group rule the AWS side needs for a hybrid pool's remote networks, besides API ingress.

    `group` is the EKS cluster security group (control plane ENIs) or the node security group (cloud nodes, where
    CoreDNS runs); `name` and the CIDR together are unique per pool and name the resource.
    """

    name: str
    group: Literal["cluster", "node"]
    direction: Literal["ingress", "egress"]
    protocol: Literal["tcp", "udp"]
    from_port: int
    to_port: int
    cidr: str
    description: str


def network_rules(pool: NodePool) -> list[NetworkRule]:
    """The rules of AWS's hybrid nodes networking tables that concern AWS security groups, for one pool:

    - control plane to kubelet: cluster group egress, TCP 10250, to each remote node CIDR;
    - control plane to webhooks: cluster group egress, TCP 443 and 1025-65535, to each remote pod CIDR, unless the
      pool says no webhooks run on it (`webhooksOnHybridNodes: false`);
    - pods to CoreDNS on cloud nodes: node group ingress, UDP and TCP 53, from each remote node CIDR (Cilium
      masquerades pod traffic leaving the cluster to the node's address by default, hybrid-nodes-cni) and each
      remote pod CIDR (traffic that is not masqueraded).

    Nodes and pods to the API server (cluster group ingress, TCP 443) are `API_SERVER_PORT` rules of their own.
    The CNI's own traffic (Cilium VXLAN 8472/UDP, health 4240/TCP and ICMP) stays between the on-prem servers:
    Cilium does not run on cloud nodes, so no AWS security group sees it; the site firewall must admit it.
    """
    network = pool.network
    if network is None:
        return []
    nodes = [str(c) for c in network.remote_node_cidrs]
    pods = [str(c) for c in network.remote_pod_cidrs]
    rules = [
        NetworkRule(
            name="kubelet-to-nodes",
            group="cluster",
            direction="egress",
            protocol="tcp",
            from_port=KUBELET_PORT,
            to_port=KUBELET_PORT,
            cidr=cidr,
            description=f"control plane to kubelet (logs, exec, port-forward) on hybrid pool {pool.name} nodes {cidr}",
        )
        for cidr in nodes
    ]
    if network.webhooks_on_hybrid_nodes:
        rules += [
            NetworkRule(
                name=f"webhooks-to-pods-{low}",
                group="cluster",
                direction="egress",
                protocol="tcp",
                from_port=low,
                to_port=high,
                cidr=cidr,
                description=f"control plane to webhooks on hybrid pool {pool.name} pods {cidr}",
            )
            for low, high in WEBHOOK_PORT_RANGES
            for cidr in pods
        ]
    rules += [
        NetworkRule(
            name=f"dns-{protocol}-from-{kind}",
            group="node",
            direction="ingress",
            protocol=protocol,
            from_port=DNS_PORT,
            to_port=DNS_PORT,
            cidr=cidr,
            description=f"DNS ({protocol.upper()}) to CoreDNS from hybrid pool {pool.name} remote {kind} {cidr}",
        )
        for kind, cidrs in (("nodes", nodes), ("pods", pods))
        for cidr in cidrs
        for protocol in DNS_PROTOCOLS
    ]
    return rules


# ------------------------------------------------------------------------------------------- SSM activation
def registration_limit(pool: NodePool) -> int:
    """How many servers the pool's SSM activation admits: the configured limit, else exactly the node count.

    Sizing it to the pool means a leaked activation code cannot register more machines than the pool has.
    """
    if pool.credentials.activation_limit is not None:
        return pool.credentials.activation_limit
    if pool.nodes is None:
        raise ValueError(f"hybrid pool {pool.name!r} has no node count")
    return pool.nodes


def activation_expiry(now: datetime, hours: int) -> str:
    """The activation's `expirationDate`: `now` plus the configured hours, RFC 3339 in UTC (SSM CreateActivation).

    `now` must carry a timezone: a naive datetime would silently shift the expiry by the machine's UTC offset.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("activation_expiry needs a timezone-aware datetime (e.g. datetime.now(UTC))")
    expires = (now + timedelta(hours=hours)).astimezone(UTC)
    return expires.strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------------------------- IAM documents
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
      the latter only on managed instances tagged with this cluster's ARN (the activation's tag).
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
        ]
    return {"Version": "2012-10-17", "Statement": statements}


# ----------------------------------------------------------------------------------------------------- Cilium
def _compute_type_affinity() -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [compute_types.on_compute_type(compute_types.HYBRID)]}]
            }
        }
    }


def cilium_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Helm values for Cilium on hybrid nodes, after AWS's hybrid-nodes-cni page (facts §5f).

    - agent and operator are pinned to `eks.amazonaws.com/compute-type In [hybrid]`: Cilium is not supported on
      cloud nodes, which run the VPC CNI;
    - `ipam.mode: cluster-pool` hands each node a /25 of the remote pod CIDRs, which are exactly the CIDRs EKS
      knows as `remotePodNetworks`, so the control plane can route to webhooks on hybrid nodes; the pool is never
      empty (ValueError), since Cilium would otherwise hand out its chart default, 10.0.0.0/8;
    - with a BGP pool (`network.bgp`), `bgpControlPlane.enabled: true` and `operator.rollOutPods: true`, as AWS's
      hybrid-nodes-cilium-bgp page sets them (the operator must restart to pick BGP up); the BGP objects themselves
      are `cilium_bgp_manifests`;
    - `operator.unmanagedPodWatcher.restart: false`, `envoy.enabled: false`, `kubeProxyReplacement: "false"`
      (EKS installs kube-proxy on hybrid nodes) and `loadBalancer.serviceTopology: true` as AWS lists them;
    - tolerations: the agent is a CNI, so it tolerates every taint (a GPU taint it missed would leave the node
      NotReady forever); the operator tolerates the hybrid pools' taints (the A40 servers are tainted
      `nvidia.com/gpu`) plus the not-ready taints it must start under, and nothing else, so draining a node
      moves it.
    """
    pools = hybrid_plans(plans)
    pod_cidrs = remote_pod_cidrs(plan.pool for plan in pools)
    if not pod_cidrs:
        # Cilium would fall back to its chart default pool (10.0.0.0/8), which EKS neither knows nor routes.
        raise ValueError("Cilium's pod CIDR pool would be empty: every hybrid pool needs network.remotePodCidrs")
    operator_tolerations: list[dict[str, str]] = []
    for plan in pools:
        for taint in plan.taints:
            if toleration(taint) not in operator_tolerations:
                operator_tolerations.append(toleration(taint))
    operator_tolerations += [{"key": key, "operator": "Exists"} for key in CILIUM_OPERATOR_STARTUP_TAINTS]
    affinity = _compute_type_affinity()
    bgp = bool(bgp_pools(pools))
    return {
        "affinity": affinity,
        "tolerations": [{"operator": "Exists"}],
        "ipam": {
            "mode": "cluster-pool",
            "operator": {
                "clusterPoolIPv4PodCIDRList": pod_cidrs,
                "clusterPoolIPv4MaskSize": CILIUM_NODE_MASK_SIZE,
            },
        },
        "operator": {
            "affinity": affinity,
            "tolerations": operator_tolerations,
            "unmanagedPodWatcher": {"restart": False},
            **({"rollOutPods": True} if bgp else {}),
        },
        "loadBalancer": {"serviceTopology": True},
        "envoy": {"enabled": False},
        "kubeProxyReplacement": "false",
        **({"bgpControlPlane": {"enabled": True}} if bgp else {}),
    }


# ------------------------------------------------------------------------------------------------- Cilium BGP
#: Cilium 1.17's BGP control plane v2 API (AWS's hybrid-nodes-cilium-bgp page and Cilium 1.17's bgp-control-plane-v2
#: docs: CiliumBGPClusterConfig, CiliumBGPPeerConfig and CiliumBGPAdvertisement are `cilium.io/v2alpha1`).
CILIUM_BGP_API_VERSION = "cilium.io/v2alpha1"
#: The peer config every pool's peer references, and the label its families select advertisements by (AWS's
#: example values).
CILIUM_BGP_PEER_CONFIG = "cilium-peer"
CILIUM_BGP_ADVERTISE_LABEL = {"advertise": "bgp"}
#: BGP timers and graceful restart exactly as AWS's example peer config sets them.
CILIUM_BGP_HOLD_SECONDS = 30
CILIUM_BGP_KEEPALIVE_SECONDS = 10
CILIUM_BGP_RESTART_SECONDS = 120


def bgp_pools(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """Hybrid pools whose servers advertise their pod blocks over BGP (`network.bgp`)."""
    return [plan for plan in hybrid_plans(plans) if plan.pool.network is not None and plan.pool.network.bgp]


def cilium_bgp_manifests(plans: Sequence[PoolPlan]) -> list[dict[str, Any]]:
    """The Cilium BGP objects that advertise each server's pod block (`PodCIDR`) to its pool's site router, after
    AWS's "Configure Cilium BGP for hybrid nodes": per BGP pool a `CiliumBGPClusterConfig` selecting that pool's
    nodes (`gpu-clusters/pool=<name>`) with its router as peer, one shared `CiliumBGPPeerConfig` and one
    `CiliumBGPAdvertisement`. Empty without BGP pools.

    They are applied after the first server is Ready, not by `pulumi up`: the Cilium operator registers these kinds
    when it starts, and it starts only on a hybrid node, which joins after this stack exists.
    """
    pools = bgp_pools(plans)
    if not pools:
        return []
    manifests: list[dict[str, Any]] = []
    for plan in pools:
        bgp = plan.pool.network.bgp if plan.pool.network is not None else None
        if bgp is None:
            continue
        manifests.append(
            {
                "apiVersion": CILIUM_BGP_API_VERSION,
                "kind": "CiliumBGPClusterConfig",
                "metadata": {"name": f"{plan.name}-bgp"},
                "spec": {
                    "nodeSelector": {"matchLabels": {tags.POOL: plan.name}},
                    "bgpInstances": [
                        {
                            "name": plan.name,
                            "localASN": bgp.local_asn,
                            "peers": [
                                {
                                    "name": f"{plan.name}-router",
                                    "peerASN": bgp.peer_asn,
                                    "peerAddress": str(bgp.peer_address),
                                    "peerConfigRef": {"name": CILIUM_BGP_PEER_CONFIG},
                                }
                            ],
                        }
                    ],
                },
            }
        )
    manifests += [
        {
            "apiVersion": CILIUM_BGP_API_VERSION,
            "kind": "CiliumBGPPeerConfig",
            "metadata": {"name": CILIUM_BGP_PEER_CONFIG},
            "spec": {
                "timers": {
                    "holdTimeSeconds": CILIUM_BGP_HOLD_SECONDS,
                    "keepAliveTimeSeconds": CILIUM_BGP_KEEPALIVE_SECONDS,
                },
                "gracefulRestart": {"enabled": True, "restartTimeSeconds": CILIUM_BGP_RESTART_SECONDS},
                "families": [
                    {"afi": "ipv4", "safi": "unicast", "advertisements": {"matchLabels": CILIUM_BGP_ADVERTISE_LABEL}}
                ],
            },
        },
        {
            "apiVersion": CILIUM_BGP_API_VERSION,
            "kind": "CiliumBGPAdvertisement",
            "metadata": {"name": "pod-cidrs", "labels": CILIUM_BGP_ADVERTISE_LABEL},
            "spec": {"advertisements": [{"advertisementType": "PodCIDR"}]},
        },
    ]
    return manifests


def render_manifests(manifests: Sequence[Mapping[str, Any]]) -> str:
    """A multi-document YAML stream for `kubectl apply -f`; keys in the order written."""
    return yaml.safe_dump_all([dict(m) for m in manifests], sort_keys=False, default_flow_style=False)


# ------------------------------------------------------------------------------------------------- NodeConfig
@dataclass(frozen=True)
class SsmActivation:
    """Credentials of an SSM hybrid activation: shared by every server of the pool, up to its registration limit."""

    activation_id: str
    activation_code: str

    def render(self) -> dict[str, Any]:
        return {"ssm": {"activationCode": self.activation_code, "activationId": self.activation_id}}


@dataclass(frozen=True)
class RolesAnywhere:
    """IAM Roles Anywhere credentials: the ARNs, plus where each server keeps its certificate and key."""

    trust_anchor_arn: str
    profile_arn: str
    role_arn: str
    node_name: str = ROLES_ANYWHERE_NODE_NAME_PLACEHOLDER
    certificate_path: str = ROLES_ANYWHERE_CERTIFICATE_PATH
    private_key_path: str = ROLES_ANYWHERE_PRIVATE_KEY_PATH

    def render(self) -> dict[str, Any]:
        return {
            "iamRolesAnywhere": {
                "nodeName": self.node_name,
                "trustAnchorArn": self.trust_anchor_arn,
                "profileArn": self.profile_arn,
                "roleArn": self.role_arn,
                "certificatePath": self.certificate_path,
                "privateKeyPath": self.private_key_path,
            }
        }


def pod_identity_agent_hybrid_configuration() -> dict[str, Any]:
    """`configuration_values` of the eks-pod-identity-agent add-on in a cluster with hybrid pools.

    It creates the add-on's second DaemonSet, which targets hybrid nodes and mounts the credentials file that
    `enableCredentialsFile` makes nodeadm write; the default DaemonSet needs IMDS, which hybrid nodes lack (EKS user
    guide, hybrid-nodes-add-ons.html, "EKS Pod Identity Agent add-on"; add-on v1.3.3-eksbuild.1 or later).
    """
    return {"daemonsets": {"hybrid": {"create": True}}}


def hybrid_node_config(
    cluster_name: str, region: str, credentials: SsmActivation | RolesAnywhere, plan: PoolPlan
) -> dict[str, Any]:
    """The nodeadm `NodeConfig` a hybrid pool's servers join with (facts §5f, aws/eks-hybrid README).

    Cluster name and region suffice: the role may call `eks:DescribeCluster`, so nodeadm looks up endpoint, CA and
    service CIDR itself. The kubelet flags are the same function cloud pools use, fed with the pool plan's labels
    (`nvidia.com/gpu.present=true`, the accelerator label, `gpu-clusters/pool=<name>`...), the on-prem zone label
    CoreDNS spreads by (`ZONE_LABEL`), and taints.

    `enableCredentialsFile` makes nodeadm keep the node's temporary credentials in `/eks-hybrid/.aws/credentials`,
    which the Pod Identity agent's hybrid DaemonSet reads because hybrid nodes have no IMDS (EKS user guide,
    hybrid-nodes-add-ons.html, "EKS Pod Identity Agent add-on"; `pod_identity_agent_hybrid_configuration`).
    """
    return {
        "apiVersion": NODEADM_API_VERSION,
        "kind": "NodeConfig",
        "spec": {
            "cluster": {"name": cluster_name, "region": region},
            "hybrid": {**credentials.render(), "enableCredentialsFile": True},
            "kubelet": {"flags": kubelet_flags({**plan.labels, ZONE_LABEL: HYBRID_ZONE}, plan.taints)},
        },
    }


def render_node_config(document: Mapping[str, Any]) -> str:
    """YAML for `nodeadm init --config-source file://nodeConfig.yaml`; keys in NodeConfig order, no line wrapping."""
    return yaml.safe_dump(dict(document), sort_keys=False, default_flow_style=False, width=1 << 20)


def nodeadm_install_command(kubernetes_version: str, provider: Provider) -> str:
    """`nodeadm install <version> --credential-provider ssm|iam-ra` (facts §5f), run once per server as root."""
    return f"nodeadm install {kubernetes_version} --credential-provider {NODEADM_CREDENTIAL_PROVIDER[provider]}"
