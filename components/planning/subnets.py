"""Subnet CIDRs of a new VPC, derived once from the network config.

Pods take VPC addresses (VPC CNI), so private subnets get the space: the VPC is cut into eighths, private subnets
take one eighth per AZ (a /19 each in a /16), and public subnets (load balancers, NAT gateways) share the last
eighth, cut again into eighths (a /22 each in a /16). Explicit CIDRs from config win.

NAT gateways: one per AZ, or a single one in the first AZ; each holds one Elastic IP (a public IPv4 address). An
existing VPC's NAT is its owner's, so the stack creates none there.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network

from components.catalog.zones import eks_refused_zone_ids
from components.config import NetworkConfig

PRIVATE_SPLIT_BITS = 3
PUBLIC_SPLIT_BITS = 3


@dataclass(frozen=True)
class SubnetLayout:
    zones: tuple[str, ...]
    private: tuple[IPv4Network, ...]
    public: tuple[IPv4Network, ...]


def subnet_layout(network: NetworkConfig) -> SubnetLayout:
    """Private and public subnet CIDRs, one of each per AZ, in `availabilityZones` order."""
    zones = tuple(network.availability_zones)
    eighths = list(network.vpc_cidr.subnets(prefixlen_diff=PRIVATE_SPLIT_BITS))
    private = network.private_subnet_cidrs or eighths[: len(zones)]
    public = network.public_subnet_cidrs or list(eighths[-1].subnets(prefixlen_diff=PUBLIC_SPLIT_BITS))[: len(zones)]
    return SubnetLayout(zones=zones, private=tuple(private), public=tuple(public))


def nat_gateway_zones(network: NetworkConfig) -> tuple[str, ...]:
    """The AZs of the NAT gateways a new VPC gets: every AZ (`one-per-az`) or the first (`single`); none with an
    existing VPC."""
    if network.existing_vpc is not None:
        return ()
    zones = tuple(network.availability_zones)
    return zones if network.nat_gateways == "one-per-az" else zones[:1]


class NoClusterZones(ValueError):
    """Fewer than two of the network's AZs may hold a cluster subnet in this account."""


def cluster_subnet_zones(zones: tuple[str, ...] | list[str], zone_ids: dict[str, str]) -> tuple[str, ...]:
    """The AZs whose private subnets the EKS cluster gets: every AZ of the network but those whose zone ID EKS
    refuses for a cluster's subnets (components/catalog/zones.yaml, `eks_control_plane_refused`; EKS networking
    requirements). `zone_ids`: name -> this account's zone ID. Nodes still use every AZ. Raises NoClusterZones when
    fewer than the two AZs EKS needs remain."""
    refused = eks_refused_zone_ids()
    kept = tuple(zone for zone in zones if zone_ids.get(zone) not in refused)
    if len(kept) < 2:
        dropped = ", ".join(f"{zone} ({zone_ids[zone]})" for zone in zones if zone not in kept)
        raise NoClusterZones(
            f"EKS places no cluster subnet in {dropped} (https://docs.aws.amazon.com/eks/latest/userguide/"
            f"network-reqs.html#network-requirements-subnets), which leaves {len(kept)} of the two AZs it needs: "
            "add AZs to network.availabilityZones (`blueprint preflight` lists this account's zone IDs)"
        )
    return kept


def pod_address_ranges(network: NetworkConfig) -> list[str]:
    """Where pods on EC2 nodes take their addresses, as CIDRs: the VPC CNI gives a pod an address of its node's
    subnet (a secondary IP, or one of a /28 prefix with prefix delegation, [EKSCNI]; the stack tags no subnet for
    the CNI's subnet discovery), and nodes run in the private subnets. In an existing VPC, whose subnets the stack
    knows only by id, the VPC CIDR."""
    if network.existing_vpc is not None:
        return [str(network.vpc_cidr)]
    return [str(cidr) for cidr in subnet_layout(network).private]
