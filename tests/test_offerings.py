"""Instance type offerings per AZ: the catalog's snapshot (loaded and checked) and the rules that refuse a pool in
an AZ that does not offer its type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.catalog import CatalogError
from components.catalog.offerings import load_offerings, region_offerings
from components.errors import ConfigError, Problem
from components.validation import validate
from tests.builders import SYSTEM_DEFAULT_SCALING

US_EAST_1_IDS = {
    "us-east-1a": "use1-az2",
    "us-east-1b": "use1-az4",
    "us-east-1c": "use1-az6",
}


def problems(pools: list[dict[str, Any]], **network: Any) -> list[Problem]:
    """What validation reports for `pools` (after a system pool) in a us-east-1 network of three AZs."""
    raw = {
        "cluster": {"name": "offers", "endpoint": {"privateAccessCidrs": ["192.168.10.0/24"]}},
        "network": {"availabilityZones": list(US_EAST_1_IDS), **network},
        "nodePools": [SYSTEM_DEFAULT_SCALING, *pools],
    }
    try:
        validate(raw, "us-east-1")
    except ConfigError as error:
        return list(error.problems)
    return []


def offering_problems(pools: list[dict[str, Any]], **network: Any) -> list[Problem]:
    return [p for p in problems(pools, **network) if "offer" in p.message or "availabilityZoneIds" in p.path]


def test_the_snapshot_is_keyed_by_az_id_and_names_its_source() -> None:
    us_east_1 = region_offerings("us-east-1")
    assert us_east_1 is not None and us_east_1.source == "MOTO"
    assert us_east_1.zones == ("use1-az1", "use1-az2", "use1-az3", "use1-az4", "use1-az5", "use1-az6")
    assert us_east_1.zones_offering("p5en.48xlarge") == {"use1-az2", "use1-az6"}
    assert us_east_1.zones_offering("p5e.48xlarge") == frozenset()  # known: offered nowhere in the region
    assert region_offerings("us-gov-west-1") is None  # no snapshot: nothing is checked there


GOOD_REGION = "    source: T\n    zones: [use1-az1, use1-az2]\n    offerings:\n      p5.48xlarge: [use1-az2]\n"


@pytest.mark.parametrize(
    ("region", "fragment"),
    [
        (GOOD_REGION.replace("p5.48xlarge: [use1-az2]", "p5.48xlarge: [use1-az9]"), "not in `zones`"),
        (GOOD_REGION.replace("[use1-az2]\n", "[usw2-az2]\n"), "not an AZ ID of this region"),
        (GOOD_REGION.replace("[use1-az1, use1-az2]", "[use1-az2, use1-az1]"), "once each, in order"),
        (GOOD_REGION.replace("p5.48xlarge", "p9.48xlarge"), "not an instance type of the catalog"),
        (GOOD_REGION.replace("source: T", "source: NOPE"), "unknown source tag"),
        (GOOD_REGION.replace("    zones: [use1-az1, use1-az2]\n", ""), "exactly `source`, `zones` and `offerings`"),
    ],
    ids=["zone-not-listed", "foreign-az-id", "unsorted", "unknown-type", "unknown-source", "no-zones"],
)
def test_the_loader_refuses_bad_entries(tmp_path: Path, region: str, fragment: str) -> None:
    path = tmp_path / "offerings.yaml"
    path.write_text(f"sources:\n  T: {{title: test}}\nregions:\n  us-east-1:\n{region}")
    with pytest.raises(CatalogError, match=fragment):
        load_offerings(path)


def test_the_loader_refuses_an_unknown_region(tmp_path: Path) -> None:
    path = tmp_path / "offerings.yaml"
    path.write_text(f"sources:\n  T: {{title: test}}\nregions:\n  us-east-9:\n{GOOD_REGION}")
    with pytest.raises(CatalogError, match="not a region"):
        load_offerings(path)


def test_the_shipped_snapshot_loads() -> None:
    assert "us-east-1" in load_offerings()


B200 = {"name": "b200", "role": "training", "instanceType": "p6-b200.48xlarge", "scaling": {"min": 0, "max": 2}}


def test_a_pool_in_an_az_that_does_not_offer_its_type_is_refused() -> None:
    pool = {**B200, "placement": {"availabilityZones": ["us-east-1a"]}}
    found = offering_problems([pool], availabilityZoneIds=US_EAST_1_IDS)
    assert [p.path for p in found] == ["nodePools[1] (b200).placement.availabilityZones[0]"]
    assert "us-east-1a (use1-az2) does not offer p6-b200.48xlarge" in found[0].message
    assert "use1-az6 (us-east-1c)" in found[0].message


def test_a_spot_list_that_repeats_the_primary_type_names_each_type_once() -> None:
    capacity = {"type": "spot", "spotInstanceTypes": ["p6-b200.48xlarge"]}
    pool = {**B200, "capacity": capacity, "placement": {"availabilityZones": ["us-east-1a"]}}
    (found,) = offering_problems([pool], availabilityZoneIds=US_EAST_1_IDS)
    assert "does not offer p6-b200.48xlarge;" in found.message


def test_a_pool_in_an_az_that_offers_its_type_passes() -> None:
    pool = {**B200, "placement": {"availabilityZones": ["us-east-1c"]}}
    assert offering_problems([pool], availabilityZoneIds=US_EAST_1_IDS) == []


def test_without_zone_ids_a_pool_spanning_more_azs_than_offer_its_type_is_refused() -> None:
    pool = {**B200, "role": "inference", "efa": "off"}  # every AZ of the network: three, where one offers it
    found = offering_problems([pool])
    assert [p.path for p in found] == ["nodePools[1] (b200)"]
    assert "offered in only 1 of us-east-1's 6" in found[0].message


def test_a_type_offered_nowhere_in_the_region_is_refused() -> None:
    pool = {**B200, "instanceType": "p5e.48xlarge", "placement": {"availabilityZones": ["us-east-1a"]}}
    found = offering_problems([pool])
    assert [(p.path, p.message.split(" (")[0]) for p in found] == [
        ("nodePools[1] (b200).instanceType", "p5e.48xlarge is offered in no AZ of us-east-1")
    ]


def test_a_network_az_whose_id_eks_refuses_for_cluster_subnets_is_refused_with_the_source() -> None:
    ids = {**US_EAST_1_IDS, "us-east-1b": "use1-az3"}
    (found,) = [p for p in problems([], availabilityZoneIds=ids) if "cluster subnet" in p.message]
    assert found.path == "network.availabilityZoneIds.us-east-1b"
    assert "use1-az3" in found.message and "network-reqs.html#network-requirements-subnets" in found.message
    assert not [p for p in problems([], availabilityZoneIds=US_EAST_1_IDS) if "cluster subnet" in p.message]


def test_zone_ids_name_the_networks_azs_once_each_with_ids_of_the_region() -> None:
    ids = {"us-east-1a": "use1-az2", "us-east-1b": "use1-az2", "us-east-1c": "usw2-az1", "us-east-1d": "use1-az1"}
    found = {(p.path, p.message.split(";")[0].split(" (")[0]) for p in offering_problems([], availabilityZoneIds=ids)}
    assert found == {
        ("network.availabilityZoneIds.us-east-1b", "use1-az2 is already the ID of us-east-1a"),
        ("network.availabilityZoneIds.us-east-1c", "usw2-az1 is not an AZ ID of us-east-1"),
        ("network.availabilityZoneIds.us-east-1d", "not an AZ of the network"),
    }
