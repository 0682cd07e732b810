"""Nothing ignored at the top of a stack file: config namespaces nothing reads, Availability Zones the Region does not
have, problems that name their pool, and no follow-on problem quoting a default the user did not write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pulumi.runtime.mocks import MockCallArgs

from blueprint.plan.mocks import PlanMocks
from blueprint.plan.runner import as_pulumi_config, load_stack, run_program
from components.catalog import CatalogError
from components.catalog.regions import partitions
from components.catalog.zones import REFUSED_KEY, eks_refused_zone_ids, load_refused_zone_ids, load_zones, region_zones
from components.errors import ConfigError, Problem
from components.program import main
from components.validation import validate, validate_config
from components.validation.parse import DEFAULT_POOL_LABEL, Parsed, pool_labels, with_pool_names
from tests.builders import SYSTEM

SECTIONS: dict[str, Any] = {
    "gpu-clusters:cluster": {"name": "top", "endpoint": {"public": True, "publicAccessCidrs": ["203.0.113.0/24"]}},
    "gpu-clusters:network": {"availabilityZones": ["us-west-2a", "us-west-2b"]},
    "gpu-clusters:nodePools": [
        SYSTEM,
        {"name": "h100", "role": "training", "instanceType": "p5.48xlarge", "scaling": {"min": 0, "max": 2}},
    ],
}


def problems_of(extra: dict[str, Any], region: str = "us-west-2") -> list[str]:
    """The problems of SECTIONS plus `extra` keys, as the CLI hands the config to the program (`path: message`)."""
    config = as_pulumi_config({"aws:region": region, **SECTIONS, **extra})
    try:
        validate_config(config, project="gpu-clusters")
    except ConfigError as error:
        return [str(p) for p in error.problems]
    return []


# --------------------------------------------------------------------------------------------------- namespaces
def test_the_sections_alone_are_valid() -> None:
    assert problems_of({}) == []


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            "gpuclusters:storage",
            "gpuclusters:storage: nothing reads the `gpuclusters:` namespace (did you mean gpu-clusters:storage?)",
        ),
        (
            "gpu-cluster:nodePools",
            "gpu-cluster:nodePools: nothing reads the `gpu-cluster:` namespace (did you mean gpu-clusters:nodePools?)",
        ),
        (
            "aws-native:region",
            "aws-native:region: nothing reads the `aws-native:` namespace; this stack reads "
            "gpu-clusters: (cluster, network, nodePools, storage, addons, workloads), aws: (the AWS provider) and "
            "pulumi: (the engine)",
        ),
        (
            "kubernetes:kubeconfig",
            "kubernetes:kubeconfig: `kubernetes:` keys configure only the default Kubernetes provider",
        ),
        ("pulumi:tag", "pulumi:tag: not a config key of the Pulumi engine (did you mean tags?)"),
    ],
)
def test_a_key_nothing_reads_is_refused_with_the_key_meant(key: str, expected: str) -> None:
    (problem,) = problems_of({key: {"lustre": {"name": "scratch"}}})
    assert problem.startswith(expected), problem


def test_a_misspelt_namespace_hides_no_section_behind_a_default() -> None:
    """The pools under `gpu-cluster:` are not replaced by the default system pool and judged: one problem."""
    pools = SECTIONS["gpu-clusters:nodePools"]
    config = {k: v for k, v in SECTIONS.items() if k != "gpu-clusters:nodePools"}
    with pytest.raises(ConfigError) as raised:
        validate_config(
            as_pulumi_config({"aws:region": "us-west-2", **config, "gpu-cluster:nodePools": pools}), "gpu-clusters"
        )
    assert [p.path for p in raised.value.problems] == ["gpu-cluster:nodePools"]


def test_keys_every_reader_reads_pass() -> None:
    engine = {"pulumi:tags": {"team": "ml"}, "pulumi:disable-default-providers": ["kubernetes"]}
    assert problems_of({"aws:profile": "ml", "aws:defaultTags": {"tags": {"team": "ml"}}, **engine}) == []


@pytest.mark.parametrize("disabled", [["aws"], ["*"], [" aws "]])
def test_the_default_aws_provider_cannot_be_disabled(disabled: list[str]) -> None:
    (problem,) = problems_of({"pulumi:disable-default-providers": disabled})
    assert problem.startswith("pulumi:disable-default-providers: the program creates every AWS resource")


@pytest.mark.program
def test_no_kubernetes_resource_uses_the_default_provider() -> None:
    """What makes `kubernetes:` keys unread: every Kubernetes resource names the cluster's own provider."""
    run = run_program(main, load_stack("hybrid"))
    kubernetes = [r for r in run.registrations if r.type.startswith("kubernetes:")]
    assert kubernetes
    assert all(r.provider and "pulumi:providers:kubernetes" in r.provider for r in kubernetes)


