"""A new VPC reaches the site through `network.siteConnection`: the gateway is attached and every private route table
routes the site's CIDRs to it; validation asks for the gateway wherever something must reach the site."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

import pytest

from blueprint.plan.runner import ProgramRun, run_mocked
from blueprint.plan.summary import example_id, summarize
from components.config import StackConfig
from components.errors import ConfigError
from components.network import Network
from components.planning.site_routes import site_cidrs
from components.planning.stack_plan import plan_stack
from tests.builders import (
    HYBRID_POOL,
    SITE_CONNECTION,
    SUBNET,
    SYSTEM_POOL,
    TWO_ZONES,
    once_per_config,
    pool,
    shipped_plan,
    shipped_stack,
    stack_config,
)

VPN = "192.168.10.0/24"
NODES, PODS = HYBRID_POOL["network"]["remoteNodeCidrs"][0], HYBRID_POOL["network"]["remotePodCidrs"][0]
VGW = {"virtualPrivateGatewayId": "vgw-0f3a9c1e"}


def hybrid_spec(site: dict[str, Any] | None = SITE_CONNECTION, **network: Any) -> StackConfig:
    """A validated stack with the shared hybrid pool, the deployer on the site's VPN network, and `site`."""
    extra = {"siteConnection": site} if site is not None else {}
    return stack_config(SYSTEM_POOL, HYBRID_POOL, network={**extra, **network}, validated=True)


@once_per_config
def build(config: StackConfig) -> ProgramRun:
    private_access = config.cluster.endpoint.private_access_cidrs
    cidrs = site_cidrs(config.network.vpc_cidr, private_access, config.hybrid_pools)
    return run_mocked(lambda: Network("demo-network", config.network, config.cluster.name, config.region, {}, cidrs))


def site_routes(run: ProgramRun) -> list[Any]:
    return [r for r in run.of_type("aws:ec2/route:Route") if "-site-" in r.name]


# ------------------------------------------------------------------------------------------------------ planning
def test_site_cidrs_are_the_remote_networks_then_the_admitted_networks_outside_the_vpc_each_once() -> None:
    spec = stack_config(HYBRID_POOL, pool(HYBRID_POOL, name="a40-b"))
    admitted = [IPv4Network(VPN), IPv4Network(NODES), IPv4Network("10.0.200.0/24")]
    assert site_cidrs(IPv4Network("10.0.0.0/16"), admitted, spec.hybrid_pools) == [NODES, PODS, VPN]


def test_nothing_routes_to_the_site_without_hybrid_pools_or_outside_networks() -> None:
    assert site_cidrs(IPv4Network("10.0.0.0/16"), [IPv4Network("10.0.200.0/24")], []) == []


# ------------------------------------------------------------------------------------------------------- network
@pytest.mark.program
def test_a_transit_gateway_is_attached_on_the_private_subnets() -> None:
    run = build(hybrid_spec())
    attachment = run.one("aws:ec2transitgateway/vpcAttachment:VpcAttachment")
    assert attachment.inputs["transitGatewayId"] == SITE_CONNECTION["transitGatewayId"]
    private = [r.id for r in run.of_type(SUBNET) if "-private-" in r.name]
    assert set(attachment.inputs["subnetIds"]) == set(private) and len(private) == len(TWO_ZONES)
    assert not run.of_type("aws:ec2/vpnGatewayAttachment:VpnGatewayAttachment")


@pytest.mark.program
def test_every_private_route_table_routes_every_site_cidr_to_the_gateway_after_the_attachment() -> None:
    run = build(hybrid_spec())
    attachment = run.one("aws:ec2transitgateway/vpcAttachment:VpcAttachment")
    private_tables = {r.id for r in run.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name}
    routes = site_routes(run)
    assert {(r.inputs["routeTableId"], r.inputs["destinationCidrBlock"]) for r in routes} == {
        (table, cidr) for table in private_tables for cidr in (NODES, PODS, VPN)
    }
    for route in routes:
        assert route.inputs["transitGatewayId"] == SITE_CONNECTION["transitGatewayId"]
        assert "gatewayId" not in route.inputs
        assert attachment.urn in route.depends_on


@pytest.mark.program
def test_the_public_route_table_keeps_only_its_internet_route() -> None:
    run = build(hybrid_spec())
    public_table = run.one("aws:ec2/routeTable:RouteTable", "demo-public").id
    public_routes = [r for r in run.of_type("aws:ec2/route:Route") if r.inputs["routeTableId"] == public_table]
    assert [r.inputs["destinationCidrBlock"] for r in public_routes] == ["0.0.0.0/0"]


@pytest.mark.program
def test_a_virtual_private_gateway_is_attached_to_the_vpc_and_is_the_routes_gateway() -> None:
    run = build(hybrid_spec(VGW))
    attachment = run.one("aws:ec2/vpnGatewayAttachment:VpnGatewayAttachment")
    assert attachment.inputs["vpnGatewayId"] == VGW["virtualPrivateGatewayId"]
    assert attachment.inputs["vpcId"] == run.one("aws:ec2/vpc:Vpc").id
    routes = site_routes(run)
    assert len(routes) == 3 * len(TWO_ZONES)
    assert {r.inputs["gatewayId"] for r in routes} == {VGW["virtualPrivateGatewayId"]}
    assert all("transitGatewayId" not in r.inputs for r in routes)
    assert not run.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")


