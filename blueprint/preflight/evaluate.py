"""Preflight's verdicts: pure functions from what the stack needs (`needs.Needs`) and what the account answered
(plain values taken from the API responses) to findings, each with its fix. No AWS call is made here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from blueprint.preflight.findings import Finding
from blueprint.preflight.needs import Needs, ReservationNeeds, ServiceLinkedRole, SiteNeeds
from components.catalog.quotas import count_quotas
from components.catalog.zones import eks_refused_zone_ids
from components.planning.quotas import QuotaNeed
from components.validation.offerings import EKS_SUBNET_REQUIREMENTS, LIST_ZONE_IDS

#: A reservation is usable from these states on: `scheduled` (a Capacity Block before its start), `pending`, `active`
#: (EC2 API reference, CapacityReservation `State`).
USABLE_RESERVATION_STATES = frozenset({"active", "scheduled", "pending"})
#: The Elastic IP quota's code (components/catalog/quotas.yaml, `elastic_ips`): allocated addresses count against it.
ELASTIC_IPS = count_quotas()["elastic_ips"].code


def zones(needs: Needs, account_zones: Mapping[str, str]) -> list[Finding]:
    """Each AZ of the network exists for this account; its ID agrees with `network.availabilityZoneIds`; and a zone
    EKS refuses for a cluster's subnets only warns while two others are left for the cluster. `account_zones`: name ->
    zone ID (DescribeAvailabilityZones)."""
    refused = eks_refused_zone_ids()
    listed = LIST_ZONE_IDS.format(region=needs.region)
    #: Zones whose subnets the cluster gets: the program leaves the refused ones out (components.network).
    accepted = sum(1 for name in needs.zones if account_zones.get(name) not in (None, *refused))
    out = []
    for name in needs.zones:
        zone_id = account_zones.get(name)
        if zone_id is None:
            out.append(
                Finding(
                    "zones",
                    "fail",
                    name,
                    f"this account has no AZ {name} in {needs.region} (its AZs: {', '.join(sorted(account_zones))})",
                    f"use AZs your account has in network.availabilityZones (`{listed}`)",
                )
            )
        elif zone_id in refused and accepted >= 2:
            out.append(
                Finding(
                    "zones",
                    "warn",
                    name,
                    f"{name} is {zone_id} in this account, where EKS places no cluster subnet "
                    f"({EKS_SUBNET_REQUIREMENTS}): the cluster gets the subnets of the other zones, nodes use all",
                    f"nothing to do; to keep every zone for the cluster, replace {name} in network.availabilityZones",
                )
            )
        elif zone_id in refused:
            out.append(
                Finding(
                    "zones",
                    "fail",
                    name,
                    f"{name} is {zone_id} in this account, where EKS places no cluster subnet "
                    f"({EKS_SUBNET_REQUIREMENTS}), and fewer than the two zones a cluster needs are left: "
                    "CreateCluster would fail",
                    f"replace {name} in network.availabilityZones with another AZ of {needs.region}, and record the "
                    f"IDs in network.availabilityZoneIds",
                )
            )
        elif name in needs.zone_ids and needs.zone_ids[name] != zone_id:
            out.append(
                Finding(
                    "zones",
                    "fail",
                    name,
                    f"network.availabilityZoneIds says {needs.zone_ids[name]}, this account's {name} is {zone_id}",
                    f"set network.availabilityZoneIds.{name}: {zone_id} (validation then checks the pools' offerings "
                    "against the right zone)",
                )
            )
        else:
            out.append(Finding("zones", "pass", name, f"{name} is {zone_id}"))
    return out


def offerings(needs: Needs, account_zones: Mapping[str, str], offered: Mapping[str, Iterable[str]]) -> list[Finding]:
    """Every AZ an `aws` pool launches in offers one of its instance types. `offered`: instance type -> the zone IDs
    offering it (DescribeInstanceTypeOfferings, LocationType availability-zone-id)."""
    out = []
    for pool in needs.pools:
        ids = {zone_id for t in pool.instance_types for zone_id in offered.get(t, ())}
        types = " or ".join(pool.instance_types)
        for name in pool.zones:
            zone_id = account_zones.get(name)
            if zone_id is None:
                continue  # reported by `zones`
            subject = f"{pool.name} in {name}"
            if zone_id in ids:
                out.append(Finding("offerings", "pass", subject, f"{zone_id} offers {types}"))
            else:
                where = ", ".join(sorted(n for n, i in account_zones.items() if i in ids)) or "no AZ"
                out.append(
                    Finding(
                        "offerings",
                        "fail",
                        subject,
                        f"{name} ({zone_id}) does not offer {types}; in {needs.region} {where} does",
                        f"pin the pool's placement.availabilityZones to AZs that offer it ({where})",
                    )
                )
    return out


def quotas(
    needs: Needs,
    values: Mapping[str, float | None],
    elastic_ips_in_use: int | None,
    elastic_ips_own: int = 0,
    others_in_use: Mapping[str, int] | None = None,
) -> list[Finding]:
    """Each quota the stack needs holds it. `values`: quota code -> this account's value (GetServiceQuota; None when
    it could not be read); Elastic IPs also count those already allocated by others (DescribeAddresses,
    `elastic_ips_in_use`), not the stack's own from an earlier deploy (`elastic_ips_own`), which its need already
    counts; `others_in_use`: quota code -> what the Region's other resources already use (the Lustre file systems
    of other stacks, DescribeFileSystems). Running instances are not counted against the vCPU quotas: the finding
    says so. Quotas the catalog has no code for are skipped with the command that lists them."""
    return [_quota(need, values, elastic_ips_in_use, elastic_ips_own, others_in_use or {}) for need in needs.quotas]


def _quota(
    need: QuotaNeed,
    values: Mapping[str, float | None],
    elastic_ips_in_use: int | None,
    elastic_ips_own: int,
    others_in_use: Mapping[str, int],
) -> Finding:
    quota = need.quota
    subject = f"{quota.name} ({quota.code or 'no code'})"
    listing = f"aws service-quotas list-service-quotas --service-code {quota.service}"
    if quota.code is None or values.get(quota.code) is None:
        why = "no quota code in components/catalog/quotas.yaml" if quota.code is None else "could not be read"
        return Finding(
            "quotas",
            "skip",
            subject,
            f"needs {need.needed} {quota.unit}; {why}",
            f"read it with `{listing}` and compare",
        )
    value = int(values[quota.code] or 0)
    used = elastic_ips_in_use if quota.code == ELASTIC_IPS and elastic_ips_in_use is not None else 0
    used += others_in_use.get(quota.code, 0)
    total = need.needed + used
    detail = f"needs {need.needed} {quota.unit} ({'; '.join(need.used_by)})"
    if used:
        detail += f" on top of {used} already allocated"
    if quota.code == ELASTIC_IPS and elastic_ips_own:
        detail += f" ({elastic_ips_own} allocated are the stack's own, counted in its need)"
    detail += f"; the quota is {value}"
    if quota.unit == "vCPUs":
        detail += " (instances already running are not counted: compare with the quota's usage in Service Quotas)"
    if total <= value:
        return Finding("quotas", "pass", subject, detail)
    request = (
        f"request {total} or more: `aws service-quotas request-service-quota-increase --service-code "
        f"{quota.service} --quota-code {quota.code} --desired-value {total}`"
    )
    if quota.code == ELASTIC_IPS:
        other = "release unused Elastic IPs or set network.natGateways: single"
    elif quota.service == "fsx":
        other = "lower storage.lustre.storageCapacityGib or delete unused file systems"
    else:
        other = "lower the pools' scaling.max"
    return Finding("quotas", "fail", subject, detail, f"{request}, or {other}")


def addons(needs: Needs, published: Mapping[str, Iterable[str]]) -> list[Finding]:
    """Every add-on version the plan installs is published for the cluster's Kubernetes version. `published`: add-on
    name -> its versions for that version (DescribeAddonVersions)."""
    out = []
    for name, version in sorted(needs.addons.items()):
        versions = sorted(published.get(name, ()))
        subject = f"{name} {version}"
        if version in versions:
            out.append(Finding("addons", "pass", subject, f"published for Kubernetes {needs.kubernetes_version}"))
        else:
            out.append(
                Finding(
                    "addons",
                    "fail",
                    subject,
                    f"not published for Kubernetes {needs.kubernetes_version} in {needs.region} "
                    f"(published: {', '.join(versions[-3:]) or 'none'})",
                    f"pin a published version in addons.managed.pins.{name} (`aws eks describe-addon-versions "
                    f"--addon-name {name} --kubernetes-version {needs.kubernetes_version}`)",
                )
            )
    return out


def addon_configuration(needs: Needs, schemas: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """Every key the stack sets in an add-on's `configurationValues` is a property of the add-on's configuration
    schema for the pinned version, so EKS does not refuse the values (or, where the schema allows more, drop them).
    `schemas`: add-on name -> its JSON schema (DescribeAddonConfiguration `configurationSchema`)."""
    out = []
    for name, values in sorted(needs.addon_values.items()):
        schema = schemas.get(name)
        subject = f"{name} {needs.addons.get(name, '')} configuration".replace("  ", " ")
        if schema is None:
            out.append(
                Finding(
                    "addons",
                    "skip",
                    subject,
                    "no schema read: the pinned version is not published for this Kubernetes version (above)",
                    f"pin a published version in addons.managed.pins.{name}, then run preflight again",
                )
            )
            continue
        unknown = sorted(undeclared_paths(values, schema))
        if unknown:
            out.append(
                Finding(
                    "addons",
                    "fail",
                    subject,
                    f"the add-on's configuration schema declares no {', '.join(unknown)}",
                    f"`aws eks describe-addon-configuration --addon-name {name} --addon-version "
                    f"{needs.addons.get(name, '<version>')}` lists what it takes; pin a version whose schema has "
                    "these keys",
                )
            )
        else:
            out.append(Finding("addons", "pass", subject, f"every key is in its schema ({', '.join(sorted(values))})"))
    return out


def undeclared_paths(values: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """The key paths of `values` (objects only; list items and free-form maps are not descended into) that the
    schema's `properties` do not declare, where it declares properties at all."""
    if not isinstance(values, dict):
        return []
    declared = schema.get("properties")
    if not isinstance(declared, dict):
        return []
    out = []
    for key, value in values.items():
        where = f"{path}.{key}" if path else key
        if key not in declared:
            out.append(where)
        else:
            out += undeclared_paths(value, declared[key], where)
    return out


