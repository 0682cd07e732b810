"""MIG devices report no `DCGM_FI_DEV_GPU_UTIL` ([DCGMMIG]): the idle-spend alert and the dashboards' utilization
overview read graphics engine activity, which whole GPUs and MIG devices both report. The alert is evaluated by
Prometheus's own engine (`promtool test rules`) on series shaped like the exporter's MIG output."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.catalog.dashboards import DASHBOARDS_DIR
from components.config import Alerts
from components.planning.addons.monitoring import DCGM_COUNTERS, IDLE_METRIC, prometheus_rules

PROMTOOL = shutil.which("promtool")
REQUIRED = os.environ.get("BLUEPRINT_REQUIRE_PROMTOOL") == "1"
#: Two MIG devices of one H100, as dcgm-exporter labels them (`GPU_I_PROFILE`, `GPU_I_ID`): no GPU_UTIL series.
MIG_DEVICES = [f'{IDLE_METRIC}{{gpu="0",GPU_I_PROFILE="1g.10gb",GPU_I_ID="{i}",node="h100-a"}}' for i in (7, 8)]


def idle_rule() -> dict[str, Any]:
    (group,) = prometheus_rules(Alerts())["gpu-health"]["groups"]
    rule: dict[str, Any] = next(r for r in group["rules"] if r["alert"] == "GpuIdleSpend")
    return rule


def test_idle_spend_reads_a_metric_the_exporter_collects_for_mig_devices() -> None:
    assert IDLE_METRIC in idle_rule()["expr"] and "DCGM_FI_DEV_GPU_UTIL" not in idle_rule()["expr"]
    assert IDLE_METRIC in {field for field, _, _ in DCGM_COUNTERS}


def overview_panels() -> dict[str, str]:
    board = json.loads((Path(DASHBOARDS_DIR) / "gpus.json").read_text())
    return {p["title"]: p["targets"][0]["expr"] for p in board["panels"] if p.get("targets")}


@pytest.mark.parametrize("title", ["Average GPU utilization", "GPU utilization by pool"])
def test_the_utilization_overview_counts_mig_devices(title: str) -> None:
    expr = overview_panels()[title]
    assert IDLE_METRIC in expr and "DCGM_FI_DEV_GPU_UTIL" not in expr


def promtool_idle(tmp_path: Path, values: str, alerts_at: dict[str, int], percent: str = "") -> None:
    """`values` for both MIG devices (a ratio, one sample a minute); `alerts_at`: eval time -> GpuIdleSpend alerts,
    each reporting `percent` as the average."""
    if PROMTOOL is None:
        if REQUIRED:
            pytest.fail("BLUEPRINT_REQUIRE_PROMTOOL is set but promtool is not installed")
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(prometheus_rules(Alerts())["gpu-health"]))
    summary = f"average GPU utilization is {percent}%: GPUs are paid for and idle"
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": series, "values": values} for series in MIG_DEVICES],
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": "GpuIdleSpend",
                        "exp_alerts": [{"exp_labels": {"severity": "warning"}, "exp_annotations": {"summary": summary}}]
                        * count,
                    }
                    for at, count in alerts_at.items()
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    result = subprocess.run(
        [PROMTOOL, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.program
def test_idle_mig_devices_fire_the_alert_after_its_window(tmp_path: Path) -> None:
    # 10% busy for an hour: below 30% from the first sample, so pending for 30 min, then firing.
    promtool_idle(tmp_path, "0.1x60", {"20m": 0, "31m": 1, "50m": 1}, percent="10")


@pytest.mark.program
def test_busy_mig_devices_keep_it_quiet(tmp_path: Path) -> None:
    promtool_idle(tmp_path, "0.6x60", {"31m": 0, "59m": 0})
