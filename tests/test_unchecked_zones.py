"""Where AZ names map to AZ IDs per account (us-east-1), a pool pinned to an AZ name may land in a zone that does not
offer its instance type; without `network.availabilityZoneIds` validation cannot tell, so the plan warns, and with
them it checks each AZ (components/validation/offerings.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blueprint.plan.summary import summarize
from components.errors import ConfigError
from components.planning.stack_plan import plan_stack
from tests.builders import SYSTEM_POOL, file_plan, shipped_plan, stack_config

SMOKE = Path(__file__).resolve().parent.parent / "stacks" / "Pulumi.smoke.yaml"
LIST_IDS = "aws ec2 describe-availability-zones --region us-east-1 --query 'AvailabilityZones[].[ZoneName,ZoneId]'"


def zone_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "network.availabilityZoneIds" in w]


def smoke_with_zone_ids(tmp_path: Path, ids: str) -> Path:
    """A copy of the smoke stack whose network maps its AZ names to `ids` (a flow mapping)."""
    text = SMOKE.read_text()
    anchor = "    natGateways: single\n"
    assert anchor in text
    copy = tmp_path / "Pulumi.mysmoke.yaml"
    copy.write_text(text.replace(anchor, f"{anchor}    availabilityZoneIds: {ids}\n"))
    return copy


@pytest.mark.program
def test_the_smoke_stack_without_zone_ids_warns_that_its_gpu_az_may_not_offer_g6e() -> None:
    found = zone_warnings(shipped_plan("smoke")["summary"]["warnings"])
    (gpu,) = [w for w in found if w.startswith("nodePools[1] (l40s)")]
    assert "g6e.xlarge is offered in 4 of us-east-1's 6 AZ IDs" in gpu
    assert "use1-az1, use1-az2, use1-az4, use1-az6;" in gpu
    assert "maps AZ names to AZ IDs per account, so us-east-1a may not offer it" in gpu
    assert LIST_IDS in gpu


@pytest.mark.program
def test_the_smoke_stack_with_zone_ids_that_offer_its_types_plans_without_the_warning(tmp_path: Path) -> None:
    plan = file_plan(smoke_with_zone_ids(tmp_path, "{us-east-1a: use1-az4, us-east-1b: use1-az6}"))
    assert zone_warnings(plan["summary"]["warnings"]) == []
    assert not [v for v in plan["violations"] if v["level"] == "mandatory"]


@pytest.mark.program
def test_the_smoke_stack_with_its_gpu_az_mapped_to_a_zone_without_g6e_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        file_plan(smoke_with_zone_ids(tmp_path, "{us-east-1a: use1-az3, us-east-1b: use1-az6}"))
    found = {(p.path, p.message.split(";")[0]) for p in refused.value.problems}
    assert (
        "nodePools[1] (l40s).placement.availabilityZones[0]",
        "us-east-1a (use1-az3) does not offer g6e.xlarge",
    ) in found
    # the system pool spans both AZs, and use1-az3 offers no m7i either
    assert ("nodePools[0] (system)", "us-east-1a (use1-az3) does not offer m7i.xlarge") in found


def warnings_of(pools: list[dict[str, Any]], zone_ids: dict[str, str] | None = None) -> list[str]:
    """The AZ warnings of `pools` in a us-east-1 network of us-east-1a and us-east-1b."""
    spec = stack_config(
        *pools, region="us-east-1", zones=["us-east-1a", "us-east-1b"], network={"availabilityZoneIds": zone_ids or {}}
    )
    return zone_warnings(summarize(plan_stack(spec))["warnings"])


P5 = {
    "name": "h100",
    "role": "training",
    "instanceType": "p5.48xlarge",
    "placement": {"availabilityZones": ["us-east-1a"]},
}


def test_a_type_offered_in_every_az_id_of_the_region_needs_no_zone_ids() -> None:
    # p5.48xlarge is offered in all six AZ IDs of us-east-1, so whichever zone us-east-1a is offers it
    system = {**SYSTEM_POOL, "instanceType": "m7i.xlarge"}
    assert [w.split(":")[0] for w in warnings_of([system, P5])] == ["nodePools[0] (system)"]


def test_a_zone_mapped_only_in_part_warns_for_the_unmapped_az_alone() -> None:
    system = {**SYSTEM_POOL, "instanceType": "m7i.xlarge"}
    (warning,) = warnings_of([system], {"us-east-1a": "use1-az4"})
    assert "so us-east-1b may not offer it" in warning


def test_in_a_region_with_one_mapping_for_every_account_the_warning_says_the_catalog_lacks_it() -> None:
    # ap-south-1 maps names the same way in every account, but the catalog keeps only AZ IDs: g6e is in two of three
    gpu = {"name": "l40s", "role": "inference", "instanceType": "g6e.xlarge"}
    spec = stack_config(
        {**SYSTEM_POOL, "instanceType": "m7i.xlarge"},
        {**gpu, "placement": {"availabilityZones": ["ap-south-1a"]}},
        region="ap-south-1",
        zones=["ap-south-1a", "ap-south-1b"],
    )
    (warning,) = zone_warnings(summarize(plan_stack(spec))["warnings"])
    assert warning.startswith("nodePools[1] (l40s): g6e.xlarge is offered in 2 of ap-south-1's 3 AZ IDs")
    assert "the catalog does not know which AZ ID ap-south-1a is" in warning
