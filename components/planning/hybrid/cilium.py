"""Cilium on hybrid nodes: its Helm values and the BGP objects that advertise each server's pod block (pure, no
Pulumi).

Invariant: Cilium's pod CIDR pool is exactly the cluster's `remotePodNetworks`, and is never empty. Facts:
docs/sources.md (aws-gpu-facts.md §5f, AWS's hybrid-nodes-cni and hybrid-nodes-cilium-bgp pages).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from ipaddress import IPv4Network
from typing import Any

import yaml

from components import tags
from components.planning import compute_types
from components.planning.hybrid.networks import hybrid_plans, remote_pod_cidrs
from components.planning.pools import PoolPlan
from components.planning.tolerations import NODE_UNREACHABLE, hybrid_outage_tolerations, toleration

#: Each node gets one /25 from the cluster pool (128 addresses, AWS's hybrid-nodes-cni example value and the
#: eks-workshop's), enough for kubelet's default 110 pods. Cilium cannot change it after the first install.
CILIUM_NODE_MASK_SIZE = 25
CILIUM_NAMESPACE = "kube-system"
#: Cilium enforces the stack's NetworkPolicies on hybrid nodes in its `default` mode, stated rather than left to the
#: chart: a pod no policy selects is open, a pod a policy selects admits only what a policy allows, as the VPC CNI
#: does on EC2 nodes ([HYBRIDNP]: AWS supports upstream NetworkPolicies with Cilium on hybrid nodes; `always` would
#: deny every unselected pod, `never` would enforce nothing).
CILIUM_POLICY_ENFORCEMENT = "default"
#: Taints the Cilium operator must tolerate to start on a hybrid node before that node is Ready: the node stays
#: NotReady until a CNI runs (https://docs.aws.amazon.com/eks/latest/userguide/hybrid-nodes-cni.html), and Cilium
#: taints nodes with `node.cilium.io/agent-not-ready` until its agent is up (Cilium "agentNotReadyTaintKey").
CILIUM_OPERATOR_STARTUP_TAINTS = ("node.kubernetes.io/not-ready", "node.cilium.io/agent-not-ready")


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
    - `policyEnforcementMode: default` (`CILIUM_POLICY_ENFORCEMENT`): NetworkPolicies enforced as on EC2 nodes;
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
    operator_tolerations: list[dict[str, Any]] = []
    for plan in pools:
        for taint in plan.taints:
            if toleration(taint) not in operator_tolerations:
                operator_tolerations.append(toleration(taint))
    operator_tolerations += [{"key": key, "operator": "Exists"} for key in CILIUM_OPERATOR_STARTUP_TAINTS]
    # A Deployment only hybrid nodes can run: it stays through a site-link outage (not-ready it tolerates for good).
    operator_tolerations += hybrid_outage_tolerations(pools, keys=(NODE_UNREACHABLE,))
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
        "policyEnforcementMode": CILIUM_POLICY_ENFORCEMENT,
        "envoy": {"enabled": False},
        "kubeProxyReplacement": "false",
        **({"bgpControlPlane": {"enabled": True}} if bgp else {}),
    }


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
