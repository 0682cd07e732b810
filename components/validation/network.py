"""Rules on the `network` section: the VPC's size, its availability zones and its subnets."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from itertools import combinations

from components.catalog import regions
from components.catalog.zones import region_zones
from components.errors import Problem
from components.planning.subnets import subnet_layout
from components.validation.parse import Parsed, shown

#: A VPC's IPv4 CIDR block is between /16 and /28 (Amazon VPC user guide, "VPC CIDR blocks").
VPC_PREFIX_RANGE = (16, 28)
#: The derived subnet layout cuts the VPC into 64ths for public subnets; below /24 there is no room for nodes.
MAX_AUTO_LAYOUT_PREFIX = 24
#: EKS needs subnets in at least two AZs for the control plane ENIs (EKS user guide, network requirements).
MIN_CLUSTER_AZS = 2
#: The default subnet layout splits the VPC into eighths: at most six private subnets fit (components.planning.subnets).
MAX_AZS = 6


def not_a_zone(region: str, zone: str) -> str | None:
    """Why `zone` names no Availability Zone of `region`, or None when it does: the catalog's names of the Region
    (components/catalog/zones.yaml, from the AWS Regions and Availability Zones guide), or, for a Region it does not
    list, the form of a name (the Region and one letter)."""
    known = region_zones(region)
    if known is None:
        if region not in regions.regions() or re.fullmatch(re.escape(region) + "[a-z]", zone):
            return None
        return f"{shown(zone)} is not an Availability Zone of {region} (expected {region}a, ...)"
    if zone in known.names:
        return None
    elsewhere = next((r for r in regions.regions() if zone in getattr(region_zones(r), "names", ())), None)
    where = f" (it is in {elsewhere}, not the stack's aws:region)" if elsewhere else ""
    return f"{shown(zone)} is not an Availability Zone of {region}{where}; its zones: {', '.join(known.names)}"


def zone_problems(p: Parsed, zones: list[str], path: str) -> Iterator[Problem]:
    """Every AZ named is one of the stack's Region (`not_a_zone`)."""
    for zone in zones:
        if (why := not_a_zone(p.region, zone)) is not None:
            yield Problem(path, why)


def outside_the_network(p: Parsed, zone: str) -> str:
    """Why a pool's, reservation's or file system's AZ is refused when it is not one of the network's."""
    mine = f"the network's AZs: {', '.join(p.zones)}"
    why = not_a_zone(p.region, zone)
    return f"{why}; {mine}" if why else f"{shown(zone)} is not one of the network's AZs ({', '.join(p.zones)})"


def existing_vpc_has_subnets(p: Parsed) -> Iterator[Problem]:
    """An existing VPC gives private subnets in at least two AZs of the region, keyed by AZ (EKS network
    requirements), and no `availabilityZones` list beside them."""
    if p.network is None or p.network.existing_vpc is None:
        return
    ev = p.network.existing_vpc
    if not ev.private_subnet_ids:
        yield Problem(
            "network.existingVpc.privateSubnetIds",
            "an existing VPC needs its private subnets, by AZ: {us-east-1a: subnet-..., us-east-1b: subnet-...}",
        )
    elif len(ev.private_subnet_ids) < MIN_CLUSTER_AZS:
        yield Problem(
            "network.existingVpc.privateSubnetIds",
            f"EKS needs subnets in at least {MIN_CLUSTER_AZS} AZs; got {len(ev.private_subnet_ids)}",
        )
    if p.network.availability_zones:
        yield Problem("network.availabilityZones", "not used with existingVpc (AZs are the subnet map's keys)")
    for group, subnets in (("privateSubnetIds", ev.private_subnet_ids), ("publicSubnetIds", ev.public_subnet_ids)):
        yield from zone_problems(p, list(subnets), f"network.existingVpc.{group}")
    for group, subnets in (("privateSubnetIds", ev.private_subnet_ids), ("publicSubnetIds", ev.public_subnet_ids)):
        for subnet, count in Counter(subnets.values()).items():
            if count > 1:
                yield Problem(f"network.existingVpc.{group}", f"{subnet} is given for {count} AZs; a subnet has one")


