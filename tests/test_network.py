"""Network component: subnets and their tags, NAT layout, the S3 endpoint, and existing-VPC pass-through."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import pulumi
import pytest

from blueprint.plan.runner import ProgramRun, run_mocked
from components.config import StackConfig
from components.network import INTERNAL_LB_TAG, PUBLIC_LB_TAG, Network
from components.planning.subnets import NoClusterZones, cluster_subnet_zones, subnet_layout
from tests.builders import SUBNET, once_per_config, shipped_stack, stack_config

pytestmark = pytest.mark.program

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
TAGS = {"gpu-clusters/cluster": "demo", "team": "ml"}


def spec(network: dict[str, Any]) -> StackConfig:
    return stack_config(zones=None, network=network)


@once_per_config
def build(config: StackConfig) -> tuple[ProgramRun, dict[str, Any]]:
    """Run a Network under mocks; return the registrations and the component's resolved outputs."""
    seen: dict[str, Any] = {}

    def program() -> None:
        net = Network("demo-network", config.network, config.cluster.name, config.region, TAGS)
        seen["network"] = net
        pulumi.Output.all(
            private=pulumi.Output.all(**{z: pulumi.Output.from_input(i) for z, i in net.private_subnet_ids.items()}),
            public=pulumi.Output.all(**{z: pulumi.Output.from_input(i) for z, i in net.public_subnet_ids.items()}),
            nat=pulumi.Output.all(**net.nat_gateway_ids),
            vpc=pulumi.Output.from_input(net.vpc_id),
        ).apply(seen.update)

    return run_mocked(program), seen


def subnets_by_zone(run: ProgramRun, kind: str) -> dict[str, dict[str, Any]]:
    return {r.inputs["availabilityZone"]: r.inputs for r in run.of_type(SUBNET) if r.name.startswith(f"demo-{kind}-")}


def test_new_vpc_has_dns_and_the_configured_cidr() -> None:
    run, seen = build(spec({"vpcCidr": "10.8.0.0/16", "availabilityZones": ZONES}))
    vpc = run.one("aws:ec2/vpc:Vpc")
    assert vpc.inputs["cidrBlock"] == "10.8.0.0/16"
    assert vpc.inputs["enableDnsHostnames"] is True
    assert vpc.inputs["enableDnsSupport"] is True
    assert vpc.inputs["tags"]["team"] == "ml"
    assert seen["vpc"].startswith("vpc-")


def test_one_private_and_one_public_subnet_per_zone_with_the_planned_cidrs() -> None:
    config = spec({"vpcCidr": "10.8.0.0/16", "availabilityZones": ZONES})
    run, _ = build(config)
    layout = subnet_layout(config.network)
    private, public = subnets_by_zone(run, "private"), subnets_by_zone(run, "public")
    assert sorted(private) == sorted(public) == ZONES
    for zone, cidr in zip(ZONES, layout.private, strict=True):
        assert private[zone]["cidrBlock"] == str(cidr)
        assert IPv4Network(private[zone]["cidrBlock"]).prefixlen == 19
    for zone, cidr in zip(ZONES, layout.public, strict=True):
        assert public[zone]["cidrBlock"] == str(cidr)
    assert all(s["mapPublicIpOnLaunch"] is False for s in [*private.values(), *public.values()])


def test_explicit_subnet_cidrs_win_over_the_derivation() -> None:
    run, _ = build(
        spec(
            {
                "vpcCidr": "10.8.0.0/16",
                "availabilityZones": ZONES[:2],
                "privateSubnetCidrs": ["10.8.64.0/18", "10.8.128.0/18"],
                "publicSubnetCidrs": ["10.8.0.0/24", "10.8.1.0/24"],
            }
        )
    )
    assert subnets_by_zone(run, "private")["us-east-1b"]["cidrBlock"] == "10.8.128.0/18"
    assert subnets_by_zone(run, "public")["us-east-1a"]["cidrBlock"] == "10.8.0.0/24"


def test_subnets_carry_load_balancer_and_cluster_discovery_tags() -> None:
    run, _ = build(spec({"availabilityZones": ZONES[:2]}))
    for subnet in subnets_by_zone(run, "public").values():
        assert subnet["tags"][PUBLIC_LB_TAG] == "1"
        assert INTERNAL_LB_TAG not in subnet["tags"]
        assert subnet["tags"]["kubernetes.io/cluster/demo"] == "shared"
        assert subnet["tags"]["team"] == "ml"
    for subnet in subnets_by_zone(run, "private").values():
        assert subnet["tags"][INTERNAL_LB_TAG] == "1"
        assert PUBLIC_LB_TAG not in subnet["tags"]
        assert subnet["tags"]["kubernetes.io/cluster/demo"] == "shared"


def private_default_routes(run: ProgramRun) -> dict[str, str]:
    """{zone: NAT gateway id} of each private subnet's default route."""
    routes = {r.name: r.inputs for r in run.of_type("aws:ec2/route:Route")}
    return {
        zone: routes[f"demo-private-{zone}-nat"]["natGatewayId"]
        for zone in ZONES
        if f"demo-private-{zone}-nat" in routes
    }


