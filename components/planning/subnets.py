"""Subnet CIDRs of a new VPC, derived once from the network config.

Pods take VPC addresses (VPC CNI), so private subnets get the space: the VPC is cut into eighths, private subnets
take one eighth per AZ (a /19 each in a /16), and public subnets (load balancers, NAT gateways) share the last
eighth, cut again into eighths (a /22 each in a /16). Explicit CIDRs from config win.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

from components.config import NetworkConfig

PRIVATE_SPLIT_BITS = 3
PUBLIC_SPLIT_BITS = 3


@dataclass(frozen=True)
class SubnetLayout:
    zones: tuple[str, ...]
    private: tuple[IPv4Network, ...]
    public: tuple[IPv4Network, ...]
    #: The AZs that get a NAT gateway (and its Elastic IP): every AZ with `one-per-az`, the first with `single`.
    nat_zones: tuple[str, ...]


def subnet_layout(network: NetworkConfig) -> SubnetLayout:
    """Private and public subnet CIDRs, one of each per AZ, in `availabilityZones` order."""
    zones = tuple(network.availability_zones)
    eighths = list(network.vpc_cidr.subnets(prefixlen_diff=PRIVATE_SPLIT_BITS))
    private = network.private_subnet_cidrs or eighths[: len(zones)]
    public = network.public_subnet_cidrs or list(eighths[-1].subnets(prefixlen_diff=PUBLIC_SPLIT_BITS))[: len(zones)]
    nat_zones = zones if network.nat_gateways == "one-per-az" else zones[:1]
    return SubnetLayout(zones=zones, private=tuple(private), public=tuple(public), nat_zones=nat_zones)
