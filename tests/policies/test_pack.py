"""The pack as the Pulumi engine loads it: metadata of every policy, the shipped config, the project files, and a
`__main__.py` that does nothing but build the `PolicyPack`."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest
import yaml
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.policy import _PolicyAnalyzerServicer

from components import config
from policies import pack

PACK_DIR = Path(pack.__file__).parent
LEVELS = {EnforcementLevel.MANDATORY, EnforcementLevel.ADVISORY, EnforcementLevel.DISABLED}


def test_every_policy_has_a_kebab_case_name_description_and_level() -> None:
    names = [p.name for p in pack.POLICIES]
    assert len(names) == len(set(names))
    for policy in pack.POLICIES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", policy.name), policy.name
        assert isinstance(policy, ResourceValidationPolicy | StackValidationPolicy)
        assert len(policy.description) > 30 and "\n" not in policy.description, policy.name
        assert policy.enforcement_level in LEVELS, policy.name


def test_policies_that_take_parameters_have_a_schema_with_the_shipped_defaults() -> None:
    for policy in pack.POLICIES:
        params = {k: v for k, v in pack.DEFAULT_CONFIG[policy.name].items() if k != "enforcementLevel"}
        if not params:
            assert policy.config_schema is None, policy.name
            continue
        assert policy.config_schema is not None, policy.name
        properties = policy.config_schema.properties
        assert set(properties) == set(params), policy.name
        for key, value in params.items():
            assert properties[key]["default"] == value
            assert properties[key]["description"]


def test_parameter_ranges_accept_what_the_stack_config_accepts() -> None:
    """A stack the config accepts is never refused by a parameter range alone: both read the same bounds."""
    by_name = {p.name: p.config_schema for p in pack.POLICIES}
    logging, hops, retention = (
        by_name["eks-control-plane-logging"],
        by_name["imdsv2-required"],
        by_name["log-group-retention"],
    )
    assert logging is not None and hops is not None and retention is not None
    assert logging.properties["requiredLogTypes"]["items"]["enum"] == list(config.DEFAULT_LOG_TYPES)
    assert hops.properties["maxHopLimit"]["maximum"] == config.NodePool.model_fields["imds_hop_limit"].metadata[1].le
    assert retention.properties["minRetentionDays"]["maximum"] == max(get_args(config.LogRetentionDays))


def test_the_shipped_config_covers_every_policy_and_nothing_else() -> None:
    config = json.loads((PACK_DIR / "policy-config.json").read_text())
    assert set(config) == {p.name for p in pack.POLICIES}
    assert all(EnforcementLevel(entry["enforcementLevel"]) in LEVELS for entry in config.values())


def test_taste_rules_are_advisory_and_the_rest_mandatory() -> None:
    """Advisory: a performance recommendation, alarms watched some other way, a customer-managed key where the
    service already encrypts (log groups), and the report of exceptions (a record, not a failure)."""
    advisory = {p.name for p in pack.POLICIES if p.enforcement_level == EnforcementLevel.ADVISORY}
    assert advisory == {"efa-placement-group", "alarms-notify-someone", "log-group-encrypted", "policy-exceptions"}


def test_the_sdk_describes_the_pack_to_the_engine() -> None:
    """GetAnalyzerInfo is what the CLI asks first; schemas must convert to protobuf (private API, pinned SDK)."""
    servicer = _PolicyAnalyzerServicer(pack.PACK_NAME, "0.1.0", pack.POLICIES, EnforcementLevel.ADVISORY)
    info = servicer.GetAnalyzerInfo(None, None)
    assert [p.name for p in info.policies] == [p.name for p in pack.POLICIES]
    budget = next(p for p in info.policies if p.name == "gpu-budget")
    assert set(budget.configSchema.properties) == {"maxGpus", "maxUsdPerHour"}


def test_importing_the_pack_module_builds_no_policy_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("PolicyPack() serves forever; policies.pack must not build one")

    monkeypatch.setattr("pulumi_policy.PolicyPack", refuse)
    importlib.reload(sys.modules["policies.pack"])


def test_main_only_builds_the_policy_pack() -> None:
    tree = ast.parse((PACK_DIR / "__main__.py").read_text())
    body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    # Imports, and the one statement that puts the checkout on the path for them.
    bootstrap = [node for node in body[:-1] if not isinstance(node, ast.Import | ast.ImportFrom)]
    path_insert = "sys.path.insert(0, str(Path(__file__).resolve().parent.parent))"
    assert [ast.unparse(node) for node in bootstrap] == [path_insert]
    last = body[-1]
    assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
    assert isinstance(last.value.func, ast.Name) and last.value.func.id == "PolicyPack"
    keywords = {k.arg: k.value for k in last.value.keywords}
    assert isinstance(keywords["policies"], ast.Name) and keywords["policies"].id == "POLICIES"


def test_pulumi_policy_yaml_names_a_python_runtime_with_its_own_virtualenv() -> None:
    project = yaml.safe_load((PACK_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == "venv"
    assert re.fullmatch(r"\d+\.\d+\.\d+", project["version"])
    assert project["description"]


@pytest.mark.program
def test_the_pack_runs_from_the_checkout_without_the_project_installed() -> None:
    """Its virtualenv holds only the lock (requirements.txt); the engine runs the directory (pulumi.policy's
    `runpy.run_path`), and the pack finds `components` and `policies` one directory up."""
    script = """
import runpy, sys
sys.meta_path = [finder for finder in sys.meta_path if "editable" not in repr(finder)]
sys.path = [entry for entry in sys.path if entry not in ("", ROOT)]
import pulumi_policy
pulumi_policy.PolicyPack = lambda **kw: print(kw["name"], len(kw["policies"]))
runpy.run_path(PACK, run_name="__main__")
"""
    root = str(PACK_DIR.parent)
    result = subprocess.run(
        [sys.executable, "-c", f"ROOT, PACK = {root!r}, {str(PACK_DIR)!r}\n{script}"],
        cwd=PACK_DIR.parent.parent,
        capture_output=True,
        text=True,
        env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [pack.PACK_NAME, str(len(pack.POLICIES))]
