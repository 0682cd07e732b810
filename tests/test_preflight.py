"""`blueprint preflight`: the verdicts on the account's answers (pure), each check's AWS calls under botocore's
Stubber (pass and fail), and the command end to end with stubbed clients and with no credentials at all."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.stub import Stubber

from blueprint.plan import plan as plan_module
from blueprint.preflight import account, command, evaluate
from blueprint.preflight.needs import ADDON, Needs, needs_of, stack_needs
from components.planning.stack_plan import plan_pools
from tests.builders import HYBRID_POOL, P5, SYSTEM, CliResult, shipped_stack, stack_config
from tests.stubbed_aws import stubbed_client

AL2023 = (
    "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/{}/amazon-eks-node-al2023-x86_64-{}-1.35-v20260714"
    "/image_id"
)
STANDARD_AMI = AL2023.format("standard", "standard")
NVIDIA_AMI = AL2023.format("nvidia", "nvidia")
#: The names and IDs one us-east-1 account sees; us-east-1c is the zone EKS refuses for cluster subnets there.
ACCOUNT_ZONES = {"us-east-1a": "use1-az4", "us-east-1b": "use1-az6", "us-east-1c": "use1-az3"}
RESERVED: dict[str, Any] = {
    "name": "h100",
    "role": "training",
    "instanceType": "p5.48xlarge",
    "scaling": {"min": 0, "max": 2},
    "capacity": {
        "type": "capacity-block",
        "reservationId": "cr-0123456789abcdef0",
        "availabilityZone": "us-east-1a",
        "endTime": "2026-12-01T11:30:00Z",
    },
}
HYBRID = HYBRID_POOL
#: The account the stubbed credentials belong to.
ACCOUNT = "123456789012"


def needs(*pools: dict[str, Any], zones: tuple[str, ...] = ("us-east-1a", "us-east-1b"), **network: Any) -> Needs:
    spec = stack_config(*(pools or (SYSTEM, P5)), zones=zones, network=network or None, validated=True)
    resources = [{"type": ADDON, "inputs": {"addonName": "vpc-cni", "addonVersion": "v1.22.4-eksbuild.3"}}]
    return needs_of(spec, plan_pools(spec), resources, ["autoscaling.amazonaws.com", "eks.amazonaws.com"])


def statuses(findings: list[Any]) -> list[tuple[str, str]]:
    return [(f.subject, f.status) for f in findings]


# ------------------------------------------------------------------------------------------------ pure verdicts
def test_zones_pass_and_name_their_ids() -> None:
    found = evaluate.zones(needs(), ACCOUNT_ZONES)
    assert statuses(found) == [("us-east-1a", "pass"), ("us-east-1b", "pass")]
    assert "use1-az4" in found[0].detail


def test_a_zone_eks_refuses_for_cluster_subnets_fails_with_the_source() -> None:
    (first, refused) = evaluate.zones(needs(zones=("us-east-1a", "us-east-1c")), ACCOUNT_ZONES)
    assert first.status == "pass" and refused.status == "fail"
    assert "use1-az3" in refused.detail and "network-reqs.html" in refused.detail
    assert "network.availabilityZones" in refused.fix


def test_a_refused_zone_only_warns_while_two_zones_are_left_for_the_cluster() -> None:
    found = evaluate.zones(needs(zones=("us-east-1a", "us-east-1b", "us-east-1c")), ACCOUNT_ZONES)
    assert statuses(found) == [("us-east-1a", "pass"), ("us-east-1b", "pass"), ("us-east-1c", "warn")]
    assert "use1-az3" in found[2].detail


def test_a_zone_the_account_lacks_or_maps_elsewhere_fails() -> None:
    mapped = needs(availabilityZoneIds={"us-east-1a": "use1-az1", "us-east-1b": "use1-az6"})
    assert statuses(evaluate.zones(mapped, ACCOUNT_ZONES)) == [("us-east-1a", "fail"), ("us-east-1b", "pass")]
    assert statuses(evaluate.zones(needs(), {"us-east-1a": "use1-az4"}))[1] == ("us-east-1b", "fail")


def test_offerings_per_zone_id() -> None:
    n = needs()
    offered = {"m7i.xlarge": {"use1-az4", "use1-az6"}, "p5.48xlarge": {"use1-az6"}}
    found = evaluate.offerings(n, ACCOUNT_ZONES, offered)
    assert statuses(found) == [
        ("system in us-east-1a", "pass"),
        ("system in us-east-1b", "pass"),
        ("h100 in us-east-1a", "fail"),
    ]
    assert "us-east-1b" in found[-1].fix


def test_quotas_hold_or_fail_with_the_request_command() -> None:
    n = needs()
    enough = {q.quota.code: float(q.needed) for q in n.quotas if q.quota.code}
    found = evaluate.quotas(n, enough, elastic_ips_in_use=0)
    assert {f.status for f in found if f.subject.startswith("Running")} == {"pass"}
    p = next(q for q in n.quotas if q.quota.code == "L-417A185B")
    short = evaluate.quotas(n, {**enough, "L-417A185B": p.needed - 1.0}, 0)
    failed = [f for f in short if f.status == "fail"]
    assert len(failed) == 1 and "--quota-code L-417A185B" in failed[0].fix
    spec = stack_config(SYSTEM, P5, storage={"lustre": {"storageCapacityGib": 4800}}, validated=True)
    lustre = needs_of(spec, plan_pools(spec), [], [])
    storage = next(q for q in lustre.quotas if q.quota.code == "L-8F1B9C74")
    assert (storage.quota.name, storage.needed) == ("Lustre Persistent_2 storage capacity", 4800)
    room = {q.quota.code: float(q.needed) for q in lustre.quotas if q.quota.code}
    assert {f.status for f in evaluate.quotas(lustre, room, 0)} == {"pass"}
    (full,) = [f for f in evaluate.quotas(lustre, {**room, "L-8F1B9C74": 2400.0}, 0) if f.status == "fail"]
    assert "Lustre Persistent_2 storage capacity (L-8F1B9C74)" in full.subject
    assert "--service-code fsx --quota-code L-8F1B9C74 --desired-value 4800" in full.fix
    assert "storage.lustre.storageCapacityGib" in full.fix and "scaling.max" not in full.fix


def test_elastic_ips_count_those_already_allocated() -> None:
    n = needs()
    quota = {q.quota.code: 100.0 for q in n.quotas if q.quota.code} | {"L-0263D0A3": 5.0}
    assert n.nat_gateways == 2
    eip = lambda used: next(f for f in evaluate.quotas(n, quota, used) if "L-0263D0A3" in f.subject)  # noqa: E731
    assert eip(3).status == "pass"
    assert eip(4).status == "fail" and "3 or more" not in eip(4).fix and "desired-value 6" in eip(4).fix


def test_addon_versions_must_be_published() -> None:
    n = needs()
    assert statuses(evaluate.addons(n, {"vpc-cni": ["v1.22.4-eksbuild.3"]})) == [("vpc-cni v1.22.4-eksbuild.3", "pass")]
    (missing,) = evaluate.addons(n, {"vpc-cni": ["v1.22.5-eksbuild.1"]})
    assert missing.status == "fail" and "addons.managed.pins.vpc-cni" in missing.fix


CLOUDWATCH = "amazon-cloudwatch-observability"
CLOUDWATCH_VERSION = "v6.7.0-eksbuild.1"
CLOUDWATCH_VALUES = {
    "tolerations": [{"operator": "Exists"}],
    "manager": {"nodeSelector": {"a": "b"}, "tolerations": []},
}
#: The shape of the add-on's configuration schema: declared properties, nested for `manager`.
CLOUDWATCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "tolerations": {"type": "array"},
        "manager": {"type": "object", "properties": {"nodeSelector": {"type": "object"}, "tolerations": {}}},
    },
}


def configured_needs() -> Needs:
    spec = stack_config(SYSTEM, validated=True)
    resources = [
        {
            "type": ADDON,
            "inputs": {
                "addonName": CLOUDWATCH,
                "addonVersion": CLOUDWATCH_VERSION,
                "configurationValues": json.dumps(CLOUDWATCH_VALUES),
            },
        }
    ]
    return needs_of(spec, plan_pools(spec), resources, [])


def test_the_addons_configuration_keys_must_be_in_its_schema() -> None:
    n = configured_needs()
    assert n.addon_values == {CLOUDWATCH: CLOUDWATCH_VALUES}
    (ok,) = evaluate.addon_configuration(n, {CLOUDWATCH: CLOUDWATCH_SCHEMA})
    assert ok.status == "pass"
    older = {**CLOUDWATCH_SCHEMA, "properties": {"tolerations": {"type": "array"}}}
    (refused,) = evaluate.addon_configuration(n, {CLOUDWATCH: older})
    assert refused.status == "fail" and "declares no manager" in refused.detail
    assert f"--addon-version {CLOUDWATCH_VERSION}" in refused.fix
    no_selector = {
        **CLOUDWATCH_SCHEMA,
        "properties": {**CLOUDWATCH_SCHEMA["properties"], "manager": {"properties": {}}},
    }
    (nested,) = evaluate.addon_configuration(n, {CLOUDWATCH: no_selector})
    assert "manager.nodeSelector, manager.tolerations" in nested.detail


def test_ami_parameters_come_from_the_pools_and_must_exist() -> None:
    n = needs()
    assert n.ami_parameters == (STANDARD_AMI, NVIDIA_AMI)
    assert statuses(evaluate.ami_parameters(n, [NVIDIA_AMI])) == [(STANDARD_AMI, "pass"), (NVIDIA_AMI, "fail")]


OWN_ROLE = "AWSServiceRoleForAutoScaling_demo.us-east-1"
OWN_DESCRIPTION = "EC2 Auto Scaling groups of EKS cluster demo (us-east-1)"


def test_the_stacks_own_auto_scaling_role_is_absent_before_the_first_deploy_and_its_own_after() -> None:
    n = needs()
    assert statuses(evaluate.service_linked_roles(n, {})) == [
        (OWN_ROLE, "pass"),
        ("AWSServiceRoleForAmazonEKS", "warn"),
    ]
    assert "pulumi up` creates it" in evaluate.service_linked_roles(n, {})[0].detail
    earlier = evaluate.service_linked_roles(n, {OWN_ROLE: OWN_DESCRIPTION, "AWSServiceRoleForAmazonEKS": ""})
    assert statuses(earlier) == [(OWN_ROLE, "pass"), ("AWSServiceRoleForAmazonEKS", "pass")]
    assert "earlier" in earlier[0].detail
    left = evaluate.service_linked_roles(n, {OWN_ROLE: OWN_DESCRIPTION}, cluster_exists=False)[0]
    assert left.status == "warn" and "cluster does not" in left.detail and "delete-service-linked-role" in left.fix
    assert evaluate.service_linked_roles(n, {OWN_ROLE: OWN_DESCRIPTION}, cluster_exists=True)[0].status == "pass"


def test_a_role_of_the_stacks_name_made_otherwise_fails_because_up_cannot_create_it() -> None:
    (taken, _) = evaluate.service_linked_roles(needs(), {OWN_ROLE: "made by hand"})
    assert taken.status == "fail" and "name is taken" in taken.detail
    assert f"delete-service-linked-role --role-name {OWN_ROLE}" in taken.fix and "cluster.name" in taken.fix


def test_the_accounts_default_auto_scaling_role_is_not_asked_for() -> None:
    assert "AWSServiceRoleForAutoScaling" not in [r.name for r in needs().service_linked_roles]


def _block(**changes: Any) -> dict[str, Any]:
    return {
        "State": "scheduled",
        "AvailabilityZone": "us-east-1a",
        "InstanceType": "p5.48xlarge",
        "TotalInstanceCount": 2,
        "EndDate": datetime(2026, 12, 1, 11, 30, tzinfo=UTC),
        **changes,
    }


def test_a_capacity_block_must_match_the_config() -> None:
    n = needs(SYSTEM, RESERVED)
    now = datetime(2026, 11, 26, tzinfo=UTC)
    rid = "cr-0123456789abcdef0"
    assert evaluate.reservations(n, {rid: _block()}, now)[0].status == "pass"
    assert evaluate.reservations(n, {rid: None}, now)[0].status == "fail"
    for wrong in (
        {"State": "expired"},
        {"AvailabilityZone": "us-east-1b"},
        {"InstanceType": "p5e.48xlarge"},
        {"TotalInstanceCount": 1},
        {"EndDate": datetime(2026, 12, 2, 11, 30, tzinfo=UTC)},
    ):
        (found,) = evaluate.reservations(n, {rid: _block(**wrong)}, now)
        assert found.status == "fail", wrong


def test_the_site_gateway_and_its_routes() -> None:
    spec = stack_config(SYSTEM, HYBRID, validated=True)
    n = needs_of(spec, plan_pools(spec), [], [])
    assert n.site is not None and n.site.cidrs[:2] == ("192.168.100.0/24", "192.168.128.0/18")
    gateway = {"State": "available"}
    routed = dict.fromkeys(n.site.cidrs, True)
    assert {f.status for f in evaluate.site(n.site, gateway, routed)} == {"pass"}
    partly = evaluate.site(n.site, gateway, {**routed, "192.168.128.0/18": False})
    assert [f.subject for f in partly if f.status == "fail"] == [f"{n.site.transit_gateway_id} -> 192.168.128.0/18"]
    assert evaluate.site(n.site, None, {})[0].status == "fail"
    assert evaluate.site(n.site, {"State": "pending"}, routed)[0].status == "fail"
    # no default association route table: nothing to search, so the routes are left to check after the deploy
    unsearched = evaluate.site(n.site, gateway, None)
    assert [f.status for f in unsearched] == ["pass", "skip"] and "route table" in unsearched[1].detail


# ---------------------------------------------------------------------------------------- the calls, stubbed
class _Stubs(dict[str, Stubber]):
    """Each service's shared client under its own Stubber, lent when a test first names the service (as a client or
    to queue an answer): a test calls two or three of the seven."""

    def __init__(self, leases: ExitStack) -> None:
        super().__init__()
        self._leases = leases

    def __missing__(self, service: str) -> Stubber:
        stub = self[service] = self._leases.enter_context(stubbed_client(service)).stub
        return stub

    def client(self, service: str) -> Any:
        return self[service].client


@pytest.fixture
def stubbed() -> Iterator[tuple[Callable[[str], Any], _Stubs]]:
    """`clients` as preflight takes them, each with a Stubber that must be used up."""
    with ExitStack() as leases:
        stubs = _Stubs(leases)
        yield stubs.client, stubs


ZONE_FILTERS = [
    {"Name": "region-name", "Values": ["us-east-1"]},
    {"Name": "zone-type", "Values": ["availability-zone"]},
]


def _zones_answer(zones: dict[str, str]) -> dict[str, Any]:
    return {"AvailabilityZones": [{"ZoneName": n, "ZoneId": i, "RegionName": "us-east-1"} for n, i in zones.items()]}


def _offerings_answer(offered: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "InstanceTypeOfferings": [
            {"InstanceType": t, "LocationType": "availability-zone-id", "Location": z}
            for t, zs in offered.items()
            for z in zs
        ]
    }


@pytest.mark.parametrize(
    ("zones", "p5_zone", "expected"),
    [
        (ACCOUNT_ZONES, "use1-az4", {"pass"}),
        ({**ACCOUNT_ZONES, "us-east-1b": "use1-az3"}, "use1-az4", {"pass", "fail"}),
        (ACCOUNT_ZONES, "use1-az6", {"pass", "fail"}),
    ],
    ids=["pass", "refused-zone", "not-offered"],
)
def test_zone_checks_stubbed(stubbed: Any, zones: dict[str, str], p5_zone: str, expected: set[str]) -> None:
    clients, stubs = stubbed
    stubs["ec2"].add_response("describe_availability_zones", _zones_answer(zones), {"Filters": ZONE_FILTERS})
    offered = {"m7i.xlarge": ["use1-az4", "use1-az6", "use1-az3"], "p5.48xlarge": [p5_zone]}
    params = {
        "LocationType": "availability-zone-id",
        "Filters": [{"Name": "instance-type", "Values": ["m7i.xlarge", "p5.48xlarge"]}],
    }
    first = _offerings_answer({"m7i.xlarge": offered["m7i.xlarge"]}) | {"NextToken": "page2"}
    stubs["ec2"].add_response("describe_instance_type_offerings", first, params)
    stubs["ec2"].add_response(
        "describe_instance_type_offerings",
        _offerings_answer({"p5.48xlarge": offered["p5.48xlarge"]}),
        {**params, "NextToken": "page2"},
    )
    found = account.zone_checks(needs(), clients)
    assert {f.status for f in found} == expected


def test_a_denied_call_is_a_failed_finding_naming_the_action(stubbed: Any) -> None:
    clients, stubs = stubbed
    stubs["ec2"].add_client_error("describe_availability_zones", "UnauthorizedOperation", "not allowed", 403)
    (found,) = account.zone_checks(needs(), clients)
    assert found.status == "fail" and "ec2:DescribeAvailabilityZones" in found.fix


@pytest.mark.parametrize(("p_quota", "eips", "status"), [(768.0, 0, "pass"), (384.0, 0, "fail"), (768.0, 4, "fail")])
def test_quota_checks_stubbed(stubbed: Any, p_quota: float, eips: int, status: str) -> None:
    clients, stubs = stubbed
    n = needs()
    for need in n.quotas:
        if need.quota.code is None:
            continue
        value = p_quota if need.quota.code == "L-417A185B" else 5.0 if need.quota.code == "L-0263D0A3" else 1000.0
        answer = {"Quota": {"QuotaCode": need.quota.code, "ServiceCode": need.quota.service, "Value": value}}
        stubs["service-quotas"].add_response(
            "get_service_quota", answer, {"ServiceCode": need.quota.service, "QuotaCode": need.quota.code}
        )
    addresses = [{"AllocationId": f"eipalloc-{i:017x}", "PublicIp": f"198.51.100.{i}"} for i in range(eips)]
    stubs["ec2"].add_response("describe_addresses", {"Addresses": addresses}, {})
    found = account.quota_checks(n, clients)
    coded = {f.status for f in found if "no code" not in f.subject}
    assert coded == ({"pass"} if status == "pass" else {"pass", "fail"})


def _lustre(fs_id: str, deployment: str, gib: int, cluster: str | None) -> dict[str, Any]:
    fs: dict[str, Any] = {
        "FileSystemId": fs_id,
        "FileSystemType": "LUSTRE",
        "StorageCapacity": gib,
        "LustreConfiguration": {"DeploymentType": deployment},
    }
    if cluster:  # FSx answers no Tags list rather than an empty one
        fs["Tags"] = [{"Key": "gpu-clusters/cluster", "Value": cluster}]
    return fs


@pytest.mark.parametrize(("others_gib", "status"), [(90_000, "pass"), (98_000, "fail")])
def test_lustre_quotas_count_the_regions_other_file_systems_not_the_stacks_own(
    stubbed: Any, others_gib: int, status: str
) -> None:
    """The Persistent_2 storage quota (100,800 GiB by default) holds a 4,800 GiB file system only if the Region's
    other Persistent_2 file systems leave room; the stack's own, from an earlier deploy, and other types don't count."""
    clients, stubs = stubbed
    spec = stack_config(SYSTEM, P5, storage={"lustre": {"storageCapacityGib": 4800}}, validated=True)
    n = needs_of(spec, plan_pools(spec), [], [])
    for need in n.quotas:
        if need.quota.code is not None:
            key = {"ServiceCode": need.quota.service, "QuotaCode": need.quota.code}
            value = 100_800.0 if need.quota.code == "L-8F1B9C74" else 10_000.0
            stubs["service-quotas"].add_response("get_service_quota", {"Quota": {**key, "Value": value}}, key)
    stubs["ec2"].add_response("describe_addresses", {"Addresses": []}, {})
    page_one = [
        _lustre("fs-0123456789abcdef0", "PERSISTENT_2", others_gib, "another"),
        _lustre("fs-0123456789abcdef1", "PERSISTENT_2", 4800, n.cluster),
    ]
    stubs["fsx"].add_response("describe_file_systems", {"FileSystems": page_one, "NextToken": "more"}, {})
    page_two = [_lustre("fs-0123456789abcdef2", "SCRATCH_2", 50_000, None)]
    stubs["fsx"].add_response("describe_file_systems", {"FileSystems": page_two}, {"NextToken": "more"})
    found = account.quota_checks(n, clients)
    (storage,) = [f for f in found if "L-8F1B9C74" in f.subject]
    assert storage.status == status
    assert f"on top of {others_gib} already allocated" in storage.detail
    (count,) = [f for f in found if "L-FD6F2F22" in f.subject]
    assert "on top of 1 already allocated" in count.detail  # the other stack's file system, not this one's


def test_vcpu_quota_findings_say_running_instances_are_not_counted() -> None:
    n = needs()
    enough = {q.quota.code: float(q.needed) for q in n.quotas if q.quota.code}
    p5 = next(f for f in evaluate.quotas(n, enough, 0) if "L-417A185B" in f.subject)
    assert "already running are not counted" in p5.detail


def test_a_quota_with_no_applied_value_reads_the_aws_default(stubbed: Any) -> None:
    clients, stubs = stubbed
    n = needs()
    for need in n.quotas:
        if need.quota.code is None:
            continue
        key = {"ServiceCode": need.quota.service, "QuotaCode": need.quota.code}
        if need.quota.code == "L-417A185B":
            stubs["service-quotas"].add_client_error("get_service_quota", "NoSuchResourceException", "none", 404, key)
            answer = {"Quota": {**key, "Value": 96.0}}
            stubs["service-quotas"].add_response("get_aws_default_service_quota", answer, key)
        else:
            stubs["service-quotas"].add_response("get_service_quota", {"Quota": {**key, "Value": 10000.0}}, key)
    stubs["ec2"].add_response("describe_addresses", {"Addresses": []}, {})
    found = account.quota_checks(n, clients)
    p5 = [f for f in found if "L-417A185B" in f.subject]
    assert p5 and {f.status for f in p5} == {"fail"} and "96" in p5[0].detail


@pytest.mark.parametrize(("published", "status"), [("v1.22.4-eksbuild.3", "pass"), ("v1.22.5-eksbuild.1", "fail")])
def test_addon_checks_stubbed(stubbed: Any, published: str, status: str) -> None:
    clients, stubs = stubbed
    answer = {"addons": [{"addonName": "vpc-cni", "addonVersions": [{"addonVersion": published}]}]}
    stubs["eks"].add_response("describe_addon_versions", answer, {"addonName": "vpc-cni", "kubernetesVersion": "1.35"})
    assert [f.status for f in account.addon_checks(needs(), clients)] == [status]


@pytest.mark.parametrize(("schema", "status"), [(CLOUDWATCH_SCHEMA, "pass"), ({"properties": {}}, "fail")])
def test_addon_configuration_checks_stubbed(stubbed: Any, schema: dict[str, Any], status: str) -> None:
    clients, stubs = stubbed
    answer = {"addons": [{"addonName": CLOUDWATCH, "addonVersions": [{"addonVersion": CLOUDWATCH_VERSION}]}]}
    stubs["eks"].add_response("describe_addon_versions", answer, {"addonName": CLOUDWATCH, "kubernetesVersion": "1.35"})
    stubs["eks"].add_response(
        "describe_addon_configuration",
        {"addonName": CLOUDWATCH, "addonVersion": CLOUDWATCH_VERSION, "configurationSchema": json.dumps(schema)},
        {"addonName": CLOUDWATCH, "addonVersion": CLOUDWATCH_VERSION},
    )
    found = account.addon_checks(configured_needs(), clients)
    assert [f.status for f in found] == ["pass", status]


@pytest.mark.parametrize(("invalid", "status"), [([], {"pass"}), ([NVIDIA_AMI], {"pass", "fail"})])
def test_ami_checks_stubbed(stubbed: Any, invalid: list[str], status: set[str]) -> None:
    clients, stubs = stubbed
    found = [
        {"Name": n, "Type": "String", "Value": "ami-0123456789abcdef0"}
        for n in (STANDARD_AMI, NVIDIA_AMI)
        if n not in invalid
    ]
    stubs["ssm"].add_response(
        "get_parameters",
        {"Parameters": found, **({"InvalidParameters": invalid} if invalid else {})},
        {"Names": [STANDARD_AMI, NVIDIA_AMI]},
    )
    assert {f.status for f in account.ami_checks(needs(), clients)} == status


def _role(name: str, description: str | None = None) -> dict[str, Any]:
    role = {
        "Path": "/aws-service-role/",
        "RoleName": name,
        "RoleId": "AROA0000000000000000",
        "Arn": f"arn:aws:iam::123456789012:role/aws-service-role/{name}",
        "CreateDate": datetime(2020, 1, 1, tzinfo=UTC),
    }
    return {"Role": {**role, **({"Description": description} if description is not None else {})}}


@pytest.mark.parametrize(
    ("own", "cluster", "eks_role", "expected"),
    [
        (None, None, True, ["pass", "pass"]),
        (OWN_DESCRIPTION, True, False, ["pass", "warn"]),
        (OWN_DESCRIPTION, False, True, ["warn", "pass"]),
        ("made by hand", True, True, ["fail", "pass"]),
    ],
    ids=["first-deploy", "after-a-deploy", "left-by-a-destroyed-stack", "name-taken"],
)
def test_role_checks_stubbed(
    stubbed: Any, own: str | None, cluster: bool | None, eks_role: bool, expected: list[str]
) -> None:
    clients, stubs = stubbed
    if own is None:
        stubs["iam"].add_client_error(
            "get_role", "NoSuchEntity", "no such role", 404, expected_params={"RoleName": OWN_ROLE}
        )
    else:
        stubs["iam"].add_response("get_role", _role(OWN_ROLE, own), {"RoleName": OWN_ROLE})
    if eks_role:
        stubs["iam"].add_response(
            "get_role", _role("AWSServiceRoleForAmazonEKS"), {"RoleName": "AWSServiceRoleForAmazonEKS"}
        )
    else:
        stubs["iam"].add_client_error(
            "get_role", "NoSuchEntity", "no such role", 404, expected_params={"RoleName": "AWSServiceRoleForAmazonEKS"}
        )
    if cluster is True:
        stubs["eks"].add_response("describe_cluster", {"cluster": {"name": "demo"}}, {"name": "demo"})
    elif cluster is False:
        stubs["eks"].add_client_error(
            "describe_cluster", "ResourceNotFoundException", "no cluster", 404, expected_params={"name": "demo"}
        )
    found = account.role_checks(needs(), clients)
    assert [f.status for f in found] == expected


@pytest.mark.parametrize("exists", [True, False])
def test_reservation_checks_stubbed(stubbed: Any, exists: bool) -> None:
    clients, stubs = stubbed
    rid = "cr-0123456789abcdef0"
    if exists:
        entry = {"CapacityReservationId": rid, **_block(EndDate=datetime(2999, 12, 1, tzinfo=UTC))}
        stubs["ec2"].add_response(
            "describe_capacity_reservations", {"CapacityReservations": [entry]}, {"CapacityReservationIds": [rid]}
        )
    else:
        stubs["ec2"].add_client_error(
            "describe_capacity_reservations",
            "InvalidCapacityReservationId.NotFound",
            "not found",
            400,
            expected_params={"CapacityReservationIds": [rid]},
        )
    spec = stack_config(
        SYSTEM, {**RESERVED, "capacity": {**RESERVED["capacity"], "endTime": "2999-12-01T00:00:00Z"}}, validated=True
    )
    found = account.reservation_checks(needs_of(spec, plan_pools(spec), [], []), clients)
    assert [f.status for f in found] == ["pass" if exists else "fail"]


def _hybrid_needs_with_gateway(stubs: Any, owner: str, options: dict[str, str]) -> Any:
    """The hybrid stack's needs, with DescribeTransitGateways answering its gateway as `owner`'s (and `options`) and
    GetCallerIdentity as this account."""
    spec = stack_config(SYSTEM, HYBRID, validated=True)
    n = needs_of(spec, plan_pools(spec), [], [])
    assert n.site is not None and n.site.transit_gateway_id is not None
    tgw = n.site.transit_gateway_id
    gateway = {
        "TransitGatewayId": tgw,
        "State": "available",
        "OwnerId": owner,
        "Options": {"AssociationDefaultRouteTableId": "tgw-rtb-0123456789abcdef0", **options},
    }
    stubs["ec2"].add_response("describe_transit_gateways", {"TransitGateways": [gateway]}, {"TransitGatewayIds": [tgw]})
    stubs["sts"].add_response("get_caller_identity", {"Account": ACCOUNT}, {})
    return n


@pytest.mark.parametrize("routed", [True, False])
def test_site_checks_stubbed(stubbed: Any, routed: bool) -> None:
    clients, stubs = stubbed
    n = _hybrid_needs_with_gateway(stubs, ACCOUNT, {})
    assert n.site is not None
    for cidr in n.site.cidrs:
        route = {"DestinationCidrBlock": "192.168.0.0/16", "State": "active", "Type": "static"}
        stubs["ec2"].add_response(
            "search_transit_gateway_routes",
            {"Routes": [route] if routed else [], "AdditionalRoutesAvailable": False},
            {
                "TransitGatewayRouteTableId": "tgw-rtb-0123456789abcdef0",
                "Filters": [
                    {"Name": "route-search.supernet-of-match", "Values": [cidr]},
                    {"Name": "state", "Values": ["active"]},
                ],
            },
        )
    found = account.site_checks(n, clients)
    assert {f.status for f in found} == ({"pass"} if routed else {"pass", "fail"})
    assert len(found) == 1 + len(n.site.cidrs)


@pytest.mark.parametrize(
    ("auto_accept", "expected"),
    [("enable", ["pass", "skip"]), ("disable", ["pass", "warn", "skip"])],
    ids=["auto-accepts", "owner-accepts-by-hand"],
)
def test_a_transit_gateway_shared_by_another_account_is_checked_as_far_as_a_participant_may(
    stubbed: Any, auto_accept: str, expected: list[str]
) -> None:
    """A participant may describe a shared transit gateway but not search its route tables: no denied call, no
    failure; the routes are left to the owner, by name."""
    clients, stubs = stubbed
    n = _hybrid_needs_with_gateway(stubs, "210987654321", {"AutoAcceptSharedAttachments": auto_accept})
    assert n.site is not None
    found = account.site_checks(n, clients)  # no SearchTransitGatewayRoutes is stubbed: none may be made
    assert [f.status for f in found] == expected
    assert "210987654321" in found[0].detail and "210987654321" in found[-1].fix
    assert all(cidr in found[-1].fix for cidr in n.site.cidrs)


def test_a_shared_transit_gateway_that_is_not_available_still_fails() -> None:
    spec = stack_config(SYSTEM, HYBRID, validated=True)
    n = needs_of(spec, plan_pools(spec), [], [])
    pending = {"State": "pending", "OwnerId": "210987654321"}
    assert [f.status for f in evaluate.site(n.site, pending, None, ACCOUNT)] == ["fail"]


def _address(i: int, cluster: str | None) -> dict[str, Any]:
    tags = [{"Key": "gpu-clusters/cluster", "Value": cluster}] if cluster else []
    return {"AllocationId": f"eipalloc-{i:017x}", "PublicIp": f"198.51.100.{i}", "Tags": tags}


@pytest.mark.parametrize(
    ("addresses", "status"),
    [
        ([_address(0, "demo"), _address(1, "demo"), _address(2, None), _address(3, "other")], "pass"),
        ([_address(0, "demo"), _address(1, None), _address(2, None), _address(3, "other"), _address(4, None)], "fail"),
    ],
    ids=["after-a-deploy", "others-fill-the-quota"],
)
def test_the_stacks_own_elastic_ips_are_not_counted_twice(
    stubbed: Any, addresses: list[dict[str, Any]], status: str
) -> None:
    """After a deploy the NAT gateways' addresses exist: recognised by the cluster tag, they are the stack's need,
    not an addition to it. The quota is 5, the stack needs 2."""
    clients, stubs = stubbed
    n = needs()
    for need in n.quotas:
        if need.quota.code:
            value = 5.0 if need.quota.code == "L-0263D0A3" else 10000.0
            key = {"ServiceCode": need.quota.service, "QuotaCode": need.quota.code}
            stubs["service-quotas"].add_response("get_service_quota", {"Quota": {**key, "Value": value}}, key)
    stubs["ec2"].add_response("describe_addresses", {"Addresses": addresses}, {})
    (eip,) = [f for f in account.quota_checks(n, clients) if "L-0263D0A3" in f.subject]
    assert eip.status == status
    own = sum(1 for a in addresses if a["Tags"] and a["Tags"][0]["Value"] == "demo")
    assert f"{own} allocated are the stack's own" in eip.detail
    assert f"on top of {len(addresses) - own} already allocated" in eip.detail


# ------------------------------------------------------------------------------------------------ the command
def _stub_everything(stubs: _Stubs, stack: str, healthy: bool) -> Callable[[str], Any]:
    """Clients whose Stubbers answer every call preflight makes for a shipped stack: all well, or one add-on missing."""
    n = stack_needs(stack, None)
    ec2 = stubs["ec2"]
    ec2.add_response("describe_availability_zones", _zones_answer(ACCOUNT_ZONES))
    types = sorted({t for p in n.pools for t in p.instance_types})
    ec2.add_response(
        "describe_instance_type_offerings", _offerings_answer({t: ["use1-az4", "use1-az6"] for t in types})
    )
    for need in n.quotas:
        if need.quota.code:
            stubs["service-quotas"].add_response(
                "get_service_quota", {"Quota": {"QuotaCode": need.quota.code, "Value": 10000.0}}
            )
    ec2.add_response("describe_addresses", {"Addresses": []})
    if any(need.quota.service == "fsx" for need in n.quotas):
        stubs["fsx"].add_response("describe_file_systems", {"FileSystems": []})
    for name in sorted(n.addons):
        shown = shown_version(n, name, healthy)
        stubs["eks"].add_response(
            "describe_addon_versions", {"addons": [{"addonName": name, "addonVersions": [{"addonVersion": shown}]}]}
        )
    for name in sorted(n.addon_values):
        schema: dict[str, Any] = {"properties": {key: {} for key in n.addon_values[name]}}
        if shown_version(n, name, healthy) == n.addons[name]:
            stubs["eks"].add_response("describe_addon_configuration", {"configurationSchema": json.dumps(schema)})
    stubs["ssm"].add_response("get_parameters", {"Parameters": []})
    for role in n.service_linked_roles:
        stubs["iam"].add_response("get_role", _role(role.name, role.own_description))
    if any(role.own_description is not None for role in n.service_linked_roles):
        stubs["eks"].add_response("describe_cluster", {"cluster": {"name": n.cluster}})
    return stubs.client


@pytest.mark.program
@pytest.mark.parametrize(("healthy", "code"), [(True, 0), (False, 1)])
def test_preflight_end_to_end_with_stubbed_clients(
    healthy: bool, code: int, stubbed: Any, monkeypatch: pytest.MonkeyPatch, blueprint_cli: Callable[..., CliResult]
) -> None:
    monkeypatch.setattr(plan_module, "run_stack_under_mocks", lambda stack, config_file: shipped_stack(stack))
    clients = _stub_everything(stubbed[1], "training", healthy)
    monkeypatch.setattr(command, "session_clients", lambda region: clients)
    result = blueprint_cli("preflight", "--stack", "training", "--format", "json")
    assert result.returncode == code, result.stderr
    report = json.loads(result.stdout)
    assert report["region"] == "us-east-1" and report["failed"] is (not healthy)
    checks = {f["check"] for f in report["findings"]}
    assert {"zones", "offerings", "quotas", "addons", "ami", "roles"} <= checks
    failed = [f["subject"] for f in report["findings"] if f["status"] == "fail"]
    assert failed == ([] if healthy else [f"vpc-cni {shipped_addon('training', 'vpc-cni')}"])


def shown_version(n: Needs, name: str, healthy: bool) -> str:
    """The version the stubbed account publishes for an add-on: the pinned one, but vpc-cni's when unhealthy."""
    return n.addons[name] if healthy or name != "vpc-cni" else "v0.0.1-eksbuild.1"


