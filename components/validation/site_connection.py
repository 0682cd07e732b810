"""Rules on `network.siteConnection`: how a VPC the stack creates reaches the site."""

from __future__ import annotations

from collections.abc import Iterator

from components.errors import Problem
from components.planning.site_routes import site_cidrs
from components.validation.parse import Parsed

#: Where the rules' facts come from: the VPC routes hybrid nodes need, to a TGW or VGW attached to the VPC.
GUIDE = "EKS user guide, Prepare networking for hybrid nodes"


def site_connection_names_one_gateway(p: Parsed) -> Iterator[Problem]:
    """`network.siteConnection` names one gateway, a transit gateway or a virtual private gateway, and only for a
    VPC the stack creates: an existing VPC's route tables are the user's, and the stack does not touch them."""
    n = p.network
    if n is None or n.site_connection is None:
        return
    site = n.site_connection
    # A malformed id (already reported) leaves the gateway out: not a second problem.
    malformed = any(path.startswith("network.siteConnection.") for path in p.damaged)
    if (site.transit_gateway_id is None) == (site.virtual_private_gateway_id is None) and not malformed:
        yield Problem(
            "network.siteConnection",
            "name one gateway to the site: transitGatewayId (tgw-...) or virtualPrivateGatewayId (vgw-...)",
        )
    if n.existing_vpc is not None:
        yield Problem(
            "network.siteConnection",
            "not used with existingVpc: the stack never changes a VPC it does not own; route the site's CIDRs "
            "to your gateway in that VPC's route tables yourself (docs/network-and-cluster.md)",
        )


def new_vpc_names_its_site_connection(p: Parsed) -> Iterator[Problem]:
    """A VPC the stack creates routes the hybrid pools' remote node and pod CIDRs, and the `privateAccessCidrs`
    outside it, to the gateway that connects the site, attached to the VPC ([EKSUG] `hybrid-nodes-networking`,
    "AWS VPC and subnet setup"), so it names that gateway in `network.siteConnection`: nothing else lets the hybrid
    nodes or the deployer reach the private endpoint on the first `pulumi up`. A gateway with nothing to route is
    refused."""
    n = p.network
    if n is None or n.existing_vpc is not None:
        return
    private_access = p.cluster.endpoint.private_access_cidrs if p.cluster is not None else []
    cidrs = site_cidrs(n.vpc_cidr, private_access, [pool for _, pool in p.hybrid_pools()])
    # A damaged network section may have lost a misspelt siteConnection: its typo is the one problem.
    if cidrs and n.site_connection is None and "network" not in p.damaged:
        yield Problem(
            "network.siteConnection",
            f"the new VPC must route {', '.join(cidrs)} (hybrid nodes' networks, privateAccessCidrs) to the site "
            "through an attached gateway, or nothing there reaches the private API: give {transitGatewayId: "
            "tgw-...} or {virtualPrivateGatewayId: vgw-...} "
            f"({GUIDE}); or use network.existingVpc, whose routes are yours",
        )
    if n.site_connection is not None and not cidrs and "cluster" not in p.damaged and p.pools_complete:
        yield Problem(
            "network.siteConnection",
            "nothing routes to the site (no hybrid pools, no privateAccessCidrs outside the VPC); remove it",
        )


RULES = (site_connection_names_one_gateway, new_vpc_names_its_site_connection)
