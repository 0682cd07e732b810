"""Rules on where instance types are offered: a pool launches only in AZs that offer one of its types.

EC2 offers each instance type in some AZs of a region only (DescribeInstanceTypeOfferings), and an Auto Scaling
group tells only at launch time. The catalog's snapshot (components/catalog/offerings.yaml) is keyed by AZ ID; the
stack's AZ names become IDs through `network.availabilityZoneIds`, because names differ between accounts.
"""

from __future__ import annotations

from collections.abc import Iterator

from components.catalog import InstanceType
from components.catalog.offerings import OFFERINGS_PATH, RegionOfferings, az_id_order, region_offerings
from components.catalog.zones import eks_refused_zone_ids, region_zones
from components.config import NetworkConfig, NodePool, StackConfig
from components.errors import Problem
from components.planning.pools import PoolPlan, pool_zones, wants_efa, with_default_system_pool
from components.validation.parse import Parsed, shown_text

NETWORK_ZONE_IDS = "network.availabilityZoneIds"
SNAPSHOT = f"EC2 instance type offerings, {OFFERINGS_PATH.parent.name}/{OFFERINGS_PATH.name}"
LIST_ZONE_IDS = "aws ec2 describe-availability-zones --region {region} --query 'AvailabilityZones[].[ZoneName,ZoneId]'"


def account_zone_problems(network: NetworkConfig, region: str, account: dict[str, str]) -> list[Problem]:
    """At deploy time, not a validation rule: each `network.availabilityZoneIds` entry is this account's mapping
    (`account`: AZ name -> zone ID, ec2 DescribeAvailabilityZones). Subnets are placed by the ID, while pools,
    reservations and the offerings check read the name; a wrong pair would put a name's subnets in another zone, and
    an ID the account lacks fails CreateSubnet after the VPC exists."""
    problems = []
    listed = LIST_ZONE_IDS.format(region=region)
    named = {zone_id: name for name, zone_id in account.items()}
    for name, zone_id in network.availability_zone_ids.items():
        path = f"{NETWORK_ZONE_IDS}.{name}"
        if zone_id not in named:
            problems.append(
                Problem(
                    path,
                    f"{zone_id} is not a zone of this account in {region} (its zone IDs: "
                    f"{', '.join(sorted(named))}; `{listed}`)",
                )
            )
        elif account.get(name) != zone_id:
            actual = f"this account's {name} is {account[name]}" if name in account else f"this account has no {name}"
            problems.append(
                Problem(
                    path,
                    f"{actual}; {zone_id} is its {named[zone_id]}: write {name}: {account.get(name, '<its ID>')}, "
                    f"or use {named[zone_id]} in network.availabilityZones (`{listed}`)",
                )
            )
    return problems


def zone_ids_name_the_networks_zones(p: Parsed) -> Iterator[Problem]:
    """`network.availabilityZoneIds` maps the network's AZs, each to a distinct AZ ID of the stack's region (the
    catalog lists the region's AZ IDs, components/catalog/zones.yaml, from the AWS Regions and Availability Zones
    guide, "AWS Availability Zones")."""
    if p.network is None:
        return
    known = region_zones(p.region)
    seen: dict[str, str] = {}
    for name, az_id in p.network.availability_zone_ids.items():
        where = f"{NETWORK_ZONE_IDS}.{shown_text(name)}"
        if name not in p.zones and not p.damaged_at("network.availabilityZones", "network.existingVpc"):
            yield Problem(where, f"not an AZ of the network ({', '.join(p.zones) or 'none'})")
        if known is not None and az_id not in known.ids:
            yield Problem(where, f"{az_id} is not an AZ ID of {p.region} ({', '.join(known.ids)})")
        if az_id in seen:
            yield Problem(where, f"{az_id} is already the ID of {seen[az_id]}; each AZ has its own")
        seen.setdefault(az_id, name)


#: Where EKS documents the AZ IDs it refuses for a cluster's subnets (components/catalog/zones.yaml, EKSNET).
EKS_SUBNET_REQUIREMENTS = (
    "https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html#network-requirements-subnets"
)


def no_cluster_subnet_in_a_refused_zone(p: Parsed) -> Iterator[Problem]:
    """No AZ of the network is one EKS refuses for a cluster's subnets (use1-az3, usw1-az2, cac1-az3; EKS
    networking requirements): every private subnet of the network is one of the cluster's, so such an AZ would fail
    CreateCluster with UnsupportedAvailabilityZoneException after the VPC exists. Checked where
    `network.availabilityZoneIds` says which zone a name is; without it, `blueprint preflight` resolves the names
    with the account's own mapping."""
    if p.network is None:
        return
    refused = eks_refused_zone_ids()
    for name, az_id in p.network.availability_zone_ids.items():
        if az_id in refused and name in p.zones:
            yield Problem(
                f"{NETWORK_ZONE_IDS}.{shown_text(name)}",
                f"{name} is {az_id}, where EKS places no cluster subnet ({EKS_SUBNET_REQUIREMENTS}): leave {name} "
                f"out of the network's AZs and use another AZ of {p.region}",
            )


