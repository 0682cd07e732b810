"""The read-only AWS calls of preflight, made with botocore clients (the default credential chain, the stack's
Region); each check hands the answers to its pure verdict in `evaluate`.

Calls: ec2 DescribeAvailabilityZones, DescribeInstanceTypeOfferings (LocationType availability-zone-id),
DescribeAddresses, DescribeCapacityReservations, DescribeTransitGateways, SearchTransitGatewayRoutes,
DescribeVpnGateways; sts GetCallerIdentity; service-quotas GetServiceQuota; eks DescribeAddonVersions,
DescribeAddonConfiguration; ssm GetParameters; iam GetRole.
A call the principal may not make is a failed finding naming the action, not a crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from blueprint.preflight import evaluate
from blueprint.preflight.findings import Finding
from blueprint.preflight.needs import Needs
from components.catalog.quotas import count_quotas
from components.planning.quotas import LUSTRE_QUOTA_FAMILY
from components.tags import CLUSTER as CLUSTER_TAG

#: `service name -> client`: a botocore session's `create_client` bound to the stack's Region, or stubbed ones.
Clients = Callable[[str], Any]
#: GetParameters takes at most 10 names per call (SSM API reference).
SSM_NAMES_PER_CALL = 10


def denied(check: str, action: str, error: ClientError) -> Finding:
    code = error.response.get("Error", {}).get("Code", "error")
    return Finding(
        check,
        "fail",
        action,
        f"the call failed: {code}: {error.response.get('Error', {}).get('Message', '')}".rstrip(": "),
        f"let the principal running preflight call {action} (read-only), then run it again",
    )


def account_zones(clients: Clients, region: str) -> dict[str, str]:
    """AZ name -> zone ID for this account (only AZs, not Local or Wavelength Zones)."""
    answer = clients("ec2").describe_availability_zones(
        Filters=[{"Name": "region-name", "Values": [region]}, {"Name": "zone-type", "Values": ["availability-zone"]}]
    )
    return {z["ZoneName"]: z["ZoneId"] for z in answer["AvailabilityZones"]}


def offered_zone_ids(clients: Clients, types: list[str]) -> dict[str, set[str]]:
    """Instance type -> the zone IDs offering it."""
    ec2 = clients("ec2")
    out: dict[str, set[str]] = {t: set() for t in types}
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {
            "LocationType": "availability-zone-id",
            "Filters": [{"Name": "instance-type", "Values": types}],
        }
        if token:
            kwargs["NextToken"] = token
        answer = ec2.describe_instance_type_offerings(**kwargs)
        for offer in answer["InstanceTypeOfferings"]:
            out.setdefault(offer["InstanceType"], set()).add(offer["Location"])
        token = answer.get("NextToken")
        if not token:
            return out


def zone_checks(needs: Needs, clients: Clients) -> list[Finding]:
    try:
        zones = account_zones(clients, needs.region)
    except ClientError as error:
        return [denied("zones", "ec2:DescribeAvailabilityZones", error)]
    found = evaluate.zones(needs, zones)
    types = sorted({t for pool in needs.pools for t in pool.instance_types})
    if not types:
        return found
    try:
        offered = offered_zone_ids(clients, types)
    except ClientError as error:
        return [*found, denied("offerings", "ec2:DescribeInstanceTypeOfferings", error)]
    return [*found, *evaluate.offerings(needs, zones, offered)]


def quota_checks(needs: Needs, clients: Clients) -> list[Finding]:
    quotas = clients("service-quotas")
    values: dict[str, float | None] = {}
    problems = []
    for need in needs.quotas:
        code = need.quota.code
        if code is None or code in values:
            continue
        try:
            values[code] = quotas.get_service_quota(ServiceCode=need.quota.service, QuotaCode=code)["Quota"]["Value"]
        except ClientError as error:
            values[code] = None
            if error.response.get("Error", {}).get("Code") != "NoSuchResourceException":
                problems.append(denied("quotas", "servicequotas:GetServiceQuota", error))
                continue
            # no value applied to this account: the AWS default is the quota (Service Quotas API reference)
            try:
                default = quotas.get_aws_default_service_quota(ServiceCode=need.quota.service, QuotaCode=code)
                values[code] = default["Quota"]["Value"]
            except ClientError as default_error:
                problems.append(denied("quotas", "servicequotas:GetAWSDefaultServiceQuota", default_error))
    in_use, own = None, 0
    if needs.nat_gateways:
        try:
            addresses = clients("ec2").describe_addresses()["Addresses"]
        except ClientError as error:
            problems.append(denied("quotas", "ec2:DescribeAddresses", error))
        else:
            own = sum(1 for a in addresses if is_the_stacks(a, needs.cluster))
            in_use = len(addresses) - own
    others: dict[str, int] = {}
    if any(need.quota.service == "fsx" for need in needs.quotas):
        try:
            others = lustre_in_use(clients, needs.cluster)
        except ClientError as error:
            problems.append(denied("quotas", "fsx:DescribeFileSystems", error))
    return [*evaluate.quotas(needs, values, in_use, own, others), *problems]


def lustre_in_use(clients: Clients, cluster: str) -> dict[str, int]:
    """What the Region's other Lustre file systems use of the Lustre quotas, by quota code: one file system and its
    capacity each, against the quotas of its deployment type (`components.planning.quotas`). The stack's own file
    system (an earlier `pulumi up`, tagged with its cluster) is left out: its need already counts it."""
    catalog = count_quotas()
    used: dict[str, int] = {}
    kwargs: dict[str, Any] = {}
    while True:
        answer = clients("fsx").describe_file_systems(**kwargs)
        for fs in answer.get("FileSystems", []):
            family = LUSTRE_QUOTA_FAMILY.get((fs.get("LustreConfiguration") or {}).get("DeploymentType", ""))
            if fs.get("FileSystemType") != "LUSTRE" or family is None or is_the_stacks(fs, cluster):
                continue
            for key, amount in (
                (f"lustre_file_systems_{family}", 1),
                (f"lustre_storage_gib_{family}", fs["StorageCapacity"]),
            ):
                code = catalog[key].code
                if code is not None:
                    used[code] = used.get(code, 0) + int(amount)
        kwargs["NextToken"] = answer.get("NextToken")
        if not kwargs["NextToken"]:
            return used


def is_the_stacks(address: dict[str, Any], cluster: str) -> bool:
    """An Elastic IP or file system of this stack (an earlier `pulumi up`): every resource of the stack carries the
    `gpu-clusters/cluster` tag with the cluster's name, which is unique in the Region (components/tags.py)."""
    return any(t.get("Key") == CLUSTER_TAG and t.get("Value") == cluster for t in address.get("Tags", []) or [])