# ----------------------------------------------------------------------------------------- availability zones
def test_every_commercial_region_has_its_zones() -> None:
    zones = load_zones()
    assert set(partitions()["aws"]) == set(zones)
    for region, known in zones.items():
        assert len(known.names) >= len(known.ids) >= 2, region
        assert all(name.startswith(region) for name in known.names)


def test_independently_mapped_regions_accept_every_letter_some_account_has() -> None:
    """us-west-1 shows two of its three zones to an account, which two depends on the account (AZIDS)."""
    assert region_zones("us-west-1").names == ("us-west-1a", "us-west-1b", "us-west-1c")  # type: ignore[union-attr]
    assert region_zones("ap-northeast-1").names[-1] == "ap-northeast-1d"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("region", "zone", "expected"),
    [
        (
            "us-west-2",
            "us-west-2z",
            "'us-west-2z' is not an Availability Zone of us-west-2; its zones: us-west-2a, "
            "us-west-2b, us-west-2c, us-west-2d",
        ),
        (
            "ca-central-1",
            "ca-central-1c",
            "'ca-central-1c' is not an Availability Zone of ca-central-1; its zones: "
            "ca-central-1a, ca-central-1b, ca-central-1d",
        ),
        (
            "us-west-2",
            "us-east-1a",
            "'us-east-1a' is not an Availability Zone of us-west-2 (it is in us-east-1, not the stack's aws:region)",
        ),
        (
            "cn-north-1",
            "cn-north-1zz",
            "'cn-north-1zz' is not an Availability Zone of cn-north-1 (expected cn-north-1a",
        ),
    ],
)
def test_a_zone_the_region_does_not_have_is_refused(region: str, zone: str, expected: str) -> None:
    first = region_zones(region).names[0] if region_zones(region) else f"{region}a"  # type: ignore[union-attr]
    found = problems_of({"gpu-clusters:network": {"availabilityZones": [first, zone]}}, region=region)
    zone_problems = [p for p in found if p.startswith("network.availabilityZones")]
    assert len(zone_problems) == 1 and zone_problems[0].startswith(f"network.availabilityZones[1]: {expected}"), found


def test_a_pool_zone_outside_the_region_says_so_and_names_the_networks() -> None:
    pools = [*SECTIONS["gpu-clusters:nodePools"]]
    pools[1] = {**pools[1], "placement": {"availabilityZones": ["us-west-2e"]}}
    assert problems_of({"gpu-clusters:nodePools": pools}) == [
        "nodePools[1] (h100).placement.availabilityZones[0]: 'us-west-2e' is not an Availability Zone of us-west-2; "
        "its zones: us-west-2a, us-west-2b, us-west-2c, us-west-2d; the network's AZs: us-west-2a, us-west-2b"
    ]


def test_zone_ids_are_checked_against_the_regions_published_ids() -> None:
    """usw1-az2 is constrained (older accounts only) but AWS lists it: an ID of us-west-1, refused only because EKS
    places no cluster subnet there."""
    network = {"availabilityZones": ["us-west-1a", "us-west-1b"], "availabilityZoneIds": {"us-west-1a": "usw1-az2"}}
    (refused,) = problems_of({"gpu-clusters:network": network}, region="us-west-1")
    assert "us-west-1a is usw1-az2, where EKS places no cluster subnet" in refused
    network["availabilityZoneIds"] = {"us-west-1a": "usw1-az3"}
    assert problems_of({"gpu-clusters:network": network}, region="us-west-1") == []
    network["availabilityZoneIds"] = {"us-west-1a": "usw1-az9"}
    (problem,) = problems_of({"gpu-clusters:network": network}, region="us-west-1")
    assert "usw1-az9 is not an AZ ID of us-west-1 (usw1-az1, usw1-az2, usw1-az3)" in problem


def test_the_mocks_answer_zones_from_the_catalog() -> None:
    answer = PlanMocks("ca-central-1").call(MockCallArgs("aws:index/getAvailabilityZones:getAvailabilityZones", {}, ""))
    assert answer["names"] == ["ca-central-1a", "ca-central-1b", "ca-central-1d"]
    assert answer["zoneIds"] == ["cac1-az1", "cac1-az2", "cac1-az4"]


def smoke_with_zone_ids(zone_ids: dict[str, str]) -> Any:
    """The smoke stack with `network.availabilityZoneIds` set (its file shows the key commented out)."""
    files = load_stack("smoke")
    network = dict(files.config["gpu-clusters:network"])
    files.config["gpu-clusters:network"] = {**network, "availabilityZoneIds": zone_ids}
    return files