def ami_parameters(needs: Needs, missing: Iterable[str]) -> list[Finding]:
    """Every AMI parameter the launch templates read exists (SSM GetParameters `InvalidParameters`)."""
    absent = set(missing)
    out = []
    for name in needs.ami_parameters:
        if name in absent:
            out.append(
                Finding(
                    "ami",
                    "fail",
                    name,
                    f"no such public parameter in {needs.region}: the AMI release is not published for Kubernetes "
                    f"{needs.kubernetes_version} there",
                    "set cluster.amiRelease (or bottlerocketRelease) to a release published for this Kubernetes "
                    "version (docs/operations.md, 'Upgrading node images')",
                )
            )
        else:
            out.append(Finding("ami", "pass", name, "exists"))
    return out


def service_linked_roles(
    needs: Needs, existing: Mapping[str, str], cluster_exists: bool | None = None
) -> list[Finding]:
    """The service-linked roles the stack relies on: present, or created on first use by their service, and the
    stack's own Auto Scaling role absent before the first deploy or made by it. `existing`: role name -> its
    description (GetRole); `cluster_exists`: whether the stack's EKS cluster exists (DescribeCluster; None: not
    asked), which tells a deployed stack's role from one a destroyed or forgotten stack left behind."""
    return [_role(role, existing.get(role.name), cluster_exists) for role in needs.service_linked_roles]