def addon_checks(needs: Needs, clients: Clients) -> list[Finding]:
    eks = clients("eks")
    published: dict[str, list[str]] = {}
    for name in sorted(needs.addons):
        try:
            answer = eks.describe_addon_versions(addonName=name, kubernetesVersion=needs.kubernetes_version)
        except ClientError as error:
            return [denied("addons", "eks:DescribeAddonVersions", error)]
        published[name] = [v["addonVersion"] for a in answer.get("addons", []) for v in a.get("addonVersions", [])]
    schemas: dict[str, dict[str, Any]] = {}
    for name in sorted(needs.addon_values):
        if needs.addons.get(name) not in published.get(name, ()):
            continue  # an unpublished version is reported above and has no schema to read
        try:
            answer = eks.describe_addon_configuration(addonName=name, addonVersion=needs.addons[name])
        except ClientError as error:
            return [*evaluate.addons(needs, published), denied("addons", "eks:DescribeAddonConfiguration", error)]
        schemas[name] = json.loads(answer.get("configurationSchema") or "{}")
    return [*evaluate.addons(needs, published), *evaluate.addon_configuration(needs, schemas)]


def ami_checks(needs: Needs, clients: Clients) -> list[Finding]:
    ssm = clients("ssm")
    names = list(needs.ami_parameters)
    missing: list[str] = []
    for start in range(0, len(names), SSM_NAMES_PER_CALL):
        try:
            answer = ssm.get_parameters(Names=names[start : start + SSM_NAMES_PER_CALL])
        except ClientError as error:
            return [denied("ami", "ssm:GetParameters", error)]
        missing += answer.get("InvalidParameters", [])  # left out of the answer when every name exists
    return evaluate.ami_parameters(needs, missing)