def pools_launch_where_their_type_is_offered(p: Parsed) -> Iterator[Problem]:
    """Every AZ an `aws` pool launches in offers one of its instance types, where the catalog's snapshot of the
    region knows them (EC2 DescribeInstanceTypeOfferings; components/catalog/offerings.yaml names its source and
    date). With `network.availabilityZoneIds` each AZ is checked; without, a pool is refused when its type is
    offered nowhere in the region, or in fewer AZs than the pool spans (then some AZ of the pool cannot offer it)."""
    known = region_offerings(p.region)
    if known is None or p.network is None:
        return
    for index, pool in p.pools:
        if pool.kind != "aws":
            continue
        instance = p.instances.get(index)
        types = _types(pool, instance)
        offered = _offered(types, known)
        if offered is None:
            continue
        path, named = f"nodePools[{index}]", " or ".join(types)
        if not offered:
            yield Problem(f"{path}.instanceType", f"{named} is offered in no AZ of {p.region} ({SNAPSHOT})")
            continue
        zones = pool_zones(pool, p.network, wants_efa(pool, instance))
        yield from _zones_without(p.network, path, pool, zones, named, offered, known)


def _types(pool: NodePool, instance: InstanceType | None) -> list[str]:
    """The pool's instance type (named, or resolved from its GPU model) and its spot alternatives."""
    name = pool.instance_type or (instance.name if instance else None)
    return list(dict.fromkeys(t for t in (name, *pool.capacity.spot_instance_types) if t))  # each type once


def _offered(types: list[str], known: RegionOfferings) -> frozenset[str] | None:
    """AZ IDs offering any of `types`; None when there are none or the snapshot does not list one of them."""
    found = [known.zones_offering(t) for t in types]
    if not found or any(ids is None for ids in found):
        return None
    return frozenset().union(*(ids for ids in found if ids is not None))


def _zones_without(
    network: NetworkConfig,
    path: str,
    pool: NodePool,
    zones: tuple[str, ...],
    types: str,
    offered: frozenset[str],
    known: RegionOfferings,
) -> Iterator[Problem]:
    """Each mapped AZ of the pool that offers none of `types`; and, for the AZs left unmapped, whether the region
    has enough offering AZs for all of them (if not, at least one cannot offer the type, whatever the mapping)."""
    # An ID of another region is reported by zone_ids_name_the_networks_zones; its AZ counts as unmapped here.
    ids = {zone: az_id for zone, az_id in network.availability_zone_ids.items() if az_id in known.zones}
    placed = pool.placement.availability_zones or []
    where_offered = ", ".join(
        f"{az_id} ({names[0]})" if (names := [n for n, i in ids.items() if i == az_id]) else az_id
        for az_id in sorted(offered, key=az_id_order)
    )
    for zone in zones:
        if zone in ids and ids[zone] not in offered:
            where = f"{path}.placement.availabilityZones[{placed.index(zone)}]" if zone in placed else path
            yield Problem(
                where,
                f"{zone} ({ids[zone]}) does not offer {types}; AZs of {known.region} that do: {where_offered} "
                f"({SNAPSHOT})",
            )
    unmapped = [zone for zone in zones if zone not in ids]
    free = offered - {ids[zone] for zone in zones if zone in ids}
    if len(unmapped) > len(free):
        yield Problem(
            f"{path}.placement.availabilityZones" if placed else path,
            f"the pool spans {len(zones)} AZs ({', '.join(zones)}) but {types} is offered in only {len(offered)} of "
            f"{known.region}'s {len(known.zones)} ({where_offered}; {SNAPSHOT}), so one of them cannot launch it: pin "
            f"placement.availabilityZones, and give {NETWORK_ZONE_IDS} to check each AZ",
        )


def unchecked_zone_warnings(spec: StackConfig, plans: list[PoolPlan]) -> list[str]:
    """Pools whose AZs validation could not check: an AZ left out of `network.availabilityZoneIds` while the pool's
    types are not offered in every AZ ID of the region. Which AZ ID a name such as `us-east-1a` is depends on the
    account in the regions AWS maps independently (components/catalog/zones.yaml, `mapping`), and is not in the
    catalog elsewhere, so that AZ may lack the type: its Auto Scaling group then never launches a node, and nothing
    says so before `pulumi up`."""
    known, zones = region_offerings(spec.region), region_zones(spec.region)
    if known is None:
        return []
    mapped = {zone for zone, az_id in spec.network.availability_zone_ids.items() if az_id in known.zones}
    indexes = {pool.name: index for index, pool in enumerate(with_default_system_pool(spec.node_pools))}
    found = []
    for plan in plans:
        unmapped = [zone for zone in plan.availability_zones if zone not in mapped]
        offered = _offered(list(plan.instance_types), known) if plan.kind == "aws" else None
        if not unmapped or offered is None or offered >= set(known.zones):
            continue
        why = (
            f"{spec.region} maps AZ names to AZ IDs per account"
            if zones is not None and zones.mapping == "independent"
            else f"the catalog does not know which AZ ID {unmapped[0]} is"
        )
        found.append(
            f"nodePools[{indexes.get(plan.name, '?')}] ({plan.name}): {' or '.join(plan.instance_types)} is offered in "
            f"{len(offered)} of {spec.region}'s {len(known.zones)} AZ IDs "
            f"({', '.join(sorted(offered, key=az_id_order))}; {SNAPSHOT}) and {why}, so {', '.join(unmapped)} may "
            "not offer it and the pool would launch no node there: list your AZ IDs "
            f"(`{LIST_ZONE_IDS.format(region=spec.region)}`) and set {NETWORK_ZONE_IDS}, which plan then checks "
            "(docs/operations.md, 'Your AZ IDs')"
        )
    return found


RULES = (
    zone_ids_name_the_networks_zones,
    no_cluster_subnet_in_a_refused_zone,
    pools_launch_where_their_type_is_offered,
)
