"""maxPods fits the VPC CNI: card 0's pod ENIs (less the efa-only interfaces placed there) x (IPv4 per ENI - 1) + 2,
capped at 110 up to 30 vCPUs and 250 above (the EKS AMI's max-pods calculator). The expected figures below are
worked out by hand from the catalog's ENI facts, which are checked against the upstream tables first."""

from __future__ import annotations

from typing import Any

import pytest

from blueprint.plan.summary import pool_summary
from components import catalog
from components.planning import nodeadm
from components.planning.cost import StackCost
from components.planning.efa import efa_interfaces
from components.planning.max_pods import max_pods, pod_enis
from components.planning.pools import PoolPlan
from tests.builders import first_pool_plan

ENDPOINT = "https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com"
CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"


def plan_of(**pool: Any) -> PoolPlan:
    return first_pool_plan({"name": "pool", **pool}, name="train")


#: (type, ENIs on card 0, IPv4 per ENI) as aws/amazon-vpc-cni-k8s `vpc_ip_resource_limit.go` (ENILimit, IPv4Limit)
#: and nodeadm's `instance-info.jsonl` (defaultMaxENIs, ipv4AddressesPerInterface) both give them.
UPSTREAM_ENI_LIMITS = [
    ("p5.48xlarge", 2, 50),
    ("p5en.48xlarge", 4, 50),
    ("p6-b200.48xlarge", 4, 50),
    ("p6-b300.48xlarge", 4, 50),
    ("p4d.24xlarge", 15, 50),
    ("g6e.xlarge", 4, 15),
    ("g6e.12xlarge", 10, 30),
    ("g6e.48xlarge", 10, 50),
    ("m7i.large", 3, 10),
    ("m7i.xlarge", 4, 15),
]


@pytest.mark.parametrize(("name", "enis", "ipv4"), UPSTREAM_ENI_LIMITS)
def test_catalog_eni_facts_match_the_upstream_tables(name: str, enis: int, ipv4: int) -> None:
    instance = catalog.instance_type(name)
    assert (instance.default_card_max_enis, instance.ipv4_per_eni) == (enis, ipv4)
    assert {"CNI", "NODEADM"} <= set(instance.source["eni"].split("+"))


def test_every_catalog_type_has_sourced_eni_facts() -> None:
    for instance in catalog.instance_types().values():
        assert instance.default_card_max_enis >= 1 and instance.ipv4_per_eni >= 2, instance.name
        if 0 in instance.efa_cards:
            assert instance.default_card_max_enis >= 2, f"{instance.name}: no room for card 0's efa-only device"


@pytest.mark.parametrize(
    ("instance_type", "role", "expected"),
    [
        # EFA training pools: the efa-only interface at (card 0, device 1) takes one of card 0's slots.
        ("p5.48xlarge", "training", 51),  # (2 - 1) x 49 + 2; nodeadm's own figure is 100
        ("p5e.48xlarge", "training", 51),
        ("p5en.48xlarge", "training", 149),  # (4 - 1) x 49 + 2; nodeadm: 198
        ("p6-b200.48xlarge", "training", 149),  # (4 - 1) x 49 + 2; nodeadm: 198
        ("p6-b300.48xlarge", "training", 198),  # card 0 is ENA-only: 4 x 49 + 2
        ("p4d.24xlarge", "training", 250),  # (15 - 1) x 49 + 2 = 688, capped (96 vCPUs); nodeadm: 737
        ("g6e.12xlarge", "training", 250),  # (10 - 1) x 29 + 2 = 263, capped (48 vCPUs); nodeadm: 292
        ("g6e.24xlarge", "training", 250),  # (10 - 1) x 49 + 2 = 443, capped
        ("g6e.48xlarge", "training", 250),
        # No EFA: every slot of card 0 is a pod ENI.
        ("g6e.xlarge", "inference", 58),  # 4 x 14 + 2, under the 110 ceiling of 4 vCPUs
        ("g6e.2xlarge", "inference", 58),
        ("g6e.12xlarge", "inference", 250),  # 10 x 29 + 2 = 292, capped
        ("g6e.48xlarge", "inference", 250),
        ("m7i.large", "system", 29),  # 3 x 9 + 2
        ("m7i.xlarge", "system", 58),
        ("m7i.2xlarge", "system", 58),
    ],
)
def test_max_pods_per_pool(instance_type: str, role: str, expected: int) -> None:
    plan = plan_of(role=role, instanceType=instance_type)
    assert plan.max_pods == expected


def test_efa_only_interfaces_carry_no_pod_addresses() -> None:
    """The pool's layout, not the type alone, decides: the same p5 has one pod ENI with EFA wired, two without."""
    p5 = catalog.instance_type("p5.48xlarge")
    assert pod_enis(p5, efa_interfaces(p5, "efa-only")) == 1
    assert pod_enis(p5, ()) == 2
    assert plan_of(role="training", instanceType="p5.48xlarge", efa="off").max_pods == 100


def test_the_older_efa_layout_keeps_card_0_for_pods() -> None:
    """`efa` interfaces have an ENA side with addresses, and the layout puts none at (card 0, device 1)."""
    p5 = catalog.instance_type("p5.48xlarge")
    assert pod_enis(p5, efa_interfaces(p5, "efa")) == 2
    assert plan_of(role="training", instanceType="p5.48xlarge", efaLayout="efa").max_pods == 100


def test_prefix_delegation_multiplies_each_slot_by_a_16_address_prefix() -> None:
    m7i = catalog.instance_type("m7i.large")
    assert max_pods(m7i, (), prefix_delegation=True) == 110  # 3 x 9 x 16 + 2 = 434, capped at 110 (2 vCPUs)
    p5 = catalog.instance_type("p5.48xlarge")
    assert max_pods(p5, efa_interfaces(p5), prefix_delegation=True) == 250  # 1 x 49 x 16 + 2 = 786, capped


def test_hybrid_pools_have_no_vpc_cni_max_pods() -> None:
    hybrid = plan_of(kind="hybrid", role="training", gpuModel="H100", gpusPerNode=8, nodes=2)
    assert hybrid.max_pods is None


def test_node_config_and_bottlerocket_settings_state_max_pods() -> None:
    plan = plan_of(role="training", instanceType="p5.48xlarge")
    config = nodeadm.node_config("train", ENDPOINT, CA, "172.20.0.0/16", plan)
    assert config["spec"]["kubelet"]["config"] == {"maxPods": 51}
    rocket = nodeadm.bottlerocket_settings(
        "train", ENDPOINT, CA, "172.20.0.0/16", plan_of(role="training", instanceType="p5.48xlarge")
    )
    assert rocket["settings"]["kubernetes"]["max-pods"] == 51


#: A stack cost with no priced part: the pool summary then shows the pool plan's own figures.
UNPRICED = StackCost(region="us-east-1", items=(), unpriced=(), committed=(), pools={})


def test_plan_summary_shows_max_pods_per_pool() -> None:
    assert pool_summary(plan_of(role="training", instanceType="p6-b200.48xlarge"), UNPRICED)["maxPods"] == 149
    assert pool_summary(plan_of(role="system", instanceType="m7i.xlarge"), UNPRICED)["maxPods"] == 58