def role_checks(needs: Needs, clients: Clients) -> list[Finding]:
    iam = clients("iam")
    existing: dict[str, str] = {}
    for role in needs.service_linked_roles:
        try:
            existing[role.name] = iam.get_role(RoleName=role.name)["Role"].get("Description", "")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "NoSuchEntity":
                return [denied("roles", "iam:GetRole", error)]
    own = [r for r in needs.service_linked_roles if r.own_description is not None and r.name in existing]
    return evaluate.service_linked_roles(needs, existing, cluster_exists(needs, clients) if own else None)


def cluster_exists(needs: Needs, clients: Clients) -> bool | None:
    """Whether the stack's EKS cluster exists (DescribeCluster); None when it could not be asked."""
    try:
        clients("eks").describe_cluster(name=needs.cluster)
    except ClientError as error:
        return False if error.response.get("Error", {}).get("Code") == "ResourceNotFoundException" else None
    return True


def reservation_checks(needs: Needs, clients: Clients) -> list[Finding]:
    ec2 = clients("ec2")
    found: dict[str, dict[str, Any] | None] = {}
    for need in needs.reservations:
        try:
            answer = ec2.describe_capacity_reservations(CapacityReservationIds=[need.reservation_id])
            entries = answer["CapacityReservations"]
            found[need.reservation_id] = entries[0] if entries else None
        except ClientError as error:
            if "NotFound" not in error.response.get("Error", {}).get("Code", ""):
                return [denied("reservations", "ec2:DescribeCapacityReservations", error)]
            found[need.reservation_id] = None
    return evaluate.reservations(needs, found)


def caller_account(clients: Clients) -> str | None:
    """This account's id (sts GetCallerIdentity, which needs no permission); None when it cannot be read."""
    try:
        return str(clients("sts").get_caller_identity()["Account"])
    except ClientError:
        return None


def site_checks(needs: Needs, clients: Clients) -> list[Finding]:
    site = needs.site
    if site is None:
        return []
    ec2 = clients("ec2")
    try:
        if site.virtual_private_gateway_id:
            answer = ec2.describe_vpn_gateways(VpnGatewayIds=[site.virtual_private_gateway_id])["VpnGateways"]
            return evaluate.site(site, answer[0] if answer else None, {})
        assert site.transit_gateway_id is not None
        gateways = ec2.describe_transit_gateways(TransitGatewayIds=[site.transit_gateway_id])["TransitGateways"]
    except ClientError as error:
        if "NotFound" in error.response.get("Error", {}).get("Code", ""):
            return evaluate.site(site, None, {})
        action = "ec2:DescribeVpnGateways" if site.virtual_private_gateway_id else "ec2:DescribeTransitGateways"
        return [denied("site", action, error)]
    gateway = gateways[0] if gateways else None
    account_id = caller_account(clients)
    if gateway is not None and account_id and gateway.get("OwnerId") not in (None, account_id):
        return evaluate.site(site, gateway, None, account_id)  # shared through RAM: its route tables are the owner's
    table = (gateway or {}).get("Options", {}).get("AssociationDefaultRouteTableId")
    if gateway is not None and not table:
        return evaluate.site(site, gateway, None)
    routes: dict[str, bool] = {}
    for cidr in site.cidrs if table else ():
        try:
            answer = ec2.search_transit_gateway_routes(
                TransitGatewayRouteTableId=table,
                Filters=[
                    {"Name": "route-search.supernet-of-match", "Values": [cidr]},
                    {"Name": "state", "Values": ["active"]},
                ],
            )
        except ClientError as error:
            return [denied("site", "ec2:SearchTransitGatewayRoutes", error)]
        routes[cidr] = bool(answer["Routes"])
    return evaluate.site(site, gateway, routes)


#: Every check, in the order they are reported.
CHECKS: dict[str, Callable[[Needs, Clients], list[Finding]]] = {
    "zones": zone_checks,
    "quotas": quota_checks,
    "addons": addon_checks,
    "ami": ami_checks,
    "roles": role_checks,
    "reservations": reservation_checks,
    "site": site_checks,
}


def run_checks(needs: Needs, clients: Clients) -> list[Finding]:
    """Every check's findings. Credentials missing or AWS unreachable raise botocore's errors to the caller."""
    return [finding for check in CHECKS.values() for finding in check(needs, clients)]
