"""Kubernetes AI Conformance: each requirement's status from the plan (components/planning/conformance.py), the
PRODUCT.yaml `blueprint conformance` writes, and the shipped stacks against every MUST (docs/conformance.md)."""

from __future__ import annotations

import dataclasses
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from blueprint.conformance import product
from blueprint.exit_codes import CONFIG, FAILED, OK, USAGE
from blueprint.plan.runner import list_stacks, load_stack
from components.catalog.ai_conformance import checklist
from components.planning.addons.selection import AddonSelection
from components.planning.conformance import (
    DRA_DRIVER,
    GATEWAY,
    RULES,
    STATUSES,
    assess,
    autoscaling_target,
    unmet_musts,
)
from components.planning.stack_plan import StackPlan, plan_stack
from components.validation import validate_config
from tests.builders import INFERENCE_POOL, SYSTEM_POOL, TRAINING_POOL, addon_stack, pool

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = list_stacks()


@cache
def shipped_plan(stack: str) -> StackPlan:
    files = load_stack(stack)
    return plan_stack(validate_config(files.config, files.project))


def with_addons(plan: StackPlan, **switches: bool) -> StackPlan:
    """The plan with some add-on switches set (names with dashes as underscores), others as planned: how the tests
    hold for add-ons whose switch another branch adds."""
    names = {k.replace("_", "-"): v for k, v in switches.items()}
    return dataclasses.replace(plan, addons=AddonSelection({**plan.addons.switches, **names}, plan.addons.alerts_topic))


def status(plan: StackPlan, requirement: str) -> str:
    return next(a.status for a in assess(plan) if a.requirement.id == requirement)


def finding(plan: StackPlan, requirement: str) -> Any:
    return next(a for a in assess(plan) if a.requirement.id == requirement)


INFERENCE = plan_stack(addon_stack(SYSTEM_POOL, pool(INFERENCE_POOL, scaling={"min": 0, "max": 4})))


# ------------------------------------------------------------------------------------------------- the checklist
def test_the_checklist_is_v1_35_with_nine_musts_and_three_shoulds_each_with_a_rule() -> None:
    listed = checklist()
    assert listed.kubernetes_version == "v1.35"
    levels = [r.level for r in listed.requirements]
    assert levels.count("MUST") == 9 and levels.count("SHOULD") == 3
    assert listed.categories == (
        "accelerators",
        "networking",
        "schedulingOrchestration",
        "observability",
        "security",
        "operator",
    )
    assert set(RULES) == {r.id for r in listed.requirements}


# ------------------------------------------------------------------------------------------- the rules, one by one
def test_dra_is_implemented_only_with_the_dra_driver() -> None:
    assert status(with_addons(INFERENCE, **{DRA_DRIVER: True}), "dra_support") == "Implemented"
    off = finding(with_addons(INFERENCE, **{DRA_DRIVER: False}), "dra_support")
    assert off.status == "Partially Implemented" and off.missing == (DRA_DRIVER,)
    assert "resource.k8s.io/v1" in off.notes and "gpuAllocation: dra" in off.notes


def test_dra_before_1_34_is_not_implemented() -> None:
    old = dataclasses.replace(
        INFERENCE,
        spec=INFERENCE.spec.model_copy(
            update={"cluster": INFERENCE.spec.cluster.model_copy(update={"kubernetes_version": "1.33"})}
        ),
    )
    assert status(old, "dra_support") == "Not Implemented"


def test_ai_inference_follows_the_gateway_add_on() -> None:
    assert status(with_addons(INFERENCE, **{GATEWAY: True}), "ai_inference") == "Implemented"
    off = finding(with_addons(INFERENCE, **{GATEWAY: False}), "ai_inference")
    assert off.status == "Not Implemented" and off.missing == (GATEWAY,)


@pytest.mark.parametrize(
    ("requirement", "addon", "missing"),
    [
        ("gang_scheduling", {"kueue": False}, ("kueue",)),
        ("pod_autoscaling", {"keda": False}, ("keda",)),
        ("ai_service_metrics", {"dcgm_prometheus": False}, ("dcgm-prometheus",)),
        ("accelerator_metrics", {"dcgm_prometheus": False, "container_insights": False}, ("dcgm-prometheus",)),
        ("robust_controller", {"kueue": False, "jobset": False}, ("kueue", "jobset")),
    ],
)
def test_a_must_without_its_add_on_is_not_implemented_and_names_it(
    requirement: str, addon: dict[str, bool], missing: tuple[str, ...]
) -> None:
    on = with_addons(INFERENCE, **{k: True for k in addon})
    off = finding(with_addons(INFERENCE, **addon), requirement)
    assert status(on, requirement) == "Implemented"
    assert (off.status, off.missing) == ("Not Implemented", missing)


def test_either_metrics_path_meets_accelerator_metrics_but_only_prometheus_meets_service_metrics() -> None:
    insights = with_addons(INFERENCE, dcgm_prometheus=False, container_insights=True)
    assert status(insights, "accelerator_metrics") == "Implemented"
    assert status(insights, "ai_service_metrics") == "Not Implemented"