def vpc_cidr_fits(p: Parsed) -> Iterator[Problem]:
    """A new VPC's CIDR is /16 to /28 (Amazon VPC guide) and, since pods take VPC addresses, at least a /24."""
    if p.network is None or p.network.existing_vpc is not None:
        return
    prefix = p.network.vpc_cidr.prefixlen
    if not VPC_PREFIX_RANGE[0] <= prefix <= VPC_PREFIX_RANGE[1]:
        yield Problem("network.vpcCidr", f"/{prefix} is outside the /16 to /28 a VPC allows (Amazon VPC guide)")
    elif prefix > MAX_AUTO_LAYOUT_PREFIX:
        yield Problem(
            "network.vpcCidr",
            f"/{prefix} is too small: pods take VPC addresses (VPC CNI); use /16 to /{MAX_AUTO_LAYOUT_PREFIX}",
        )


def zones_are_distinct_and_enough(p: Parsed) -> Iterator[Problem]:
    """A new VPC spans 2 to 6 distinct AZs of the region: EKS needs two, the subnet layout holds six."""
    if p.network is None or p.network.existing_vpc is not None:
        return
    zones = p.network.availability_zones
    # A malformed `availabilityZones` (already reported) leaves the default, no zones: not a second problem.
    if len(zones) < MIN_CLUSTER_AZS and not p.damaged_at("network.availabilityZones"):
        region = p.region if p.region in regions.regions() else "the region"
        known = region_zones(p.region)
        names = known.names[:MIN_CLUSTER_AZS] if known else (f"{p.region}a", f"{p.region}b")
        example = f", e.g. [{', '.join(names)}]" if p.region in regions.regions() else ""
        yield Problem(
            "network.availabilityZones",
            f"list at least {MIN_CLUSTER_AZS} AZs of {region} (EKS control plane needs two){example}",
        )
    if len(zones) > MAX_AZS:
        yield Problem("network.availabilityZones", f"at most {MAX_AZS} AZs fit the subnet layout; got {len(zones)}")
    for zone, count in Counter(zones).items():
        if count > 1:
            yield Problem("network.availabilityZones", f"{shown(zone)} is listed {count} times")
    for i, zone in enumerate(zones):
        yield from zone_problems(p, [zone], f"network.availabilityZones[{i}]")


def subnet_cidrs_fit_the_vpc(p: Parsed) -> Iterator[Problem]:
    """Explicit subnet CIDRs give one per AZ, each inside the VPC CIDR, none overlapping another."""
    n = p.network
    if n is None or n.existing_vpc is not None:
        return
    zones = n.availability_zones
    for key, given in (("privateSubnetCidrs", n.private_subnet_cidrs), ("publicSubnetCidrs", n.public_subnet_cidrs)):
        if given is None:
            continue
        if len(given) != len(zones):
            yield Problem(f"network.{key}", f"give one CIDR per AZ ({len(zones)}); got {len(given)}")
        for i, cidr in enumerate(given):
            if not cidr.subnet_of(n.vpc_cidr):
                yield Problem(f"network.{key}[{i}]", f"{cidr} is outside the VPC CIDR {n.vpc_cidr}")
    prefix = n.vpc_cidr.prefixlen
    if 0 < len(zones) <= MAX_AZS and VPC_PREFIX_RANGE[0] <= prefix <= MAX_AUTO_LAYOUT_PREFIX:
        layout = subnet_layout(n)
        for a, b in combinations([*layout.private, *layout.public], 2):
            if a.overlaps(b):
                yield Problem("network", f"subnets {a} and {b} overlap; give distinct subnet CIDRs")


def flow_logs_only_for_a_new_vpc(p: Parsed) -> Iterator[Problem]:
    """`flowLogs` configures the flow logs of the VPC the stack creates; an existing VPC is never modified (its
    owner records its traffic), so a `flowLogs` beside `existingVpc` would be silently ignored and is refused."""
    if p.network is not None and p.network.existing_vpc is not None and "flow_logs" in p.network.model_fields_set:
        yield Problem(
            "network.flowLogs",
            "not used with existingVpc: the stack never modifies a VPC it does not own; enable flow logs where the VPC "
            "is managed, and remove this key",
        )


RULES = (
    existing_vpc_has_subnets,
    vpc_cidr_fits,
    zones_are_distinct_and_enough,
    subnet_cidrs_fit_the_vpc,
    flow_logs_only_for_a_new_vpc,
)
