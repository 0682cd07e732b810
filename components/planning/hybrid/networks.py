"""Hybrid pools' remote networks: the cluster's `remoteNetworkConfig` and the security group rules AWS's hybrid
nodes networking tables ask of the cloud side (pure, no Pulumi).

Invariant: every hybrid pool's node and pod CIDRs appear once, in config order. Facts: docs/sources.md
(aws-gpu-facts.md §5f, [BC], [EKSUG]); the design: docs/operations.md#what-the-cluster-side-builds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from components.config import NodePool
from components.planning.pools import PoolPlan

#: Remote nodes and pods reach the Kubernetes API on TCP 443; the cluster security group must admit both remote
#: networks (facts §5f "Cluster SG must allow inbound 443 from remote node (and pod) CIDRs").
API_SERVER_PORT = 443
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