def test_robust_controller_is_met_by_jobset_alone() -> None:
    assert status(with_addons(INFERENCE, kueue=False, jobset=True), "robust_controller") == "Implemented"


def test_cluster_autoscaling_names_the_gpu_pools_that_scale_from_zero() -> None:
    found = finding(INFERENCE, "cluster_autoscaling")
    assert found.status == "Implemented" and "l40s" in found.notes and "scale from zero" in found.notes


def test_cluster_autoscaling_without_an_autoscaler_is_na_with_a_reason() -> None:
    fixed_pool = pool(INFERENCE_POOL, scaling={"min": 2, "max": 2})
    fixed = plan_stack(addon_stack(SYSTEM_POOL, fixed_pool, addons={"clusterAutoscaler": {"enabled": "off"}}))
    found = finding(fixed, "cluster_autoscaling")
    assert found.status == "N/A" and found.met and "condition" in found.notes


def test_cluster_autoscaling_that_resizes_no_gpu_pool_is_not_implemented() -> None:
    scaled_cpu = with_addons(
        plan_stack(addon_stack(SYSTEM_POOL, pool(INFERENCE_POOL, scaling={"min": 2, "max": 2}))),
        cluster_autoscaler=True,
    )
    assert status(scaled_cpu, "cluster_autoscaling") == "Not Implemented"


def test_secure_access_needs_every_workload_namespace_restricted() -> None:
    plan = shipped_plan("inference")
    assert status(plan, "secure_accelerator_access") == "Implemented"
    loose = [dataclasses.replace(n, level="baseline") if n.workload else n for n in plan.namespaces]
    found = finding(dataclasses.replace(plan, namespaces=loose), "secure_accelerator_access")
    assert found.status == "Partially Implemented"
    assert all(n.name in found.notes for n in loose if n.workload)


def test_gpu_sharing_names_the_pools_that_share() -> None:
    sliced = plan_stack(addon_stack(SYSTEM_POOL, pool(INFERENCE_POOL, devicePlugin={"timeSlicingReplicas": 4})))
    assert "time-slicing on l40s" in finding(sliced, "gpu_sharing").notes
    assert "no pool of this stack shares" in finding(INFERENCE, "gpu_sharing").notes


def test_virtualized_accelerators_are_na_with_the_reason() -> None:
    found = finding(INFERENCE, "virtualized_accelerator")
    assert found.status == "N/A" and "whole physical GPUs" in found.notes and "bare metal" in found.notes


def test_every_assessment_uses_a_checklist_status_and_points_first_to_its_section() -> None:
    for a in assess(INFERENCE):
        assert a.status in STATUSES
        assert a.evidence[0] == f"docs/conformance.md#{a.requirement.id}"


# -------------------------------------------------------------------------------- the autoscaling test's pool
def test_the_autoscaling_target_is_the_autoscaled_gpu_pool_with_fewest_gpus() -> None:
    small = {**INFERENCE_POOL, "name": "small", "instanceType": "g6e.xlarge", "scaling": {"min": 1, "max": 3}}
    plan = plan_stack(addon_stack(SYSTEM_POOL, pool(TRAINING_POOL, scaling={"min": 0, "max": 2}), small))
    target = autoscaling_target(plan)
    assert target is not None
    assert (target.pool, target.label, target.allocation_mode) == ("small", "gpu-clusters/pool=small", "device-plugin")
    assert (target.min_nodes, target.max_nodes) == (1, 3)
    assert autoscaling_target(with_addons(plan, cluster_autoscaler=False)) is None


# ------------------------------------------------------------------------------------ the shipped stacks, in CI
def evidence_targets(stack: str) -> list[str]:
    return [e for a in assess(shipped_plan(stack)) for e in a.evidence]


