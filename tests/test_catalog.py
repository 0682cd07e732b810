"""Tests for the hardware catalog: the shipped data's invariants, the lookups, and the loader's rejections."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from blueprint.catalog_table import catalog_rows, catalog_table
from components.catalog import (
    COMMON_FIELD_GROUPS,
    GPU_FIELD_GROUPS,
    GPUS_PATH,
    INSTANCES_PATH,
    CatalogError,
    capacity_block_types,
    efa_instance_type_names,
    format_card_ranges,
    gpu_model,
    gpu_models,
    instance_type,
    instance_types,
    instance_types_with_gpu,
    is_rented_by_aws,
    load_catalog,
    parse_card_ranges,
    sources,
)
from tests.catalog_files import shipped_data, write_yaml

REQUIRED_TYPES = [
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p6-b200.48xlarge",
    "p6-b300.48xlarge",
    *(f"g6e.{size}" for size in ("xlarge", "2xlarge", "12xlarge", "24xlarge", "48xlarge")),
    *(f"g5.{size}" for size in ("xlarge", "12xlarge", "48xlarge")),
    *(f"g6.{size}" for size in ("xlarge", "12xlarge", "48xlarge")),
    "g4dn.12xlarge",
    "m7i.large",
    "m7i.xlarge",
    "m7i.2xlarge",
    "m6i.xlarge",
    "m6i.2xlarge",
    "m5.xlarge",
    "c7i.2xlarge",
]


# ------------------------------------------------------------------------------------------- shipped data


def test_every_required_type_is_in_the_catalog() -> None:
    missing = [name for name in REQUIRED_TYPES if name not in instance_types()]
    assert missing == []


@pytest.mark.parametrize("name", REQUIRED_TYPES)
def test_every_field_group_has_a_known_source(name: str) -> None:
    itype = instance_type(name)
    groups = COMMON_FIELD_GROUPS + (GPU_FIELD_GROUPS if itype.is_gpu else ())
    for group in groups:
        tags = itype.source[group].split("+")
        assert tags and all(tag in sources() for tag in tags), (name, group, itype.source[group])


def test_every_gpu_model_cites_known_sources() -> None:
    for model in gpu_models().values():
        assert all(tag in sources() for tag in model.source.split("+")), model.name


@pytest.mark.parametrize("name", REQUIRED_TYPES)
def test_efa_interfaces_fit_the_network_cards(name: str) -> None:
    itype = instance_type(name)
    assert itype.max_efa_interfaces <= itype.network_cards
    assert len(itype.efa_cards) == itype.max_efa_interfaces
    assert all(0 <= card < itype.network_cards for card in itype.efa_cards)
    assert itype.efa_supported == (itype.max_efa_interfaces > 0)


@pytest.mark.parametrize("name", REQUIRED_TYPES)
def test_sizes_and_prices_are_positive(name: str) -> None:
    itype = instance_type(name)
    assert itype.vcpu > 0 and itype.memory_gib > 0 and itype.network_gbps > 0
    if itype.is_gpu:
        assert itype.gpu_memory_gib > 0
    if itype.local_nvme_count:
        assert itype.local_nvme_gb > 0
    if itype.on_demand_usd_per_hour is not None:
        assert itype.on_demand_usd_per_hour > 0
        assert itype.price_date == "2026-07-20"


def test_only_p5e_lacks_a_price_and_says_why() -> None:
    unpriced = [t for t in instance_types().values() if t.on_demand_usd_per_hour is None]
    assert [t.name for t in unpriced] == ["p5e.48xlarge"]
    assert unpriced[0].price_date is None
    assert unpriced[0].notes and "Capacity Blocks" in unpriced[0].notes


def test_p6_b300_keeps_card_zero_for_ena() -> None:
    b300 = instance_type("p6-b300.48xlarge")
    assert b300.efa_cards == tuple(range(1, 17))
    assert b300.network_cards == 17
    assert 0 not in b300.efa_cards


@pytest.mark.parametrize(
    ("name", "efa_interfaces"),
    [
        ("p5.48xlarge", 32),
        ("p5e.48xlarge", 32),
        ("p5en.48xlarge", 16),
        ("p6-b200.48xlarge", 8),
        ("p4d.24xlarge", 4),
        ("g6e.48xlarge", 4),
        ("g6e.24xlarge", 2),
        ("g6e.12xlarge", 1),
    ],
)
def test_max_efa_interfaces(name: str, efa_interfaces: int) -> None:
    assert instance_type(name).max_efa_interfaces == efa_interfaces


def test_p5_carries_efa_on_every_card() -> None:
    assert instance_type("p5.48xlarge").efa_cards == tuple(range(32))


@pytest.mark.parametrize("name", ["g6e.xlarge", "g6e.2xlarge", "g5.xlarge", "g6.xlarge", "m7i.large", "c7i.2xlarge"])
def test_small_types_have_no_efa(name: str) -> None:
    itype = instance_type(name)
    assert not itype.efa_supported
    assert itype.max_efa_interfaces == 0 and itype.efa_cards == ()
    assert name not in efa_instance_type_names()


def test_efa_instance_type_names_is_sorted_and_complete() -> None:
    names = efa_instance_type_names()
    assert names == sorted(names)
    assert {"p5.48xlarge", "p6-b300.48xlarge", "g6e.12xlarge", "g4dn.12xlarge"} <= set(names)


def test_gpu_memory_comes_from_the_gpu_model() -> None:
    for itype in instance_types().values():
        if itype.is_gpu:
            assert itype.gpu_model is not None
            assert itype.gpu_memory_gib == gpu_model(itype.gpu_model).memory_gib, itype.name
        else:
            assert itype.gpu_memory_gib == 0 and itype.gpu_model is None


def test_derived_properties() -> None:
    p5 = instance_type("p5.48xlarge")
    assert p5.is_gpu and p5.family == "p5"
    assert p5.local_nvme_total_gb == 8 * 3800
    assert p5.gpu_shape == ("H100", 8, 80.0)
    assert p5.usd_per_gpu_hour == pytest.approx(55.04 / 8)
    assert instance_type("p6-b200.48xlarge").family == "p6-b200"
    assert not instance_type("m7i.xlarge").is_gpu


def test_equal_gpu_shapes_identify_interchangeable_types() -> None:
    assert instance_type("p5e.48xlarge").gpu_shape == instance_type("p5en.48xlarge").gpu_shape
    assert instance_type("g6e.12xlarge").gpu_shape == instance_type("g6e.24xlarge").gpu_shape
    assert instance_type("p4d.24xlarge").gpu_shape != instance_type("p4de.24xlarge").gpu_shape


def test_nvlink_only_on_sxm_types() -> None:
    for itype in instance_types().values():
        if itype.gpu_model is None:
            assert itype.nvlink is None
        else:
            has_nvlink = itype.nvlink is not None
            assert has_nvlink == (gpu_model(itype.gpu_model).form_factor == "SXM"), itype.name


# ------------------------------------------------------------------------------------------- GPU models


def test_a40_is_not_rented_by_aws_and_l40s_is() -> None:
    assert is_rented_by_aws("A40") is False
    assert is_rented_by_aws("L40S") is True
    a40 = gpu_model("A40")
    assert a40.form_factor == "PCIe" and a40.vendor_memory == "48 GB GDDR6"
    assert a40.cloud_alternative == "g6e.12xlarge"


def test_rented_by_aws_matches_the_instances() -> None:
    used = {t.gpu_model for t in instance_types().values() if t.gpu_model}
    for model in gpu_models().values():
        assert model.rented_by_aws == (model.name in used), model.name


def test_on_prem_models_present() -> None:
    for name in ("A40", "L40S", "A100-80GB-PCIe", "H100-PCIe"):
        assert gpu_model(name).form_factor == "PCIe"
    assert not is_rented_by_aws("H100-PCIe")


def test_cloud_alternatives_resolve_to_instances() -> None:
    for model in gpu_models().values():
        if model.cloud_alternative is not None:
            assert instance_type(model.cloud_alternative).is_gpu


def test_instance_types_with_gpu_are_cheapest_first() -> None:
    l40s = instance_types_with_gpu("L40S")
    prices = [t.on_demand_usd_per_hour for t in l40s]
    assert l40s[0].name == "g6e.xlarge"
    assert prices == sorted(p for p in prices if p is not None)
    assert [t.name for t in instance_types_with_gpu("L40S", 4)] == ["g6e.12xlarge", "g6e.24xlarge"]
    h200 = instance_types_with_gpu("H200", 8)
    assert [t.name for t in h200] == ["p5en.48xlarge", "p5e.48xlarge"]  # unpriced last


def test_instance_types_with_gpu_rejects_unknown_models() -> None:
    with pytest.raises(KeyError, match="L40S"):
        instance_types_with_gpu("L40")


# ------------------------------------------------------------------------------------------- lookups


def test_typo_lookup_suggests_close_matches() -> None:
    with pytest.raises(KeyError) as info:
        instance_type("p5.48xlarg")
    assert "p5.48xlarge" in str(info.value)
    with pytest.raises(KeyError) as info:
        gpu_model("H10O")
    assert "H100" in str(info.value)


def test_card_ranges_round_trip() -> None:
    assert parse_card_ranges("1-16") == tuple(range(1, 17))
    assert parse_card_ranges("0,2-3") == (0, 2, 3)
    assert parse_card_ranges("") == ()
    assert format_card_ranges(tuple(range(32))) == "0-31"
    assert format_card_ranges((0, 2, 3)) == "0,2-3"
    with pytest.raises(ValueError):
        parse_card_ranges("3-1")


def test_sources_are_citations() -> None:
    cited = sources()
    assert "docs.aws.amazon.com/ec2/latest/instancetypes/ac.html" in cited["AC"]
    assert "2026-07-20" in cited["KPP"]


# ------------------------------------------------------------------------------------------- rendering


def test_catalog_rows_are_json_and_cover_the_catalog() -> None:
    rows = catalog_rows()
    assert {row["type"] for row in rows} == set(instance_types())
    json.dumps(rows)
    by_type = {row["type"]: row for row in rows}
    assert by_type["p6-b300.48xlarge"]["efaCards"] == "1-16"
    assert by_type["p5.48xlarge"]["efaCards"] == "0-31"
    assert by_type["p5e.48xlarge"]["onDemandUsdPerHour"] is None
    assert by_type["p5.48xlarge"]["sources"]["price"] == "KPP"


def test_catalog_table_has_the_documented_columns() -> None:
    table = catalog_table()
    headers = [str(column.header) for column in table.columns]
    assert headers[:3] == ["type", "GPU", "count"]
    assert "EFA cards" in headers and "sources" in headers and "$/h" in headers
    assert table.row_count == len(instance_types())


# ------------------------------------------------------------------------------------------- loader rejects bad data


def _entry(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e for e in data["instance_types"] if e["name"] == name)


def _write(tmp_path: Path, data: dict[str, Any], filename: str = "instances.yaml") -> Path:
    return write_yaml(tmp_path, data, filename)


def test_loader_accepts_the_shipped_files_copied(tmp_path: Path) -> None:
    catalog = load_catalog(_write(tmp_path, shipped_data(INSTANCES_PATH)))
    assert set(catalog.instance_types) == set(instance_types())


BAD_EDITS: list[tuple[str, str, Any, str]] = [
    ("p5.48xlarge", "max_efa_interfaces", 33, "exceeds network_cards"),
    ("p5.48xlarge", "efa_cards", "0-30", "efa_cards lists 31 cards"),
    ("p6-b300.48xlarge", "efa_cards", "2-17", "outside card indexes"),
    ("g6e.xlarge", "efa_supported", True, "efa_supported must be true exactly when"),
    ("g5.xlarge", "on_demand_usd_per_hour", -1.0, "greater than 0"),
    ("g5.xlarge", "vcpu", 0, "greater than 0"),
    ("g5.xlarge", "gpu_model", "A10X", "not in gpus.yaml"),
    ("g5.xlarge", "gpu_memory_gib", 22.0, "derived by the loader"),
    ("m5.xlarge", "on_demand_usd_per_hour", None, "needs `notes`"),
]


@pytest.mark.parametrize(("name", "field", "value", "message"), BAD_EDITS)
def test_loader_rejects_bad_values(tmp_path: Path, name: str, field: str, value: Any, message: str) -> None:
    data = shipped_data(INSTANCES_PATH)
    _entry(data, name)[field] = value
    with pytest.raises(CatalogError, match=message):
        load_catalog(_write(tmp_path, data))


def test_loader_rejects_a_missing_field_group_source(tmp_path: Path) -> None:
    data = shipped_data(INSTANCES_PATH)
    del _entry(data, "p5.48xlarge")["source"]["efa"]
    with pytest.raises(CatalogError, match="no source for field group"):
        load_catalog(_write(tmp_path, data))


def test_loader_rejects_an_unknown_source_tag(tmp_path: Path) -> None:
    data = shipped_data(INSTANCES_PATH)
    _entry(data, "p5.48xlarge")["source"]["price"] = "KPP+BLOG"
    with pytest.raises(CatalogError, match="unknown source tag"):
        load_catalog(_write(tmp_path, data))


def test_loader_rejects_an_instance_set_member_without_a_known_source(tmp_path: Path) -> None:
    data = shipped_data(INSTANCES_PATH)
    data["instance_sets"]["capacity_blocks"]["members"]["p5.48xlarge"] = "FORUM"
    with pytest.raises(CatalogError, match=r"instance_sets.capacity_blocks.p5.48xlarge: unknown source tag"):
        load_catalog(_write(tmp_path, data))


def test_loader_requires_every_instance_set_the_code_reads(tmp_path: Path) -> None:
    data = shipped_data(INSTANCES_PATH)
    del data["instance_sets"]["no_lustre_efa_families"]
    with pytest.raises(CatalogError, match="must define exactly"):
        load_catalog(_write(tmp_path, data))


def test_instance_sets_are_read_from_the_catalog(tmp_path: Path) -> None:
    data = shipped_data(INSTANCES_PATH)
    data["instance_sets"]["capacity_blocks"]["members"] = {"g6e.xlarge": "CBTYPES"}
    catalog = load_catalog(_write(tmp_path, data))
    assert set(catalog.instance_sets["capacity_blocks"].members) == {"g6e.xlarge"}
    assert "p5.48xlarge" in capacity_block_types() and "g6e.xlarge" not in capacity_block_types()


def test_loader_rejects_a_gpu_model_with_unknown_source(tmp_path: Path) -> None:
    gpus = shipped_data(GPUS_PATH)
    gpus["gpu_models"][0]["source"] = "FORUM"
    with pytest.raises(CatalogError, match="unknown source tag"):
        load_catalog(None, _write(tmp_path, gpus, "gpus.yaml"))


def test_loader_rejects_a_hand_kept_rented_flag(tmp_path: Path) -> None:
    gpus = shipped_data(GPUS_PATH)
    gpus["gpu_models"][0]["rented_by_aws"] = True
    with pytest.raises(CatalogError, match="derived"):
        load_catalog(None, _write(tmp_path, gpus, "gpus.yaml"))


def test_loader_rejects_a_duplicate_entry(tmp_path: Path) -> None:
    data = shipped_data(INSTANCES_PATH)
    data["instance_types"].append(dict(_entry(data, "m5.xlarge")))
    with pytest.raises(CatalogError, match="listed twice"):
        load_catalog(_write(tmp_path, data))


def test_loader_rejects_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "instances.yaml"
    path.write_text("instance_types: [\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="not valid YAML"):
        load_catalog(path)
