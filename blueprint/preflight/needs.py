"""What preflight asks the account about, derived from the validated config and the offline plan, never re-decided:
the pools' types and AZs (`PoolPlan`), the quota needs (`components.planning.quotas`), the add-on versions the plan
installs, the AMI parameters the launch templates read (`nodeadm.ami_ssm_parameter`), the service-linked roles the
plan's resources may create (`blueprint.deployer_policy`), the reservations and the site's gateway and networks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from components.config import StackConfig
from components.planning.key_policy import AUTOSCALING_SERVICE, autoscaling_role_description, autoscaling_role_name
from components.planning.nodeadm import ami_ssm_parameter
from components.planning.pools import PoolPlan
from components.planning.quotas import QuotaNeed, stack_quotas
from components.planning.reservations import reservation_zone
from components.planning.site_routes import site_cidrs
from components.planning.subnets import nat_gateway_zones

ADDON = "aws:eks/addon:Addon"

#: The service-linked role each service the stack uses creates, by service name, with the page that names it and says
#: the service creates it on first use ("you don't need to manually create a service-linked role"). Auto Scaling's is
#: the stack's own, with a custom suffix (`OWN_ROLE_SOURCE`).
SERVICE_LINKED_ROLES: dict[str, tuple[str, str]] = {
    "eks.amazonaws.com": (
        "AWSServiceRoleForAmazonEKS",
        "https://docs.aws.amazon.com/eks/latest/userguide/using-service-linked-roles-eks.html",
    ),
    "eks-nodegroup.amazonaws.com": (
        "AWSServiceRoleForAmazonEKSNodegroup",
        "https://docs.aws.amazon.com/eks/latest/userguide/using-service-linked-roles-eks-nodegroups.html",
    ),
    "elasticfilesystem.amazonaws.com": (
        "AWSServiceRoleForAmazonElasticFileSystem",
        "https://docs.aws.amazon.com/efs/latest/ug/using-service-linked-roles.html",
    ),
    "fsx.amazonaws.com": (
        "AWSServiceRoleForAmazonFSx",
        "https://docs.aws.amazon.com/fsx/latest/LustreGuide/using-service-linked-roles.html",
    ),
    "transitgateway.amazonaws.com": (
        "AWSServiceRoleForVPCTransitGateway",
        "https://docs.aws.amazon.com/vpc/latest/tgw/service-linked-roles.html",
    ),
}
OWN_ROLE_SOURCE = "https://docs.aws.amazon.com/autoscaling/ec2/userguide/autoscaling-service-linked-role.html"
#: FSx creates one role per file system linked to S3 when the association is made: none can exist before.
PER_RESOURCE_ROLE_SERVICES = frozenset({"s3.data-source.lustre.fsx.amazonaws.com"})


@dataclass(frozen=True)
class PoolNeeds:
    name: str
    instance_types: tuple[str, ...]
    zones: tuple[str, ...]


@dataclass(frozen=True)
class ReservationNeeds:
    """A pool's Capacity Block or On-Demand Capacity Reservation, as the config describes it."""

    pool: str
    reservation_id: str
    capacity_type: str
    zone: str | None
    instance_type: str
    nodes: int
    end_time: datetime | None


@dataclass(frozen=True)
class SiteNeeds:
    """The gateway a new VPC attaches to and the CIDRs its private subnets route through it."""

    transit_gateway_id: str | None
    virtual_private_gateway_id: str | None
    cidrs: tuple[str, ...]


@dataclass(frozen=True)
class ServiceLinkedRole:
    service: str
    name: str
    source: str
    #: The stack's own role (Auto Scaling's, with the custom suffix), created by `pulumi up`; its description, which
    #: tells it from a role of the same name made otherwise.
    own_description: str | None = None


@dataclass(frozen=True)
class Needs:
    region: str
    #: `cluster.name`: the stack's own resources carry it in the `gpu-clusters/cluster` tag.
    cluster: str
    kubernetes_version: str
    #: The network's AZ names, in order; every private subnet in them is one of the cluster's subnets.
    zones: tuple[str, ...]
    #: `network.availabilityZoneIds`, when given.
    zone_ids: dict[str, str]
    pools: tuple[PoolNeeds, ...]
    quotas: tuple[QuotaNeed, ...]
    #: NAT gateways a new VPC creates, one Elastic IP each.
    nat_gateways: int
    addons: dict[str, str]
    #: `{add-on name: its configurationValues}` of the add-ons the plan configures.
    addon_values: dict[str, dict[str, Any]]
    ami_parameters: tuple[str, ...]
    service_linked_roles: tuple[ServiceLinkedRole, ...]
    reservations: tuple[ReservationNeeds, ...]
    site: SiteNeeds | None


