"""The networks a new VPC routes to the site, through the gateway `network.siteConnection` names.

EKS Hybrid Nodes need the VPC's route tables to send the remote node CIDRs, and the remote pod CIDRs when pods are
routable, to the gateway that connects the site, commonly a transit gateway or a virtual private gateway attached to
the VPC ([EKSUG] `hybrid-nodes-networking`, "AWS VPC and subnet setup"). A private endpoint admits
`cluster.endpoint.privateAccessCidrs`, and the API's replies to a network outside the VPC also leave through those
route tables: without a route they go to the NAT gateway and the deployer never reaches the API. A CIDR inside the
VPC (a bastion's subnet) is reached by the local route and needs none.

One function decides, so the network component, config validation and the tests read the same list.
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