def _role(role: ServiceLinkedRole, description: str | None, cluster_exists: bool | None) -> Finding:
    if role.own_description is not None:
        return _own_role(role, description, cluster_exists)
    if description is not None:
        return Finding("roles", "pass", role.name, "exists")
    return Finding(
        "roles",
        "warn",
        role.name,
        f"absent: {role.service} creates it on first use ({role.source})",
        "nothing, if the deployer may call iam:CreateServiceLinkedRole for it (the deployer policy grants it)",
    )


def _own_role(role: ServiceLinkedRole, description: str | None, cluster_exists: bool | None) -> Finding:
    """The stack creates its Auto Scaling role by name: absent is the first deploy, present with the stack's own
    description beside the stack's cluster is an earlier deploy; present without the cluster, a stack that was
    destroyed halfway or removed from its state (or another state of the same name) left it, and a `pulumi up` whose
    state does not hold it cannot create it; present otherwise, the name is taken."""
    if description is None:
        return Finding("roles", "pass", role.name, "absent: `pulumi up` creates it (the stack's own role)")
    if description == role.own_description and cluster_exists is not False:
        return Finding("roles", "pass", role.name, "exists: the stack's own, from an earlier `pulumi up`")
    if description == role.own_description:
        return Finding(
            "roles",
            "warn",
            role.name,
            "exists as this stack creates it, but the stack's EKS cluster does not: left by a stack destroyed halfway "
            "or removed from its state; a `pulumi up` whose state does not hold the role cannot create it (the name "
            "is taken)",
            f"if this stack's state holds it (a first `up` that stopped early), nothing; else delete it "
            f"(`aws iam delete-service-linked-role --role-name {role.name}`) or import it into the stack",
        )
    return Finding(
        "roles",
        "fail",
        role.name,
        f"exists, described {description!r}, not as this stack creates it: `pulumi up` cannot create it (the name is "
        "taken)",
        f"delete it if nothing uses it (`aws iam delete-service-linked-role --role-name {role.name}`), or import it "
        "into the stack, or choose another cluster.name",
    )


