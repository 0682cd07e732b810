"""Kubernetes AI Conformance: each requirement's status from the plan (components/planning/conformance.py), the
PRODUCT.yaml `blueprint conformance` writes, and the shipped stacks against every MUST (docs/conformance.md)."""

from __future__ import annotations

import copy
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
from components.yaml_loader import parse_yaml
from tests.builders import INFERENCE_POOL, SYSTEM_POOL, TRAINING_POOL, CliResult, addon_stack, pool

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


@cache
def inference_on_dra() -> StackPlan:
    """The shipped inference stack with its `l40s` pool allocating through DRA (it ships on the device plugin)."""
    files = load_stack("inference")
    config = copy.deepcopy(dict(files.config))
    next(p for p in config["gpu-clusters:nodePools"] if p["name"] == "l40s")["gpuAllocation"] = "dra"
    return plan_stack(validate_config(config, files.project))


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
def test_dra_support_is_the_api_the_driver_only_adds_devices() -> None:
    """KAR-0051's test is the Kubernetes conformance DRA CRUD tests of resource.k8s.io/v1, which pass on 1.35
    without a driver; the notes say whether a driver publishes GPUs ([AICONFDRA])."""
    with_driver = finding(inference_on_dra(), "dra_support")
    assert with_driver.status == "Implemented" and "publishes the GPUs of l40s" in with_driver.notes
    without = finding(INFERENCE, "dra_support")
    assert without.status == "Implemented" and without.missing == ()
    assert "resource.k8s.io/v1" in without.notes and "gpuAllocation: dra" in without.notes


def test_dra_before_1_34_is_not_implemented() -> None:
    old = dataclasses.replace(
        INFERENCE,
        spec=INFERENCE.spec.model_copy(
            update={"cluster": INFERENCE.spec.cluster.model_copy(update={"kubernetes_version": "1.33"})}
        ),
    )
    assert status(old, "dra_support") == "Not Implemented"


def test_ai_inference_follows_the_gateway_add_on() -> None:
    serving = shipped_plan("inference")
    assert status(serving, "ai_inference") == "Implemented"
    off = finding(with_addons(serving, **{GATEWAY: False}), "ai_inference")
    assert off.status == "Not Implemented" and off.missing == (GATEWAY,) and "gateway.expose: false" in off.notes


@pytest.mark.parametrize("requirement", ["ai_inference", "pod_autoscaling"])
def test_a_stack_that_serves_no_models_answers_the_serving_musts_na_and_is_not_submitted(requirement: str) -> None:
    found = finding(INFERENCE, requirement)
    assert found.status == "N/A" and found.met
    assert "serves no models" in found.notes and "not the submitted configuration" in found.notes


def test_service_metrics_are_na_only_on_a_stack_without_workloads() -> None:
    bare = with_addons(INFERENCE, dcgm_prometheus=False, container_insights=True)
    assert status(bare, "ai_service_metrics") == "N/A"
    serving = with_addons(shipped_plan("inference"), dcgm_prometheus=False, container_insights=True)
    assert status(serving, "ai_service_metrics") == "Not Implemented"


def test_gang_scheduling_needs_a_queue_that_counts_gpus() -> None:
    """On a stack whose GPU pools all allocate through DRA, Kueue runs but no queue holds a GPU quota (Kueue 0.19.2
    counts claims only behind an alpha gate): partial, and the notes say why."""
    found = finding(inference_on_dra(), "gang_scheduling")
    assert found.status == "Partially Implemented" and "alpha feature gate" in found.notes
    assert status(INFERENCE, "gang_scheduling") == "Implemented"


def test_driver_runtime_management_is_the_verify_drivers_check() -> None:
    found = finding(INFERENCE, "driver_runtime_management")
    assert found.status == "Implemented" and "drivers check" in found.notes and "toolkit" in found.notes
    assert "docs/operations.md#driver-and-runtime-versions" in found.evidence