@pytest.mark.program
def test_no_site_connection_no_attachment_and_no_site_routes() -> None:
    run = build(stack_config(SYSTEM_POOL, cluster={"endpoint": {"public": True, "publicAccessCidrs": [VPN]}}))
    assert not site_routes(run)
    assert not run.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")


# ---------------------------------------------------------------------------------------------------- validation
def problems(network: dict[str, Any], *pools: dict[str, Any], endpoint: dict[str, Any] | None = None) -> list[str]:
    """The `network.siteConnection...` problems of a stack with `pools` and `network` (zones added unless an
    existing VPC is given)."""
    zones = None if "existingVpc" in network else TWO_ZONES
    cluster = {"endpoint": endpoint} if endpoint is not None else None
    with pytest.raises(ConfigError) as caught:
        stack_config(SYSTEM_POOL, *pools, zones=zones, network=network, cluster=cluster, validated=True)
    return [str(p) for p in caught.value.problems if p.path.startswith("network.siteConnection")]


def test_a_new_vpc_with_hybrid_pools_names_its_site_connection() -> None:
    [problem] = problems({"siteConnection": None}, HYBRID_POOL, endpoint={"public": True, "publicAccessCidrs": [VPN]})
    assert f"must route {NODES}, {PODS}" in problem and "Prepare networking for hybrid nodes" in problem


def test_a_new_vpc_admitting_a_network_outside_it_names_its_site_connection() -> None:
    [problem] = problems({"siteConnection": None})
    assert f"must route {VPN}" in problem and "existingVpc, whose routes are yours" in problem


def test_a_network_inside_the_vpc_needs_no_site_connection() -> None:
    spec = stack_config(SYSTEM_POOL, cluster={"endpoint": {"privateAccessCidrs": ["10.0.250.0/24"]}}, validated=True)
    assert spec.network.site_connection is None


@pytest.mark.parametrize(
    ("site", "fragment"),
    [
        ({**SITE_CONNECTION, **VGW}, "name one gateway to the site"),
        ({}, "name one gateway to the site"),
        ({"transitGatewayId": "tgw-example"}, "must match ^tgw-[0-9a-f]{8,17}$"),
        ({"virtualPrivateGatewayId": "tgw-0f3a9c1e"}, "must match ^vgw-[0-9a-f]{8,17}$"),
    ],
)
def test_a_site_connection_names_one_well_formed_gateway(site: dict[str, Any], fragment: str) -> None:
    [problem] = problems({"siteConnection": site})
    assert fragment in problem


def test_an_existing_vpc_takes_no_site_connection() -> None:
    existing = {
        "vpcId": "vpc-0f3a9c1e",
        "privateSubnetIds": {"us-east-1a": "subnet-0a1b2c3d", "us-east-1b": "subnet-0e1f2a3b"},
    }
    [problem] = problems({"existingVpc": existing, "siteConnection": SITE_CONNECTION}, HYBRID_POOL)
    assert "not used with existingVpc" in problem and "yourself" in problem


def test_a_site_connection_with_nothing_to_route_is_refused() -> None:
    [problem] = problems({"siteConnection": SITE_CONNECTION}, endpoint={"public": True, "publicAccessCidrs": [VPN]})
    assert "nothing routes to the site" in problem


# ------------------------------------------------------------------------------------------ plan summary, stacks
@pytest.mark.parametrize("gateway", ["tgw-0123456789abcdef0", "tgw-1234567890abcdef0", "vgw-00000000"])
def test_an_example_gateway_id_is_a_warning(gateway: str) -> None:
    key = "transitGatewayId" if gateway.startswith("tgw-") else "virtualPrivateGatewayId"
    spec = hybrid_spec({key: gateway})
    [warning] = [w for w in summarize(plan_stack(spec))["warnings"] if w.startswith("network.siteConnection")]
    assert gateway in warning and "example id" in warning


@pytest.mark.parametrize("gateway", [SITE_CONNECTION["transitGatewayId"], VGW["virtualPrivateGatewayId"]])
def test_a_real_looking_gateway_id_is_not_a_warning(gateway: str) -> None:
    assert not example_id(gateway)


@pytest.mark.program
def test_the_hybrid_stack_routes_the_site_through_its_gateway_before_any_kubernetes_object() -> None:
    run = shipped_stack("hybrid").run
    routes = site_routes(run)
    assert {r.inputs["destinationCidrBlock"] for r in routes} == {"192.168.100.0/24", "192.168.128.0/18", VPN}
    provider = run.one("pulumi:providers:kubernetes")
    assert {r.urn for r in routes} <= set(provider.depends_on)
    assert any("siteConnection" in w and "example id" in w for w in shipped_plan("hybrid")["summary"]["warnings"])


@pytest.mark.program
@pytest.mark.parametrize("stack", ["training", "inference"])
def test_cloud_stacks_route_nothing_to_a_site(stack: str) -> None:
    run = shipped_stack(stack).run
    assert not site_routes(run)
    assert not run.of_type("aws:ec2transitgateway/vpcAttachment:VpcAttachment")
