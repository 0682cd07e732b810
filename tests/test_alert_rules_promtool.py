"""The shipped GPU alert rules evaluated by Prometheus's own engine (`promtool test rules`), not by string matching.

The rules file is the `additionalPrometheusRulesMap` of the inference stack's planned kube-prometheus-stack release.
Without promtool these tests skip with the reason, unless BLUEPRINT_REQUIRE_PROMTOOL is set (the CI `promql` step
sets it), where a missing promtool fails them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import shipped_plan

PROMTOOL = shutil.which("promtool")
REQUIRED = os.environ.get("BLUEPRINT_REQUIRE_PROMTOOL") == "1"

if PROMTOOL is None and not REQUIRED:
    pytest.skip(
        "promtool is not installed (Debian package `prometheus`); `.ci/run promql` installs it and runs these tests",
        allow_module_level=True,
    )

LABELS = 'gpu="0", Hostname="node-a"'
XID_SERIES = f"DCGM_FI_DEV_XID_ERRORS{{{LABELS}}}"


def shipped_rule_groups() -> list[dict[str, Any]]:
    release = next(
        r
        for r in shipped_plan("inference")["resources"]
        if r["type"] == "kubernetes:helm.sh/v3:Release" and r["name"].endswith("kube-prometheus-stack")
    )
    rules_map = release["inputs"]["values"]["additionalPrometheusRulesMap"]
    return [group for document in rules_map.values() for group in document["groups"]]


def promtool_test(tmp_path: Path, series: str, alerts_at: dict[str, list[dict[str, Any]]]) -> None:
    """Run one promtool unit test: `series` (expanding notation, one sample a minute) and the GpuXidError alerts
    expected at each evaluation time."""
    assert PROMTOOL is not None, "BLUEPRINT_REQUIRE_PROMTOOL is set but promtool is not installed"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": shipped_rule_groups()}))
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": XID_SERIES, "values": series}],
                "alert_rule_test": [
                    {"eval_time": at, "alertname": "GpuXidError", "exp_alerts": expected}
                    for at, expected in alerts_at.items()
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    result = subprocess.run(
        [PROMTOOL, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def xid_alert(code: int) -> list[dict[str, Any]]:
    return [
        {
            "exp_labels": {"severity": "critical", "gpu": "0", "Hostname": "node-a"},
            "exp_annotations": {"summary": f"GPU 0 on node-a reported XID {code}"},
        }
    ]


def test_the_shipped_rules_file_is_valid_promql(tmp_path: Path) -> None:
    assert PROMTOOL is not None, "BLUEPRINT_REQUIRE_PROMTOOL is set but promtool is not installed"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": shipped_rule_groups()}))
    result = subprocess.run([PROMTOOL, "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_xid_fires_on_a_new_code_and_resolves_after_the_window(tmp_path: Path) -> None:
    # 0 for 5 minutes, then XID 79 from minute 5 on and never cleared (the gauge keeps the last code).
    promtool_test(tmp_path, "0x4 79x40", {"4m": [], "6m": xid_alert(79), "14m": xid_alert(79), "16m": [], "40m": []})


def test_xid_fires_again_on_a_different_code(tmp_path: Path) -> None:
    promtool_test(tmp_path, "0x4 79x19 48x20", {"20m": [], "26m": xid_alert(48), "40m": []})


def test_xid_does_not_fire_on_a_steady_value(tmp_path: Path) -> None:
    # An XID seen before the window (a code left from earlier) and no XID at all: no alert either way.
    promtool_test(tmp_path, "13x60", {"15m": [], "30m": [], "59m": []})
    promtool_test(tmp_path, "0x60", {"15m": [], "59m": []})


# --------------------------------------------------------------------------------- the serving autoscaler's query
POD = 'exported_namespace="inference",exported_pod="chat-5d9f7c6b8-x2k9q",gpu="0"'
EXPORTER = f'DCGM_FI_DEV_GPU_UTIL{{job="dcgm-exporter",namespace="monitoring",{POD}}}'
#: Another scrape target (in a tenant's namespace) exporting the same metric about the serving pod.
FORGED = f'DCGM_FI_DEV_GPU_UTIL{{job="impostor",namespace="inference",{POD}}}'
REPLICAS = 'kube_deployment_spec_replicas{job="kube-state-metrics",namespace="inference",deployment="chat"}'


def shipped_scaling_query() -> str:
    (scaler,) = [
        r for r in shipped_plan("inference")["resources"] if r["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject"
    ]
    query: str = scaler["inputs"]["spec"]["triggers"][0]["metadata"]["query"]
    return query


def scaling_value(tmp_path: Path, exporter: str, forged: str | None, at: str = "40m") -> float:
    """What the shipped inference stack's ScaledObject query returns at `at` for these series (one sample a
    minute), by promtool's own engine: the expected value is found by trying the three the query can return."""
    assert PROMTOOL is not None, "BLUEPRINT_REQUIRE_PROMTOOL is set but promtool is not installed"
    series = [{"series": EXPORTER, "values": exporter}, {"series": REPLICAS, "values": "2+0x45"}]
    if forged is not None:
        series.append({"series": FORGED, "values": forged})
    for value in (0.0, 1.0, 34.0):  # scale in, hold, scale out (1 + max replicas 32 + 1)
        tests = {
            "rule_files": [],
            "evaluation_interval": "1m",
            "tests": [
                {
                    "interval": "1m",
                    "input_series": series,
                    "promql_expr_test": [
                        {
                            "expr": shipped_scaling_query(),
                            "eval_time": at,
                            "exp_samples": [{"labels": "{}", "value": value}],
                        }
                    ],
                }
            ],
        }
        (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
        result = subprocess.run(
            [PROMTOOL, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True, check=False
        )
        if result.returncode == 0:
            return value
    raise AssertionError(f"the query returned none of 0, 1, 34: {result.stdout}{result.stderr}")


def test_the_scaling_query_reads_the_exporter(tmp_path: Path) -> None:
    """Half an hour under 30% on the exporter's own series scales in; an hour-long 90% scales out."""
    assert scaling_value(tmp_path, "10+0x45", None) == 0.0
    assert scaling_value(tmp_path, "90+0x45", None) == 34.0


def test_another_target_cannot_forge_the_serving_pods_utilization(tmp_path: Path) -> None:
    """A target in the tenant's namespace exporting 0% for the serving pod would pull the average of a busy pod
    (50%) under the scale-in threshold; the query selects the exporter's own `job` and `namespace`, so it holds."""
    assert scaling_value(tmp_path, "50+0x45", "0+0x45") == 1.0
