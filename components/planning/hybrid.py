"""EKS Hybrid Nodes, planned: remote networks, IAM documents, Cilium values and the nodeadm NodeConfig.

Hybrid pools are servers we do not launch (the 4xA40 inference boxes AWS does not rent). The cloud side can only
prepare what those servers need to join: the cluster's remote network configuration, an IAM role their
credentials resolve to, an SSM hybrid activation or an IAM Roles Anywhere trust anchor, an access entry, API
server reachability, a CNI that runs on them, and the `NodeConfig` the server owner feeds to `nodeadm init`.
Everything here is a pure function of the validated spec and the pool plans (no Pulumi), so the component, the plan
summary and the tests read the same values. Facts come from docs/sources.md: aws-gpu-facts.md §5f ([BC], [EKSUG])
unless a line cites another source.

Config rules for hybrid pools (RFC 1918, overlaps, activation limit, webhooks need pod CIDRs) live in
`components.validation`; this module assumes a spec that passed them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Network
from typing import Any, Literal

import yaml

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
    so every hybrid pool's networks go into the same object. The pod network is left out when no pool routes
    its pods (allowed when no webhook runs on hybrid nodes). Shaped as pulumi-aws `ClusterRemoteNetworkConfigArgs`
    wire names, so `components.cluster` can pass it straight to `aws.eks.Cluster(remote_network_config=...)`.
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
      knows as `remotePodNetworks`, so the control plane can route to webhooks on hybrid nodes;
    - `operator.unmanagedPodWatcher.restart: false`, `envoy.enabled: false`, `kubeProxyReplacement: "false"`
      (EKS installs kube-proxy on hybrid nodes) and `loadBalancer.serviceTopology: true` as AWS lists them;
    - tolerations: the agent is a CNI, so it tolerates every taint (a GPU taint it missed would leave the node
      NotReady forever); the operator tolerates the hybrid pools' taints (the A40 servers are tainted
      `nvidia.com/gpu`) plus the not-ready taints it must start under, and nothing else, so draining a node
      moves it.
    """
    pools = hybrid_plans(plans)
    pod_cidrs: dict[str, None] = {}
    operator_tolerations: list[dict[str, str]] = []
    for plan in pools:
        if plan.pool.network is not None:
            pod_cidrs.update((str(c), None) for c in plan.pool.network.remote_pod_cidrs)
        for taint in plan.taints:
            if toleration(taint) not in operator_tolerations:
                operator_tolerations.append(toleration(taint))
    operator_tolerations += [{"key": key, "operator": "Exists"} for key in CILIUM_OPERATOR_STARTUP_TAINTS]
    affinity = _compute_type_affinity()
    return {
        "affinity": affinity,
        "tolerations": [{"operator": "Exists"}],
        "ipam": {
            "mode": "cluster-pool",
            "operator": {
                "clusterPoolIPv4PodCIDRList": list(pod_cidrs),
                "clusterPoolIPv4MaskSize": CILIUM_NODE_MASK_SIZE,
            },
        },
        "operator": {
            "affinity": affinity,
            "tolerations": operator_tolerations,
            "unmanagedPodWatcher": {"restart": False},
        },
        "loadBalancer": {"serviceTopology": True},
        "envoy": {"enabled": False},
        "kubeProxyReplacement": "false",
    }


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


def hybrid_node_config(
    cluster_name: str, region: str, credentials: SsmActivation | RolesAnywhere, plan: PoolPlan
) -> dict[str, Any]:
    """The nodeadm `NodeConfig` a hybrid pool's servers join with (facts §5f, aws/eks-hybrid README).

    Cluster name and region suffice: the role may call `eks:DescribeCluster`, so nodeadm looks up endpoint, CA and
    service CIDR itself. The kubelet flags are the same function cloud pools use, fed with the pool plan's labels
    (`nvidia.com/gpu.present=true`, the accelerator label, `gpu-clusters/pool=<name>`...) and taints.
    """
    return {
        "apiVersion": NODEADM_API_VERSION,
        "kind": "NodeConfig",
        "spec": {
            "cluster": {"name": cluster_name, "region": region},
            "hybrid": credentials.render(),
            "kubelet": {"flags": kubelet_flags(plan.labels, plan.taints)},
        },
    }


def render_node_config(document: Mapping[str, Any]) -> str:
    """YAML for `nodeadm init --config-source file://nodeConfig.yaml`; keys in NodeConfig order, no line wrapping."""
    return yaml.safe_dump(dict(document), sort_keys=False, default_flow_style=False, width=1 << 20)


def nodeadm_install_command(kubernetes_version: str, provider: Provider) -> str:
    """`nodeadm install <version> --credential-provider ssm|iam-ra` (facts §5f), run once per server as root."""
    return f"nodeadm install {kubernetes_version} --credential-provider {NODEADM_CREDENTIAL_PROVIDER[provider]}"