class AccountMocks(PlanMocks):
    """An account whose us-east-1a is use1-az6 and us-east-1b use1-az4 (names are mapped per account)."""

    def __init__(self, region: str, zone_ids: Any = None) -> None:
        super().__init__(region, {"us-east-1a": "use1-az6", "us-east-1b": "use1-az4"})


def test_the_mocks_answer_as_the_account_the_config_describes() -> None:
    stated = {"us-east-1a": "use1-az4", "us-east-1b": "use1-az6", "us-east-1c": "use1-az1"}
    answer = PlanMocks("us-east-1", stated).call(
        MockCallArgs("aws:index/getAvailabilityZones:getAvailabilityZones", {}, "")
    )
    pairs = dict(zip(answer["names"], answer["zoneIds"], strict=True))
    assert {name: pairs[name] for name in stated} == stated
    assert len(set(answer["zoneIds"])) == len(answer["zoneIds"])  # each ID once, as AWS answers


@pytest.mark.program
def test_zone_ids_that_agree_with_the_account_plan() -> None:
    run = run_program(main, smoke_with_zone_ids({"us-east-1a": "use1-az4"}))
    subnets = [r for r in run.registrations if r.type == "aws:ec2/subnet:Subnet"]
    assert "use1-az4" in {s.inputs.get("availabilityZoneId") for s in subnets}


@pytest.mark.program
def test_zone_ids_the_account_maps_otherwise_are_refused_before_anything_is_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from blueprint.plan import runner

    monkeypatch.setattr(runner, "PlanMocks", AccountMocks)
    with pytest.raises(ConfigError) as caught:
        run_program(main, smoke_with_zone_ids({"us-east-1a": "use1-az4"}))
    (problem,) = caught.value.problems
    assert problem.path == "network.availabilityZoneIds.us-east-1a"
    assert problem.message.startswith("this account's us-east-1a is use1-az6; use1-az4 is its us-east-1b")


def test_a_zone_id_the_account_lacks_is_refused_with_its_path() -> None:
    from components.config import NetworkConfig
    from components.validation.offerings import account_zone_problems

    network = NetworkConfig.model_validate(
        {"availabilityZones": ["us-east-1a"], "availabilityZoneIds": {"us-east-1a": "use1-az5"}}
    )
    (problem,) = account_zone_problems(network, "us-east-1", {"us-east-1a": "use1-az4", "us-east-1b": "use1-az6"})
    assert problem.path == "network.availabilityZoneIds.us-east-1a"
    assert "use1-az5 is not a zone of this account in us-east-1 (its zone IDs: use1-az4, use1-az6" in problem.message
    assert account_zone_problems(network, "us-east-1", {"us-east-1a": "use1-az5"}) == []


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ({"source": "AZS", "mapping": "uniform", "ids": ["use1-az1"], "names": ["us-east-2a"]}, "a non-empty list"),
        ({"source": "AZS", "mapping": "uniform", "ids": ["use1-az2", "use1-az1"], "names": ["us-east-1a"]}, "in order"),
        (
            {"source": "AZS", "mapping": "uniform", "ids": ["use1-az1", "use2-az2"], "names": ["us-east-1a"]},
            "one Region",
        ),
        ({"source": "NOPE", "mapping": "uniform", "ids": ["use1-az1"], "names": ["us-east-1a"]}, "unknown source"),
        ({"source": "AZS", "mapping": "random", "ids": ["use1-az1"], "names": ["us-east-1a"]}, "mapping"),
    ],
)
def test_the_zones_loader_refuses_bad_entries(tmp_path: Path, entry: dict[str, Any], fragment: str) -> None:
    path = tmp_path / "zones.yaml"
    refused = {"source": "AZS", "ids": ["use1-az3"]}
    path.write_text(
        json.dumps({"sources": {"AZS": {"title": "t"}}, "regions": {"us-east-1": entry}, REFUSED_KEY: refused})
    )
    with pytest.raises(CatalogError, match=fragment):
        load_zones(path)


def test_the_zone_ids_eks_refuses_for_cluster_subnets_are_sourced_data() -> None:
    assert eks_refused_zone_ids() == {"use1-az3", "usw1-az2", "cac1-az3"}


