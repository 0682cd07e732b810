"""`blueprint.plan.check`: the pack over plan records, enforcement levels and parameters from policy config,
the deliberately broken fixture, and the three output formats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pulumi_policy import ResourceValidationPolicy
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

import blueprint.plan.check as check_module
from blueprint.plan.check import check, format_violations, has_mandatory, load_config
from policies.pack import DEFAULT_CONFIG, POLICIES
from tests.policies.stacks import find, good_stack

BROKEN = Path(__file__).with_name("fixtures") / "broken_plan.json"

#: Every (policy, resource) the broken fixture must be reported for, and nothing more; "" is the stack itself.
EXPECTED_BROKEN = {
    ("eks-endpoint-private", "broken"),
    ("training-namespaces-queued", "broken-ns-serving"),
    ("eks-control-plane-logging", "broken"),
    ("eks-secrets-encryption", "broken"),
    ("no-public-ingress", "broken-efa"),
    ("s3-tls-only", "broken-checkpoints"),
    ("no-public-ingress-combined", "broken-efa"),
    ("iam-no-escalation-on-any-resource", "broken-controller"),
    ("iam-cross-account-external-id", "broken-partner"),
    ("resource-policy-no-open-principal", "broken-interruptions"),
    ("k8s-namespace-pod-security", "broken-ns-serving"),
    ("k8s-service-exposure", "broken-chat"),
    ("k8s-pod-host-access", "broken-chat"),
    ("efa-security-group-self-referencing", "broken-efa"),
    ("efa-interfaces-complete", "broken-train-lt"),
    ("imdsv2-required", "broken-train-lt"),
    ("no-public-ip", "broken-train-lt"),
    ("encrypted-root-volume", "broken-train-lt"),
    ("efa-pool-single-az", "broken-train"),
    ("efa-placement-group", "broken-train"),
    ("efa-device-plugin-deployed", "broken-train"),
    ("efa-jobs-request-every-device", "broken-job"),
    ("gpu-pools-tainted-and-tolerated", "broken-train"),
    ("spot-instance-diversification", "broken-infer"),
    ("spot-capacity-rebalance", "broken-infer"),
    ("spot-interruption-handler", "broken-infer"),
    ("helm-chart-pinned", "nvidia-device-plugin"),
    ("storage-encrypted", "broken-scratch"),
    ("lustre-valid-size", "broken-scratch"),
    ("storage-encrypted", "broken-models"),
    ("cost-allocation-tags", "broken-models"),
    ("stateful-resources-protected", "broken-checkpoints"),
    ("s3-bucket-hardened", "broken-checkpoints"),
    ("gpu-budget", ""),
    ("alarms-notify-someone", "broken-gpu-idle"),
    ("no-world-admin-ports", "broken-efa"),
    ("imds-hop-limit-justified", "broken-train-lt"),
    ("imds-hop-limit-justified", "broken-infer-lt"),
    ("no-secrets-in-user-data", "broken-infer-lt"),
    ("vpc-flow-logs", "broken-vpc"),
    ("default-security-group-closed", "broken-vpc"),
    ("policy-exceptions", "broken-vpc"),
    ("iam-trust-source-conditions", "broken-controller"),
    ("iam-no-unscoped-create-delete", "broken-controller"),
    ("kms-key-rotation", "broken-logs-key"),
    ("sqs-queue-encrypted", "broken-interruptions"),
    ("sns-topic-encrypted", "broken-alerts"),
    ("log-group-encrypted", "broken-control-plane"),
    ("log-group-retention", "broken-control-plane"),
    ("eks-log-group-declared", "broken"),
}
#: Policies that report without failing `blueprint check`.
ADVISORY = {"efa-placement-group", "alarms-notify-someone", "log-group-encrypted", "policy-exceptions"}


def broken_plan() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(BROKEN.read_text())
    return records


def pairs(violations: list[dict[str, str]]) -> set[tuple[str, str]]:
    return {(v["policy"], v["resource"]) for v in violations}


def test_broken_fixture_reports_exactly_the_expected_violations() -> None:
    violations = check(broken_plan())
    assert pairs(violations) == EXPECTED_BROKEN
    assert {v["level"] for v in violations if v["policy"] in ADVISORY} == {"advisory"}
    assert all(v["level"] == "mandatory" for v in violations if v["policy"] not in ADVISORY)
    assert has_mandatory(violations)


def test_each_resource_policy_runs_on_its_own_types_and_finds_what_running_on_every_record_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resource_policies = {p.name for p in POLICIES if isinstance(p, ResourceValidationPolicy)}
    assert set(check_module.RESOURCE_TYPES) == resource_policies
    dispatched = [check(broken_plan()), check(good_stack())]
    monkeypatch.setattr(check_module, "RESOURCE_TYPES", {})  # every policy on every record, as the engine calls them
    assert [check(broken_plan()), check(good_stack())] == dispatched
    assert pairs(dispatched[0]) == EXPECTED_BROKEN


def test_broken_fixture_names_rule_and_resource_in_every_format() -> None:
    violations = check(broken_plan())
    table = format_violations(violations, "table")
    assert "imdsv2-required" in table and "broken-train-lt" in table
    mandatory = sum(v["policy"] not in ADVISORY for v in violations)
    assert table.endswith(f"{len(violations)} policy violation(s), {mandatory} mandatory")
    assert json.loads(format_violations(violations, "json")) == violations
    markdown = format_violations(violations, "markdown").splitlines()
    assert markdown[2] == "| level | policy | resource | message |"
    assert len(markdown) == 4 + len(violations)
    assert "| mandatory | no-public-ingress | broken-efa |" in "\n".join(markdown)


def test_markdown_escapes_pipes_and_table_names_the_stack() -> None:
    violation = {"policy": "gpu-budget", "level": "mandatory", "urn": "", "resource": "", "message": "a | b"}
    assert "a \\| b" in format_violations([violation], "markdown")
    assert "(stack)" in format_violations([violation], "table")
    with pytest.raises(ValueError, match="unknown format"):
        format_violations([violation], "yaml")  # type: ignore[arg-type]


def test_compliant_stack_has_no_violations() -> None:
    violations = check(good_stack())
    assert violations == []
    assert format_violations(violations, "markdown") == "No policy violations."
    assert not has_mandatory(violations)


def test_all_advisory_demotes_every_violation() -> None:
    violations = check(broken_plan(), {"all": "advisory"})
    assert pairs(violations) == EXPECTED_BROKEN
    assert {v["level"] for v in violations} == {"advisory"}
    assert not has_mandatory(violations)


def test_a_policy_entry_overrides_all_as_the_cli_does() -> None:
    violations = check(broken_plan(), {"all": "disabled", "no-public-ip": "mandatory"})
    assert pairs(violations) == {("no-public-ip", "broken-train-lt")}
    violations = check(broken_plan(), {"all": "mandatory", "no-public-ip": {"enforcementLevel": "advisory"}})
    assert {v["level"] for v in violations if v["policy"] == "no-public-ip"} == {"advisory"}
    assert {v["level"] for v in violations if v["policy"] == "efa-placement-group"} == {"mandatory"}


def test_disabled_policies_do_not_run() -> None:
    violations = check(
        broken_plan(), {"gpu-budget": "disabled", "s3-bucket-hardened": {"enforcementLevel": "disabled"}}
    )
    assert pairs(violations) == EXPECTED_BROKEN - {("gpu-budget", ""), ("s3-bucket-hardened", "broken-checkpoints")}


def test_remediate_reports_as_mandatory() -> None:
    violations = check(broken_plan(), {"all": "advisory", "no-public-ip": "remediate"})
    assert {v["level"] for v in violations if v["policy"] == "no-public-ip"} == {"mandatory"}


def test_parameters_come_from_the_config() -> None:
    generous = {"gpu-budget": {"maxGpus": 1000, "maxUsdPerHour": 5000}}
    assert ("gpu-budget", "") not in pairs(check(broken_plan(), generous))
    strict = {"gpu-budget": {"maxGpus": 8}}
    assert [v["message"] for v in check(good_stack(), strict)] == [
        "the node pools reach 48 GPUs at maximum size; the budget is 8"
    ]


def test_an_empty_config_applies_the_schema_defaults_like_the_cli() -> None:
    assert check(broken_plan(), {}) == check(broken_plan())


def test_load_config_reads_the_shipped_file_and_others(tmp_path: Path) -> None:
    assert load_config(None) == DEFAULT_CONFIG
    path = tmp_path / "policy-config.json"
    path.write_text(json.dumps({"all": "advisory", "gpu-budget": {"maxGpus": 4}}))
    assert load_config(path) == {"all": "advisory", "gpu-budget": {"maxGpus": 4}}


@pytest.mark.parametrize(
    "config, problem",
    [
        ({"no-publc-ip": "mandatory"}, "unknown policy 'no-publc-ip'"),
        ({"no-public-ip": "fatal"}, "enforcement level 'fatal' is not one of"),
        ({"gpu-budget": {"enforcementLevel": "mandatoryy"}}, "enforcement level 'mandatoryy'"),
    ],
)
def test_bad_configs_are_rejected(tmp_path: Path, config: dict[str, Any], problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ValueError, match=problem):
        load_config(path)
    with pytest.raises(ValueError, match=problem):
        check(good_stack(), config)


def test_unknown_values_become_an_advisory_note_as_in_a_preview() -> None:
    records = good_stack()
    find(records, "good-train-lt")["inputs"]["metadataOptions"]["httpTokens"] = UNKNOWN_STRING_VALUE
    notes = [v for v in check(records) if v["policy"] == "imdsv2-required"]
    assert [(n["level"], n["resource"]) for n in notes] == [("advisory", "good-train-lt")]
    assert "can't run policy 'imdsv2-required' during preview" in notes[0]["message"]


def test_stateful_protection_is_read_from_record_options() -> None:
    records = good_stack()
    find(records, "good-lustre")["options"]["protect"] = False
    assert pairs(check(records)) == {("stateful-resources-protected", "good-lustre")}


def test_every_policy_runs_in_the_checker() -> None:
    """The broken fixture and the unit tests together reach every policy of the pack."""
    assert {p for p, _ in EXPECTED_BROKEN} == {p.name for p in POLICIES}
