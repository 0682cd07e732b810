"""What a stack bills per hour: each part priced from a small spec in its Region, unpriced parts named, committed
capacity kept out of $/h, and the totals the sum of the parts (components/planning/cost.py, catalog prices.yaml)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from rich.console import Console

from blueprint import stack_figures
from blueprint.plan import render
from blueprint.plan.summary import summarize
from components.catalog import prices
from components.config import StackConfig
from components.planning.cost import StackCost, stack_cost
from components.planning.stack_plan import plan_stack
from components.planning.subnets import nat_gateway_zones
from components.validation import ConfigError
from tests.builders import A40, P5, SYSTEM, TWO_ZONES, stack_config

P4D = {"name": "a100", "role": "training", "instanceType": "p4d.24xlarge", "scaling": {"min": 1, "max": 2}}
HOURS = 730
TODAY = dt.date(2026, 9, 1)


def cost_of(*pools: dict[str, Any], region: str = "us-east-1", **sections: Any) -> StackCost:
    zones = [f"{region}a", f"{region}b"]
    spec = stack_config(*pools, zones=zones, region=region, **sections)
    return stack_cost(plan_stack(spec), TODAY)


def item(cost: StackCost, kind: str, name: str | None = None) -> Any:
    (found,) = [i for i in cost.items if i.kind == kind and (name is None or i.name == name)]
    return found


def test_control_plane_nat_and_public_ipv4_in_us_east_1() -> None:
    cost = cost_of(SYSTEM)
    # EKS $0.10/cluster-hour; one NAT gateway per AZ at $0.045/h, each with one EIP at $0.005/h (prices.yaml).
    assert item(cost, "control-plane").idle_usd == pytest.approx(0.10)
    assert item(cost, "nat-gateways").max_usd == pytest.approx(2 * 0.045)
    assert item(cost, "public-ipv4").idle_usd == pytest.approx(2 * 0.005)


def test_a_single_nat_gateway_bills_one_gateway_and_one_address() -> None:
    spec = stack_config(SYSTEM, network={"natGateways": "single"})
    assert nat_gateway_zones(spec.network) == ("us-east-1a",)
    cost = stack_cost(plan_stack(spec), TODAY)
    assert item(cost, "nat-gateways").idle_usd == pytest.approx(0.045)
    assert item(cost, "public-ipv4").idle_usd == pytest.approx(0.005)


def test_extended_support_bills_the_extended_rate_only_when_the_policy_lets_the_cluster_stay() -> None:
    # 1.33: standard support ended 2026-07-29, extended runs to 2027-07-29 (versions.yaml).
    extended = cost_of(SYSTEM, cluster={"kubernetesVersion": "1.33", "supportType": "EXTENDED"})
    standard = cost_of(SYSTEM, cluster={"kubernetesVersion": "1.33", "supportType": "STANDARD"})
    assert item(extended, "control-plane").idle_usd == pytest.approx(0.60)
    assert "extended support" in item(extended, "control-plane").detail
    assert item(standard, "control-plane").idle_usd == pytest.approx(0.10)


def test_on_demand_nodes_at_min_and_max() -> None:
    nodes = item(cost_of(SYSTEM, P5), "nodes", "h100")
    assert (nodes.idle_usd, nodes.max_usd) == (0.0, pytest.approx(4 * 55.04))


def test_spot_nodes_are_an_estimate_with_its_source() -> None:
    spot = dict(P5, capacity={"type": "spot", "onDemandBaseCapacity": 1})
    cost = cost_of(SYSTEM, spot)
    nodes = item(cost, "nodes", "h100")
    discount = prices.spot_discount_estimate()
    # One on-demand base node, three spot nodes at the estimated discount.
    assert nodes.max_usd == pytest.approx(55.04 + 3 * 55.04 * (1 - discount))
    assert nodes.estimate and "SPOT" in nodes.source
    assert cost.spot_saving_usd == pytest.approx(3 * 55.04 * discount)


def test_an_on_demand_capacity_reservation_bills_idle_as_at_max() -> None:
    reserved = dict(P5, capacity={"type": "reservation", "reservationId": "cr-0a1b2c3d4e5f60718"})
    reservation = item(cost_of(SYSTEM, reserved), "reservation", "h100")
    assert reservation.idle_usd == reservation.max_usd == pytest.approx(4 * 55.04)


def test_a_capacity_block_is_committed_not_hourly() -> None:
    block = dict(
        P5,
        capacity={
            "type": "capacity-block",
            "reservationId": "cr-0a1b2c3d4e5f60718",
            "availabilityZone": "us-east-1a",
            "endTime": "2026-12-01T11:30:00Z",
        },
    )
    cost = cost_of(SYSTEM, block)
    # The block pays for the instances; their root volumes are EBS, billed while they run.
    assert [i.kind for i in cost.items if i.name == "h100"] == ["root-volumes"]
    (committed,) = cost.committed
    assert committed.name == "h100" and "cr-0a1b2c3d4e5f60718" in committed.detail and "up front" in committed.detail


@pytest.mark.parametrize(("tier", "per_gb"), [(125, 0.145), (250, 0.210), (500, 0.340), (1000, 0.600)])
def test_lustre_capacity_by_throughput_tier(tier: int, per_gb: float) -> None:
    storage = {"lustre": {"storageCapacityGib": 4800, "perUnitStorageThroughput": tier}}
    lustre = item(cost_of(SYSTEM, P5, storage=storage), "lustre")
    assert lustre.idle_usd == lustre.max_usd == pytest.approx(4800 * per_gb / HOURS)


def test_scratch_lustre_and_unpriced_user_provisioned_metadata() -> None:
    scratch = {"lustre": {"deploymentType": "SCRATCH_2", "storageCapacityGib": 2400, "perUnitStorageThroughput": None}}
    assert item(cost_of(SYSTEM, P5, storage=scratch), "lustre").max_usd == pytest.approx(2400 * 0.140 / HOURS)
    metadata = {"lustre": {"storageCapacityGib": 2400, "metadata": {"mode": "USER_PROVISIONED", "iops": 12000}}}
    cost = cost_of(SYSTEM, P5, storage=metadata)
    assert [(u.kind, u.reason) for u in cost.unpriced] == [
        ("lustre-metadata", "no price for FSx for Lustre metadata IOPS in us-east-1")
    ]


def test_efs_elastic_has_no_baseline_and_provisioned_bills_per_mbps_month() -> None:
    elastic = item(cost_of(SYSTEM, storage={"nfs": {"kind": "efs", "throughputMode": "elastic"}}), "efs")
    assert elastic.max_usd == 0.0 and "no baseline" in elastic.detail
    provisioned = {"nfs": {"kind": "efs", "throughputMode": "provisioned", "provisionedThroughputMibps": 100}}
    assert item(cost_of(SYSTEM, storage=provisioned), "efs").max_usd == pytest.approx(100 * 6.00 / HOURS)


def test_hybrid_nodes_fee_per_vcpu_hour_or_named_unpriced() -> None:
    with_vcpus = item(cost_of(SYSTEM, dict(A40, vcpusPerNode=64)), "hybrid-nodes-fee", "a40")
    assert with_vcpus.max_usd == pytest.approx(4 * 64 * 0.020)
    (unknown,) = cost_of(SYSTEM, A40).unpriced
    assert unknown.kind == "hybrid-nodes-fee" and "vcpusPerNode" in unknown.reason


def test_another_region_gets_its_own_instance_prices() -> None:
    cost = cost_of(P4D, region="eu-west-1")
    # p4d.24xlarge in eu-west-1: $23.71569/h ([VANTAGE]); us-east-1's is $21.957642.
    assert item(cost, "nodes", "a100").max_usd == pytest.approx(2 * 23.71569)
    assert prices.instance_price_source("eu-west-1").tag == "VANTAGE"


def test_a_type_without_a_price_in_the_region_is_reported_not_priced() -> None:
    cost = cost_of(SYSTEM, P4D, region="ap-south-1")
    reasons = {(u.kind, u.name): u.reason for u in cost.unpriced}
    # m7i.xlarge has no ap-south-1 price in the catalog; neither have the services there.
    assert reasons[("nodes", "system")] == "no price for m7i.xlarge in ap-south-1"
    assert reasons[("control-plane", "demo")].startswith("no price for EKS cluster")
    assert reasons[("nat-gateways", "vpc")] == "no price for NAT gateway in ap-south-1"
    assert reasons[("root-volumes", "system")] == "no price for EBS gp3 storage in ap-south-1"
    assert not [i for i in cost.items if i.kind == "nodes" and i.name == "system"]


@pytest.mark.parametrize("region", ["us-east-2", "us-west-2", "eu-west-1"])
def test_other_regions_price_what_their_sources_give(region: str) -> None:
    spec = stack_config(SYSTEM, zones=[f"{region}a", f"{region}b"], region=region, network=SITE)
    cost = stack_cost(plan_stack(spec), TODAY)
    # EKS and public IPv4 cost the same in every commercial Region; the TGW attachment $0.05/h in the US and EU.
    assert item(cost, "control-plane").max_usd == pytest.approx(0.10)
    assert item(cost, "public-ipv4").max_usd == pytest.approx(2 * 0.005)
    assert item(cost, "transit-gateway-attachment").max_usd == pytest.approx(0.05)
    assert item(cost, "kms-keys").max_usd == pytest.approx(1.00 / HOURS)
    unpriced = {u.kind for u in cost.unpriced}
    # No source here gave these Regions' gp3 or CloudWatch figures, nor eu-west-1's NAT gateway.
    assert {"root-volumes", "cloudwatch-alarms", "cloudwatch-dashboard"} <= unpriced
    assert ("nat-gateways" in unpriced) == (region == "eu-west-1")
    if region != "eu-west-1":
        assert item(cost, "nat-gateways").max_usd == pytest.approx(2 * 0.045)


SITE = {"siteConnection": {"transitGatewayId": "tgw-0f3a9c1e27d84b5a6"}}


def test_a_transit_gateway_attachment_bills_the_vpc_owner_per_hour() -> None:
    cost = cost_of(SYSTEM, network=SITE)
    attachment = item(cost, "transit-gateway-attachment")
    assert attachment.idle_usd == attachment.max_usd == pytest.approx(0.05)
    assert attachment.source == "TGWPRICE"
    assert {n.kind for n in cost.not_counted} >= {"transit-gateway-data", "site-link"}


def test_a_virtual_private_gateway_attachment_has_no_hourly_charge() -> None:
    cost = cost_of(SYSTEM, network={"siteConnection": {"virtualPrivateGatewayId": "vgw-0f3a9c1e27d84b5a6"}})
    assert not [i for i in cost.items if i.kind == "transit-gateway-attachment"]
    assert "site-link" in {n.kind for n in cost.not_counted}


def test_root_volumes_bill_each_running_node_per_gb_month() -> None:
    big = dict(P5, rootVolumeGib=500)
    cost = cost_of(SYSTEM, big)
    # system: 2..3 nodes x 200 GiB (the default); h100: 0..4 nodes x 500 GiB; gp3 $0.08/GB-month in us-east-1.
    system, h100 = item(cost, "root-volumes", "system"), item(cost, "root-volumes", "h100")
    assert (system.idle_usd, system.max_usd) == (
        pytest.approx(2 * 200 * 0.08 / HOURS),
        pytest.approx(3 * 200 * 0.08 / HOURS),
    )
    assert (h100.idle_usd, h100.max_usd) == (0.0, pytest.approx(4 * 500 * 0.08 / HOURS))
    assert "GiB gp3 (billed per GB-month)" in h100.detail


def test_a_bottlerocket_os_volume_is_named_not_counted() -> None:
    cost = cost_of(SYSTEM, dict(P5, amiFamily="bottlerocket"))
    (os_volume,) = [n for n in cost.not_counted if n.kind == "root-volumes"]
    assert os_volume.name == "h100" and "snapshot size" in os_volume.reason
    assert item(cost, "root-volumes", "h100").max_usd == pytest.approx(4 * 200 * 0.08 / HOURS)


def test_kms_keys_alarms_and_dashboard_bill_per_month() -> None:
    cost = cost_of(SYSTEM, P5)
    # Container Insights (the default) creates two standard-resolution GPU alarms and one dashboard; with the health
    # loop also its heartbeat alarm. Its pool alarms are Metrics Insights alarms, billed by the metrics they analyze:
    # named, with how many at most (repairs held, failed too long, conditions: 2 pools each; gate failures: 1).
    assert item(cost, "kms-keys").max_usd == pytest.approx(1 * 1.00 / HOURS)
    assert item(cost, "cloudwatch-alarms").max_usd == pytest.approx((2 + 1) * 0.10 / HOURS)
    (queries,) = [n for n in cost.not_counted if n.kind == "cloudwatch-query-alarms"]
    assert "4 Metrics Insights alarms" in queries.reason and "at most 7" in queries.reason
    without_loop = cost_of(SYSTEM, P5, addons={"nodeHealth": {"enabled": False}})
    assert item(without_loop, "cloudwatch-alarms").max_usd == pytest.approx(2 * 0.10 / HOURS)
    assert "cloudwatch-query-alarms" not in {n.kind for n in without_loop.not_counted}
    assert item(cost, "cloudwatch-dashboard").max_usd == pytest.approx(3.00 / HOURS)
    assert "container-insights" in {n.kind for n in cost.not_counted}
    # An alerts topic the stack creates has a key of its own.
    emailed = cost_of(SYSTEM, P5, addons={"monitoring": {"alerts": {"email": "oncall@example.com"}}})
    assert item(emailed, "kms-keys").max_usd == pytest.approx(2 * 1.00 / HOURS)


def test_without_container_insights_there_are_no_alarms_dashboard_or_insights_charges() -> None:
    cost = cost_of(SYSTEM, P5, addons={"monitoring": {"containerInsights": False}})
    kinds = {i.kind for i in cost.items} | {n.kind for n in cost.not_counted}
    assert not kinds & {"cloudwatch-alarms", "cloudwatch-query-alarms", "cloudwatch-dashboard", "container-insights"}


def test_the_lustre_line_says_gib_billed_per_gb_month() -> None:
    lustre = item(cost_of(SYSTEM, storage={"lustre": {"storageCapacityGib": 9600}}), "lustre")
    assert lustre.detail.startswith("9,600 GiB (billed per GB-month) x $")


def test_every_listed_region_is_in_the_price_tables() -> None:
    from components.catalog.regions import regions

    assert set(regions()) <= set(prices.instance_price_regions())


def test_summary_breakdown_sums_to_the_totals_and_renders() -> None:
    spec: StackConfig = stack_config(
        SYSTEM,
        dict(P5, capacity={"type": "spot"}),
        dict(A40, vcpusPerNode=32),
        zones=TWO_ZONES,
        storage={"lustre": {"storageCapacityGib": 4800}},
    )
    summary = summarize(plan_stack(spec))
    breakdown = summary["cost"]["breakdown"]
    assert {b["kind"] for b in breakdown} >= {
        "control-plane",
        "nat-gateways",
        "public-ipv4",
        "nodes",
        "hybrid-nodes-fee",
        "lustre",
        "root-volumes",
        "kms-keys",
    }
    assert summary["hourlyUsd"]["idle"] == pytest.approx(sum(b["idleUsd"] for b in breakdown), abs=0.01)
    assert summary["hourlyUsd"]["max"] == pytest.approx(sum(b["maxUsd"] for b in breakdown), abs=0.01)
    assert summary["cost"]["complete"] is True
    assert {n["kind"] for n in summary["cost"]["notCounted"]} >= {"data-transfer", "nat-data", "logs"}
    plan = {"project": "p", "stack": "s", "summary": summary, "resources": [], "violations": []}
    text = render.markdown(plan)
    assert "| cost part | $/h idle | $/h max | how |" in text
    assert "| hybrid-nodes-fee a40 | $2.56 | $2.56 |" in text
    assert "| kms-keys demo | $0.0014 | $0.0014 | 1 x KMS key at $1/month / 730 h |" in text
    assert "| nat-data vpc | - | - | not counted: billed by use: data processed by the NAT gateways, per GB |" in text
    assert "incomplete" not in text


def test_unpriced_parts_become_warnings_and_pool_figures_say_no_price() -> None:
    spec = stack_config(SYSTEM, P4D, zones=["eu-west-1a", "eu-west-1b"], region="eu-west-1")
    summary = summarize(plan_stack(spec))
    system = next(p for p in summary["nodePools"] if p["name"] == "system")
    assert system["hourlyUsdPerNode"] is None and system["hourlyUsd"] is None
    assert (
        "cost: nodes system: no price for m7i.xlarge in eu-west-1; not counted in $/h idle or at max"
        in summary["warnings"]
    )
    assert summary["cost"]["complete"] is False
    plan = {"project": "p", "stack": "s", "summary": summary, "resources": [], "violations": []}
    text = render.markdown(plan)
    unpriced = len(summary["cost"]["unpriced"])
    assert unpriced > 1
    assert f"/h at max (incomplete: {unpriced} parts unpriced)" in text
    assert f"(incomplete: {unpriced} parts unpriced)" in stack_figures.table_row("s", plan)
    assert stack_figures.figures_line("s", plan).endswith(f"(incomplete: {unpriced} parts unpriced).")
    console = Console(record=True, width=300)
    render.table(plan, console)
    assert f"/h at max (incomplete: {unpriced} parts unpriced)" in console.export_text()
    assert "| no price | no price |" in text
    assert "| nodes system | - | - | not counted: no price for m7i.xlarge in eu-west-1 |" in text


def test_vcpus_per_node_is_refused_on_aws_pools() -> None:
    with pytest.raises(ConfigError) as refused:
        stack_config(dict(SYSTEM, vcpusPerNode=8), validated=True)
    assert "nodePools[0] (system).vcpusPerNode" in str(refused.value)