def planned_addons(resources: Iterable[dict[str, Any]]) -> dict[str, str]:
    """`{add-on name: version}` of every EKS add-on the plan registers."""
    return {
        r["inputs"]["addonName"]: r["inputs"]["addonVersion"]
        for r in resources
        if r["type"] == ADDON and r["inputs"].get("addonVersion")
    }


def planned_addon_values(resources: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`{add-on name: configurationValues}` of every EKS add-on the plan configures."""
    return {
        r["inputs"]["addonName"]: json.loads(r["inputs"]["configurationValues"])
        for r in resources
        if r["type"] == ADDON and r["inputs"].get("configurationValues")
    }


def ami_parameters(spec: StackConfig, plans: Sequence[PoolPlan]) -> tuple[str, ...]:
    """The SSM parameters the `aws` pools' launch templates read their AMI ids from, each once."""
    found: dict[str, None] = {}
    for plan in plans:
        if plan.instance is None or plan.ami_release is None:
            continue
        name = ami_ssm_parameter(
            spec.cluster.kubernetes_version, plan.pool.ami_family, plan.instance.arch, plan.is_gpu, plan.ami_release
        )
        found[name] = None
    return tuple(found)


def service_linked_roles(spec: StackConfig, services: Iterable[str]) -> tuple[ServiceLinkedRole, ...]:
    """The service-linked roles of `services` (from the plan), per-file-system ones left out: the stack's own Auto
    Scaling role by its name and description, the others as their services name them."""
    out = []
    for service in sorted(set(services) - PER_RESOURCE_ROLE_SERVICES):
        if service == AUTOSCALING_SERVICE:
            name = autoscaling_role_name(spec.cluster.name, spec.region)
            description = autoscaling_role_description(spec.cluster.name, spec.region)
            out.append(ServiceLinkedRole(service, name, OWN_ROLE_SOURCE, description))
            continue
        name, source = SERVICE_LINKED_ROLES[service]
        out.append(ServiceLinkedRole(service, name, source))
    return tuple(out)


def reservations(plans: Sequence[PoolPlan]) -> tuple[ReservationNeeds, ...]:
    out = []
    for plan in plans:
        capacity = plan.pool.capacity
        if plan.kind != "aws" or capacity.reservation_id is None or plan.instance is None:
            continue
        out.append(
            ReservationNeeds(
                plan.name,
                capacity.reservation_id,
                capacity.type,
                reservation_zone(plan.pool),
                plan.instance.name,
                plan.max_nodes,
                capacity.end_time,
            )
        )
    return tuple(out)


def site(spec: StackConfig) -> SiteNeeds | None:
    connection = spec.network.site_connection
    if connection is None or spec.network.existing_vpc is not None:
        return None
    cidrs = site_cidrs(spec.network.vpc_cidr, spec.cluster.endpoint.private_access_cidrs, spec.hybrid_pools)
    return SiteNeeds(connection.transit_gateway_id, connection.virtual_private_gateway_id, tuple(cidrs))


def needs_of(
    spec: StackConfig, plans: Sequence[PoolPlan], resources: Sequence[dict[str, Any]], services: Iterable[str]
) -> Needs:
    """Everything preflight checks, from the validated config, its pool plans and the offline plan's resources and
    service-linked role services."""
    return Needs(
        region=spec.region,
        cluster=spec.cluster.name,
        kubernetes_version=spec.cluster.kubernetes_version,
        zones=tuple(spec.network.zones),
        zone_ids=dict(spec.network.availability_zone_ids),
        pools=tuple(PoolNeeds(p.name, p.instance_types, p.availability_zones) for p in plans if p.kind == "aws"),
        quotas=tuple(stack_quotas(spec, plans)),
        nat_gateways=len(nat_gateway_zones(spec.network)),
        addons=planned_addons(resources),
        addon_values=planned_addon_values(resources),
        ami_parameters=ami_parameters(spec, plans),
        service_linked_roles=service_linked_roles(spec, services),
        reservations=reservations(plans),
        site=site(spec),
    )


def stack_needs(stack: str | None, config_file: Any) -> Needs:
    """Plan the stack offline (ConfigError on an invalid config, OSError on an unreadable file) and derive its needs."""
    from blueprint.deployer_policy import service_linked_role_services
    from blueprint.plan.plan import run_stack_under_mocks  # imports pulumi and the providers: only here
    from components.planning.stack_plan import plan_pools
    from components.validation import validate_config

    planned = run_stack_under_mocks(stack, config_file)
    spec = validate_config(planned.files.config, planned.files.project)
    resources = planned.plan["resources"]
    return needs_of(spec, plan_pools(spec), resources, service_linked_role_services(resources))