@pytest.mark.parametrize(
    ("requirement", "addon", "missing"),
    [
        ("gang_scheduling", {"kueue": False}, ("kueue",)),
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
    insights = with_addons(shipped_plan("inference"), dcgm_prometheus=False, container_insights=True)
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


#: `blueprint conformance --stack <stack>` by stack, run once per module: several tests read the same printout
#: (a `CliResult` is text only, so no test can change what another reads).
_PRINTED: dict[str, CliResult] = {}


def printed(stack: str, blueprint_cli: Any) -> CliResult:
    """What `blueprint conformance --stack <stack>` prints, exit code and both streams."""
    if stack not in _PRINTED:
        _PRINTED[stack] = blueprint_cli("conformance", "--stack", stack)
    return _PRINTED[stack]


@pytest.mark.parametrize("stack", SHIPPED)
def test_product_yaml_of_each_shipped_stack_says_what_its_plan_says(stack: str, blueprint_cli: Any) -> None:
    """The PRODUCT.yaml carries the checklist's ids, descriptions and levels unchanged, in its categories, with
    the plan's status for each; every MUST is Implemented, N/A with a reason, or says in its notes why not."""
    result = printed(stack, blueprint_cli)
    assert result.returncode == OK
    document = parse_yaml(result.stdout)
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
            assert a.met or a.notes, a.requirement.id
        if a.status == "N/A":
            assert a.notes
    for a in unmet_musts(expected):
        assert f"MUST {a.requirement.id} is {a.status}" in result.stderr


#: The MUSTs a shipped stack does not meet, each with the decision in docs/conformance.md: none today (the inference
#: stack's pool stays on the device plugin, whose GPUs Kueue counts, see `inference_on_dra`).
SHORTFALLS: dict[str, set[str]] = {}
#: The stack whose PRODUCT.yaml is submitted (docs/conformance.md#the-submitted-configuration).
SUBMITTED = "hybrid"


@pytest.mark.parametrize("stack", SHIPPED)
def test_every_shipped_stack_meets_every_must_or_says_why_not(stack: str) -> None:
    """Each MUST is Implemented, or N/A with a reason; the only exceptions are the shortfalls named above, so a MUST
    that regresses (or a shortfall fixed without updating the docs) fails here."""
    assessments = assess(shipped_plan(stack))
    assert {a.requirement.id for a in unmet_musts(assessments)} == SHORTFALLS.get(stack, set())
    for a in assessments:
        if a.status == "N/A":
            assert a.notes.strip(), a.requirement.id


def test_the_submitted_configuration_implements_every_must() -> None:
    """The CNCF validator refuses a MUST that is not Implemented, N/A included ([AIVALIDATE])."""
    musts = [a for a in assess(shipped_plan(SUBMITTED)) if a.requirement.level == "MUST"]
    assert [a.requirement.id for a in musts if a.status != "Implemented"] == []


def test_the_submission_run_puts_the_burst_pool_on_dra_and_still_implements_every_must() -> None:
    """The upstream suite's test needs a DRA driver's devices on a node: the submission run sets the hybrid stack's
    burst pool to `gpuAllocation: dra` with one node kept (docs/conformance.md#the-submitted-configuration)."""
    files = load_stack(SUBMITTED)
    config = copy.deepcopy(dict(files.config))
    pools = config["gpu-clusters:nodePools"]
    burst = next(p for p in pools if p["name"] == "burst")
    burst.update(gpuAllocation="dra", scaling={**burst["scaling"], "min": 1})
    plan = plan_stack(validate_config(config, files.project))
    musts = [a for a in assess(plan) if a.requirement.level == "MUST"]
    assert [a.requirement.id for a in musts if a.status != "Implemented"] == []
    assert plan.addons.on(DRA_DRIVER)
    assert "burst" in finding(plan, "dra_support").notes


def _status_table() -> dict[str, dict[str, str]]:
    """The per-stack status table of docs/conformance.md: requirement -> stack -> status."""
    text = (ROOT / "docs" / "conformance.md").read_text()
    section = text.split("## Status per shipped stack", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    table: dict[str, dict[str, str]] = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        requirement = cells[0].split("`")[1]
        table[requirement] = {header[i]: cells[i] for i in range(2, len(header))}
    return table


def test_the_docs_status_table_is_the_generated_product_yaml(blueprint_cli: Any) -> None:
    table = _status_table()
    assert set(table) == {r.id for r in checklist().requirements}
    for stack in SHIPPED:
        document = parse_yaml(printed(stack, blueprint_cli).stdout)
        written = {r["id"]: r["status"] for items in document["spec"].values() for r in items}
        assert {requirement: row[stack] for requirement, row in table.items()} == written, stack


# -------------------------------------------------------------------------------------------- PRODUCT.yaml itself
def test_metadata_keeps_the_checklists_order_and_placeholders(blueprint_cli: Any) -> None:
    document = parse_yaml(printed("inference", blueprint_cli).stdout)
    meta = document["metadata"]
    assert list(meta) == list(product.METADATA_PLACEHOLDERS)
    assert meta["platformVersion"] == product.read_project().version
    assert meta["vendorName"] == "[Vendor Name]" and meta["k8sConformanceUrl"].startswith("[")


def test_given_metadata_and_a_repository_turn_evidence_into_urls(blueprint_cli: Any) -> None:
    repo = "https://github.com/example/gpu-clusters"
    result = blueprint_cli(
        "conformance", "--stack", "inference", "--metadata", f"repoUrl={repo}", "--metadata", "vendorName=Example"
    )
    document = parse_yaml(result.stdout)
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


@pytest.mark.parametrize(
    "given",
    [
        {},
        {"vendorName": "Café 🚀 GmbH", "description": "one\x85two", "repoUrl": "https://example.com/a b#c"},
        {"description": "GPU clusters on EKS, " * 6 + "\tpasted with a tab"},
    ],
    ids=["placeholders", "given-text-libyaml-escapes", "long-given-text-libyaml-folds"],
)
def test_the_file_is_what_pyyamls_own_emitter_writes(given: dict[str, str]) -> None:
    """The file is written by libyaml's emitter (`components.yaml_loader.dump_yaml`), for speed: byte for byte what
    PyYAML's pure-Python emitter writes of the same document, also when given metadata makes a double-quoted scalar,
    which the two write differently (libyaml escapes characters PyYAML writes as they are, and folds long lines
    elsewhere)."""
    listed = checklist()
    plan = shipped_plan(SUBMITTED)
    project = product.read_project()
    meta = product.metadata(SUBMITTED, f"v{plan.spec.cluster.kubernetes_version}", project, given)
    document = product.product_document(listed, assess(plan, listed), meta, project.repository)
    text = product.render(document, SUBMITTED)
    assert text.endswith("\n" + yaml.safe_dump(dict(document), sort_keys=False, width=120, allow_unicode=True))


@pytest.mark.parametrize("stack", SHIPPED)
def test_check_exits_1_exactly_while_a_must_is_unmet(stack: str, blueprint_cli: Any) -> None:
    result = blueprint_cli("conformance", "--stack", stack, "--check")
    assert result.returncode == (FAILED if stack in SHORTFALLS else OK)
    for requirement in SHORTFALLS.get(stack, set()):
        assert f"MUST {requirement} is" in result.stderr


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