def _anchors(path: Path) -> set[str]:
    headings = [line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")]
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("stack", SHIPPED)
def test_every_evidence_link_is_a_doc_section_that_exists(stack: str) -> None:
    broken = []
    for target in evidence_targets(stack):
        path, _, anchor = target.partition("#")
        if not (ROOT / path).exists() or (anchor and anchor not in _anchors(ROOT / path)):
            broken.append(target)
    assert not broken


@pytest.mark.parametrize("stack", SHIPPED)
def test_product_yaml_of_each_shipped_stack_says_what_its_plan_says(stack: str, blueprint_cli: Any) -> None:
    """The PRODUCT.yaml carries the checklist's ids, descriptions and levels unchanged, in its categories, with
    the plan's status for each; every MUST is Implemented, N/A with a reason, or names the add-on that would meet
    it (the add-ons other branches bring: nvidia-dra-driver-gpu, envoy-gateway)."""
    result = blueprint_cli("conformance", "--stack", stack)
    assert result.returncode == OK
    document = yaml.safe_load(result.stdout)
    assert document["metadata"]["kubernetesVersion"] == "v1.35"
    assert document["metadata"]["platformName"] == f"gpu-clusters ({stack} stack)"
    written = [(category, r) for category, items in document["spec"].items() for r in items]
    expected = assess(shipped_plan(stack))
    assert [(c, r["id"], r["description"], r["level"]) for c, r in written] == [
        (a.requirement.category, a.requirement.id, a.requirement.description, a.requirement.level) for a in expected
    ]
    assert [(r["status"], r["notes"]) for _, r in written] == [(a.status, a.notes) for a in expected]
    for a in expected:
        if a.requirement.level == "MUST":
            assert a.met or a.missing, a.requirement.id
        if a.status == "N/A":
            assert a.notes
    for a in unmet_musts(expected):
        assert f"MUST {a.requirement.id} is {a.status}" in result.stderr


#: What each shipped stack still lacks for every MUST, by add-on: the DRA driver and the Gateway come with the
#: `dra` and `gateway` branches (a stack meets dra_support once one of its GPU pools sets `gpuAllocation: dra`);
#: training and smoke also have no serving workload (KEDA) and no Prometheus path.
STILL_MISSING = {
    "training": "nvidia-dra-driver-gpu, envoy-gateway, keda, dcgm-prometheus",
    "inference": "nvidia-dra-driver-gpu, envoy-gateway",
    "hybrid": "nvidia-dra-driver-gpu, envoy-gateway",
    "smoke": "nvidia-dra-driver-gpu, envoy-gateway, keda, dcgm-prometheus",
}


@pytest.mark.parametrize(
    "stack",
    [
        pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=f"needs {STILL_MISSING[s]}"))
        if s in STILL_MISSING
        else s
        for s in SHIPPED
    ],
)
def test_every_shipped_stack_meets_every_must(stack: str) -> None:
    assert [a.requirement.id for a in unmet_musts(assess(shipped_plan(stack)))] == []


def test_the_missing_add_ons_named_above_are_the_plans() -> None:
    """The xfail reasons stay true: each names exactly what the plan says the stack lacks."""
    for stack, reason in STILL_MISSING.items():
        missing = {m for a in unmet_musts(assess(shipped_plan(stack))) for m in a.missing}
        assert missing == set(reason.split(", ")), stack


# -------------------------------------------------------------------------------------------- PRODUCT.yaml itself
def test_metadata_keeps_the_checklists_order_and_placeholders(blueprint_cli: Any) -> None:
    document = yaml.safe_load(blueprint_cli("conformance", "--stack", "inference").stdout)
    meta = document["metadata"]
    assert list(meta) == list(product.METADATA_PLACEHOLDERS)
    assert meta["platformVersion"] == product.read_project().version
    assert meta["vendorName"] == "[Vendor Name]" and meta["k8sConformanceUrl"].startswith("[")


def test_given_metadata_and_a_repository_turn_evidence_into_urls(blueprint_cli: Any) -> None:
    repo = "https://github.com/example/gpu-clusters"
    result = blueprint_cli(
        "conformance", "--stack", "inference", "--metadata", f"repoUrl={repo}", "--metadata", "vendorName=Example"
    )
    document = yaml.safe_load(result.stdout)
    assert document["metadata"]["vendorName"] == "Example"
    assert document["metadata"]["repoUrl"] == repo
    assert document["metadata"]["documentationUrl"] == f"{repo}/blob/main/docs/conformance.md"
    evidence = [e for items in document["spec"].values() for r in items for e in r["evidence"]]
    assert evidence and all(e.startswith(f"{repo}/blob/main/docs/") for e in evidence)


def test_the_file_is_the_same_every_time_and_write_writes_it(blueprint_cli: Any, tmp_path: Path) -> None:
    first = blueprint_cli("conformance", "--stack", "hybrid").stdout
    assert blueprint_cli("conformance", "--stack", "hybrid").stdout == first
    target = tmp_path / "v1.35" / "gpu-clusters" / "PRODUCT.yaml"
    result = blueprint_cli("conformance", "--stack", "hybrid", "--write", str(target))
    assert result.returncode == OK and result.stdout == ""
    assert target.read_text() == first


def test_check_exits_1_while_a_must_is_unmet(blueprint_cli: Any) -> None:
    assert blueprint_cli("conformance", "--stack", "inference", "--check").returncode == (
        FAILED if unmet_musts(assess(shipped_plan("inference"))) else OK
    )


def test_an_unknown_metadata_field_is_a_usage_error(blueprint_cli: Any) -> None:
    result = blueprint_cli("conformance", "--stack", "inference", "--metadata", "vendor=Example")
    assert result.returncode == USAGE and "vendor=Example" in result.stderr and "vendorName" in result.stderr


def test_a_stack_on_another_kubernetes_version_has_no_checklist(blueprint_cli: Any, tmp_path: Path) -> None:
    text = (ROOT / "stacks" / "Pulumi.smoke.yaml").read_text()
    config = tmp_path / "Pulumi.old.yaml"
    config.write_text(re.sub(r"kubernetesVersion: \"?1\.35\"?", 'kubernetesVersion: "1.34"', text))
    assert "1.34" in config.read_text()
    result = blueprint_cli("conformance", "--config", str(config))
    assert result.returncode == CONFIG and "v1.34" in result.stderr