def test_one_nat_gateway_per_zone_each_private_subnet_routes_through_its_own() -> None:
    run, seen = build(spec({"availabilityZones": ZONES, "natGateways": "one-per-az"}))
    nats = run.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == len(ZONES)
    assert len(run.of_type("aws:ec2/eip:Eip")) == len(ZONES)
    assert {n.inputs["subnetId"] for n in nats} == set(seen["public"].values())
    assert private_default_routes(run) == {zone: seen["nat"][zone] for zone in ZONES}
    assert len(set(seen["nat"].values())) == len(ZONES)


def test_single_nat_gateway_serves_every_private_subnet() -> None:
    run, seen = build(spec({"availabilityZones": ZONES, "natGateways": "single"}))
    nat = run.one("aws:ec2/natGateway:NatGateway")
    assert nat.inputs["subnetId"] == seen["public"]["us-east-1a"]
    assert set(private_default_routes(run).values()) == {seen["nat"]["us-east-1a"]}
    assert len(private_default_routes(run)) == len(ZONES)


def test_public_subnets_route_to_the_internet_gateway() -> None:
    run, _ = build(spec({"availabilityZones": ZONES[:2]}))
    route = run.one("aws:ec2/route:Route", "demo-public-internet")
    assert route.inputs["destinationCidrBlock"] == "0.0.0.0/0"
    assert route.inputs["gatewayId"].startswith("igw-")


def test_s3_gateway_endpoint_serves_the_private_route_tables() -> None:
    run, _ = build(spec({"availabilityZones": ZONES[:2]}))
    endpoint = run.one("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    private_tables = [r for r in run.of_type("aws:ec2/routeTable:RouteTable") if "private" in r.name]
    assert len(private_tables) == 2
    assert len(endpoint.inputs["routeTableIds"]) == 3  # two private tables and the public one


EXISTING = {
    "existingVpc": {
        "vpcId": "vpc-0abc1234def567890",
        "privateSubnetIds": {"us-east-1a": "subnet-0aaaaaaaaaaaaaaa1", "us-east-1b": "subnet-0bbbbbbbbbbbbbbb2"},
        "publicSubnetIds": {"us-east-1a": "subnet-0ccccccccccccccc3"},
    }
}


def test_existing_vpc_registers_no_network_resources() -> None:
    run, seen = build(spec(EXISTING))
    for token in (
        "aws:ec2/vpc:Vpc",
        SUBNET,
        "aws:ec2/natGateway:NatGateway",
        "aws:ec2/eip:Eip",
        "aws:ec2/routeTable:RouteTable",
        "aws:ec2/vpcEndpoint:VpcEndpoint",
    ):
        assert run.of_type(token) == [], token
    assert seen["vpc"] == "vpc-0abc1234def567890"
    assert seen["private"] == EXISTING["existingVpc"]["privateSubnetIds"]
    assert seen["public"] == EXISTING["existingVpc"]["publicSubnetIds"]


def test_private_subnets_of_an_existing_vpc_are_listed_in_zone_order() -> None:
    _, seen = build(spec(EXISTING))
    net: Network = seen["network"]
    assert net.private_subnet_id_list == ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"]


def test_a_new_vpcs_default_security_group_is_taken_over_with_no_rule() -> None:
    """Anything launched into the VPC without a group of its own must reach nothing (Security Hub EC2.2)."""
    run, seen = build(spec({"availabilityZones": ZONES}))
    group = run.one("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
    assert group.inputs["vpcId"] == seen["vpc"]
    assert group.inputs["ingress"] == []
    assert group.inputs["egress"] == []
    assert group.inputs["tags"]["team"] == "ml"


# ------------------------------------------------------------------------------------- placement by zone ID
def test_mapped_azs_place_their_subnets_by_zone_id() -> None:
    ids = {"us-east-1a": "use1-az4", "us-east-1b": "use1-az6", "us-east-1c": "use1-az1"}
    run, _ = build(spec({"availabilityZones": ZONES, "availabilityZoneIds": ids}))
    placed = {
        (r.name, r.inputs.get("availabilityZoneId"), r.inputs.get("availabilityZone"))
        for r in run.of_type("aws:ec2/subnet:Subnet")
    }
    assert placed == {
        (f"demo-{kind}-{zone}", zone_id, None) for kind in ("private", "public") for zone, zone_id in ids.items()
    }


def test_the_cluster_gets_no_subnet_in_a_zone_eks_refuses() -> None:
    """The account's mapping decides at deploy time which private subnets the control plane gets; nodes keep all
    three. The plan's mocks pair the IDs EKS refuses with the last names, so the offline plan keeps every zone."""
    assert cluster_subnet_zones(
        ZONES, {"us-east-1a": "use1-az1", "us-east-1b": "use1-az2", "us-east-1c": "use1-az3"}
    ) == (
        "us-east-1a",
        "us-east-1b",
    )
    with pytest.raises(NoClusterZones, match=r"us-east-1c \(use1-az3\).*leaves 1 of the two"):
        cluster_subnet_zones(["us-east-1b", "us-east-1c"], {"us-east-1b": "use1-az2", "us-east-1c": "use1-az3"})
    run = shipped_stack("inference").run
    private = {r.inputs["availabilityZone"]: r for r in run.of_type("aws:ec2/subnet:Subnet") if "-private-" in r.name}
    assert sorted(private) == ZONES
    (cluster,) = run.of_type("aws:eks/cluster:Cluster")
    assert cluster.inputs["vpcConfig"]["subnetIds"] == [private[zone].id for zone in ZONES]