def reservations(
    needs: Needs, found: Mapping[str, Mapping[str, object] | None], now: datetime | None = None
) -> list[Finding]:
    """Each reservation the config names exists, is active or scheduled, and matches the pool: AZ, instance type,
    count, and (Capacity Blocks) end date. `found`: id -> DescribeCapacityReservations' entry, None when unknown."""
    now = now or datetime.now(UTC)
    return [_reservation(r, found.get(r.reservation_id), now) for r in needs.reservations]


def _reservation(need: ReservationNeeds, got: Mapping[str, object] | None, now: datetime) -> Finding:
    subject = f"{need.pool}: {need.reservation_id}"
    look = f"`aws ec2 describe-capacity-reservations --capacity-reservation-ids {need.reservation_id}`"
    if got is None:
        return Finding(
            "reservations",
            "fail",
            subject,
            "no such reservation in this account and Region",
            f"check capacity.reservationId ({look})",
        )
    problems = []
    state = str(got.get("State"))
    if state not in USABLE_RESERVATION_STATES:
        problems.append(f"its state is {state}")
    if need.zone is not None and got.get("AvailabilityZone") != need.zone:
        problems.append(f"it is in {got.get('AvailabilityZone')}, the config says {need.zone}")
    if got.get("InstanceType") != need.instance_type:
        problems.append(f"it reserves {got.get('InstanceType')}, the pool launches {need.instance_type}")
    total = got.get("TotalInstanceCount")
    if isinstance(total, int) and total < need.nodes:
        problems.append(f"it holds {total} instances, the pool's scaling.max is {need.nodes}")
    end = got.get("EndDate")
    if need.end_time is not None and isinstance(end, datetime) and end != need.end_time:
        problems.append(f"it ends {end.isoformat()}, capacity.endTime says {need.end_time.isoformat()}")
    if isinstance(end, datetime) and end <= now:
        problems.append(f"it ended {end.isoformat()}")
    if problems:
        return Finding(
            "reservations",
            "fail",
            subject,
            "; ".join(problems),
            f"make the pool's capacity settings match the reservation ({look})",
        )
    return Finding(
        "reservations", "pass", subject, f"{state}, {got.get('AvailabilityZone')}, {total} x {need.instance_type}"
    )


#: A participant may describe a shared transit gateway and create and describe its own attachments; only the owner
#: runs the route table APIs (Transit Gateway guide, "Transit gateway sharing considerations").
SHARING = "https://docs.aws.amazon.com/vpc/latest/tgw/transit-gateway-share.html"


