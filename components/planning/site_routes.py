"""The networks a new VPC routes to the site, through the gateway `network.siteConnection` names.

The remote node CIDRs, the routable remote pod CIDRs ([EKSUG] `hybrid-nodes-networking`) and the private
endpoint's `privateAccessCidrs` outside the VPC, whose API replies would otherwise leave through the NAT gateway.
Invariant: one function decides, so the network component, config validation and the tests read the same list.
See docs/network-and-cluster.md#reaching-the-site.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network

from components.config import NodePool
from components.planning.hybrid import remote_node_cidrs, remote_pod_cidrs


def site_cidrs(
    vpc_cidr: IPv4Network, private_access_cidrs: Sequence[IPv4Network], hybrid_pools: Sequence[NodePool]
) -> list[str]:
    """Every CIDR the VPC routes to the site, each once: the remote node CIDRs, the remote pod CIDRs, then the
    networks admitted to the private endpoint (`cluster.endpoint.privateAccessCidrs`) outside the VPC, in config
    order."""
    found: dict[str, None] = dict.fromkeys(remote_node_cidrs(hybrid_pools))
    found.update(dict.fromkeys(remote_pod_cidrs(hybrid_pools)))
    found.update((str(cidr), None) for cidr in private_access_cidrs if not cidr.subnet_of(vpc_cidr))
    return list(found)