@pytest.mark.parametrize(
    ("refused", "fragment"),
    [
        ({"source": "NOPE", "ids": ["use1-az3"]}, "unknown source"),
        ({"source": "AZS", "ids": ["use1-az3", "cac1-az3"]}, "in order"),
        ({"ids": ["use1-az3"]}, "needs `source` and `ids`"),
    ],
)
def test_the_refused_zone_ids_loader_refuses_bad_entries(
    tmp_path: Path, refused: dict[str, Any], fragment: str
) -> None:
    path = tmp_path / "zones.yaml"
    path.write_text(json.dumps({"sources": {"AZS": {"title": "t"}}, "regions": {}, REFUSED_KEY: refused}))
    with pytest.raises(CatalogError, match=fragment):
        load_refused_zone_ids(path)


# -------------------------------------------------------------------------------------------------- pool names
def test_problems_name_their_pool_in_the_path_and_in_messages() -> None:
    parsed = Parsed.from_raw({"nodePools": [{"name": "h100", "role": "training"}, {"role": "inference"}]}, "us-east-1")
    labels = pool_labels([{"name": "h100"}, {"role": "inference"}], parsed)
    named = with_pool_names(Problem("nodePools[0].scaling.max", "see nodePools[1] and nodePools[0]"), labels)
    assert named == Problem("nodePools[0] (h100).scaling.max", "see nodePools[1] and nodePools[0] (h100)")


def test_the_default_system_pool_is_named_as_no_entry_of_the_file() -> None:
    raw = {"nodePools": [{"name": "h100", "role": "training", "instanceType": "p5.48xlarge"}]}
    parsed = Parsed.from_raw(raw, "us-east-1")
    assert [pool.name for _, pool in parsed.pools] == ["h100", "system"]
    labels = pool_labels(raw["nodePools"], parsed)
    assert labels == {0: "nodePools[0] (h100)", 1: DEFAULT_POOL_LABEL}
    assert with_pool_names(Problem("nodePools[1].labels", "x"), labels).path == f"{DEFAULT_POOL_LABEL}.labels"


def test_validation_reports_pools_by_name() -> None:
    pools = [*SECTIONS["gpu-clusters:nodePools"]]
    pools[1] = {**pools[1], "scaling": {"min": 3, "max": 2}}
    assert problems_of({"gpu-clusters:nodePools": pools}) == [
        "nodePools[1] (h100).scaling.min: min 3 is above max 2; need min <= desired <= max"
    ]


# ----------------------------------------------------------------------------------------------- follow-ons
@pytest.mark.parametrize(
    ("pool_changes", "path"),
    [
        ({"scaling": {"min": 2, "max": "three"}}, "nodePools[1] (h100).scaling.max"),
        ({"capacity": {"type": "spotty", "spotInstanceTypes": ["p5e.48xlarge"]}}, "nodePools[1] (h100).capacity.type"),
        ({"kind": "cloud", "gpuModel": "A40", "nodes": 2}, "nodePools[1] (h100).kind"),
    ],
)
def test_a_bad_value_is_one_problem_never_a_default_quoted_after_it(pool_changes: dict[str, Any], path: str) -> None:
    """`max: three` is not judged as the default max 1 (`min 2 is above max 1`), a bad capacity type not as
    on-demand, a bad kind not as an aws pool that AWS cannot rent A40s for."""
    pools = [*SECTIONS["gpu-clusters:nodePools"]]
    pools[1] = {**pools[1], **pool_changes}
    found = problems_of({"gpu-clusters:nodePools": pools})
    assert [p.split(": ")[0] for p in found] == [path], found


def test_a_bad_zone_entry_is_not_followed_by_an_empty_network() -> None:
    """The network's zones did not parse: no `list at least 2 AZs`, no pool zone `not one of the network's AZs ()`."""
    pools = [*SECTIONS["gpu-clusters:nodePools"]]
    pools[1] = {**pools[1], "placement": {"availabilityZones": ["us-west-2a"]}}
    found = problems_of(
        {"gpu-clusters:network": {"availabilityZones": ["us-west-2a", 7]}, "gpu-clusters:nodePools": pools}
    )
    assert [p.split(": ")[0] for p in found] == ["network.availabilityZones[1]"], found


def test_validate_without_config_keys_still_names_pools() -> None:
    raw = {
        "cluster": {"name": "top", "endpoint": {"privateAccessCidrs": ["192.168.10.0/24"]}},
        "network": {
            "availabilityZones": ["us-east-1a", "us-east-1b"],
            "siteConnection": {"transitGatewayId": "tgw-0f3a9c1e27d84b5a6"},
        },
        "nodePools": [
            {"name": "gpu", "role": "training", "instanceType": "p5.48xlarge", "scaling": {"min": 3, "max": 1}}
        ],
    }
    with pytest.raises(ConfigError) as raised:
        validate(raw, region="us-east-1")
    assert "nodePools[0] (gpu).scaling.min" in [p.path for p in raised.value.problems]