def shared_gateway(site_needs: SiteNeeds, gateway_id: str, gateway: Mapping[str, Any], owner: str) -> list[Finding]:
    """What this account can verify of a transit gateway another account shares with it: that it sees it (the share
    is accepted) and that it is available; whether the owner accepts attachments itself. The routes are the owner's
    to check: searching them is refused here, which is no fault of the stack."""
    cidrs = ", ".join(site_needs.cidrs)
    out = [
        Finding(
            "site",
            "pass",
            gateway_id,
            f"available; owned by account {owner} and shared with this one, which may attach its VPC ({SHARING})",
        )
    ]
    if (gateway.get("Options") or {}).get("AutoAcceptSharedAttachments") != "enable":
        out.append(
            Finding(
                "site",
                "warn",
                gateway_id,
                "the owner accepts shared attachments by hand: the VPC's attachment stays pending, and nothing crosses "
                "it, until account " + owner + " accepts it",
                f"ask account {owner} to accept the attachment `pulumi up` creates (or to enable auto accept shared "
                "attachments)",
            )
        )
    out.append(
        Finding(
            "site",
            "skip",
            f"{gateway_id} -> {cidrs}",
            f"the route tables belong to account {owner}: only it can search them ({SHARING})",
            f"ask account {owner} to check that the route table the attachment joins routes {cidrs} to the site",
        )
    )
    return out


def site(
    site_needs: SiteNeeds | None,
    gateway: Mapping[str, Any] | None,
    routes: Mapping[str, bool] | None,
    account_id: str | None = None,
) -> list[Finding]:
    """The site's gateway exists and is available; a transit gateway routes each of the site's CIDRs (an active route
    covering it in the route table the VPC's attachment will be associated with); a virtual private gateway is
    attached to no other VPC. `gateway`: the DescribeTransitGateways / DescribeVpnGateways entry (None when unknown);
    `routes`: CIDR -> whether an active route covers it (SearchTransitGatewayRoutes), None when the transit gateway
    has no default association route table to search (the attachment's table is chosen when it is associated);
    `account_id`: this account, to tell a transit gateway another account shares through RAM, whose route tables
    only its owner may read (`shared_gateway`)."""
    if site_needs is None:
        return []
    gateway_id = site_needs.transit_gateway_id or site_needs.virtual_private_gateway_id or ""
    if gateway is None:
        return [
            Finding(
                "site",
                "fail",
                gateway_id,
                "no such gateway in this account and Region (or not shared with it)",
                "check network.siteConnection, and that a shared transit gateway's share is accepted",
            )
        ]
    state = gateway.get("State")
    if state != "available":
        return [Finding("site", "fail", gateway_id, f"its state is {state}", "wait until it is available")]
    out = [Finding("site", "pass", gateway_id, "available")]
    if site_needs.virtual_private_gateway_id:
        attached = [
            a
            for a in gateway.get("VpcAttachments", []) or []
            if isinstance(a, dict) and a.get("State") in ("attached", "attaching")
        ]
        if attached:
            out.append(
                Finding(
                    "site",
                    "warn",
                    gateway_id,
                    f"attached to {attached[0].get('VpcId')}: fine if that is this stack's VPC (a run after a deploy)",
                    "otherwise detach it or use a transit gateway: a virtual private gateway serves one VPC",
                )
            )
        return out
    owner = gateway.get("OwnerId")
    if account_id and owner and owner != account_id:
        return shared_gateway(site_needs, gateway_id, gateway, owner)
    if routes is None:
        out.append(
            Finding(
                "site",
                "skip",
                gateway_id,
                "no default association route table: the routes depend on the table the VPC's attachment joins",
                "after `pulumi up`, check that the attachment's route table routes each site CIDR",
            )
        )
        return out
    for cidr in site_needs.cidrs:
        if routes.get(cidr):
            out.append(Finding("site", "pass", f"{gateway_id} -> {cidr}", "an active route covers it"))
        else:
            out.append(
                Finding(
                    "site",
                    "fail",
                    f"{gateway_id} -> {cidr}",
                    "no active route in the transit gateway's default association route table covers it",
                    "route it to the VPN or Direct Connect attachment of the site (or propagate it)",
                )
            )
    return out