def shipped_addon(stack: str, name: str) -> str:
    return next(
        r["inputs"]["addonVersion"]
        for r in shipped_stack(stack).plan["resources"]
        if r["type"] == ADDON and r["inputs"]["addonName"] == name
    )


@pytest.mark.program
def test_preflight_table_output(
    stubbed: Any, monkeypatch: pytest.MonkeyPatch, blueprint_cli: Callable[..., CliResult]
) -> None:
    monkeypatch.setattr(plan_module, "run_stack_under_mocks", lambda stack, config_file: shipped_stack(stack))
    clients = _stub_everything(stubbed[1], "training", True)
    monkeypatch.setattr(command, "session_clients", lambda region: clients)
    monkeypatch.setenv("COLUMNS", "400")  # one line per row, so the cells can be read whole
    result = blueprint_cli("preflight", "--stack", "training")
    assert result.returncode == 0 and "use1-az4" in result.stdout and "AWSServiceRoleForAmazonEKS" in result.stdout


def without_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """No credentials anywhere the default chain looks: no variables, no shared files, no instance metadata."""
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.program
def test_without_credentials_preflight_stops_with_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, blueprint_cli: Callable[..., CliResult]
) -> None:
    monkeypatch.setattr(plan_module, "run_stack_under_mocks", lambda stack, config_file: shipped_stack(stack))
    without_credentials(monkeypatch, tmp_path)
    result = blueprint_cli("preflight", "--stack", "training")
    assert result.returncode == 74
    assert result.stderr.strip().splitlines() == ["blueprint: preflight: cannot ask AWS: Unable to locate credentials"]
    assert result.stdout == ""
