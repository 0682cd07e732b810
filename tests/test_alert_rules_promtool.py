"""The shipped GPU alert rules evaluated by Prometheus's own engine (`promtool test rules`), not by string matching:
for each alert, when it fires and when it stays quiet.

The rules are the inference stack's planned kube-prometheus-stack `additionalPrometheusRulesMap` (every stack on the
Prometheus path ships the same groups: tests/test_promql_expressions.py holds every shipped alert to a scenario
here). One sample a minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.promql_expressions import found_in
from tests.promtool import needs_promtool, run_rule_tests

pytestmark = [pytest.mark.program, needs_promtool]

GPU = {"gpu": "0", "Hostname": "node-a"}
LABELS = 'gpu="0", Hostname="node-a"'


def shipped_rule_groups() -> list[dict[str, Any]]:
    return [found.group for found in found_in("inference").rule_groups]


@dataclass(frozen=True)
class Scenario:
    """Series (expanding notation, one sample a minute) and the alert's instances expected at each time: labels
    and annotations of each firing instance, [] for quiet."""

    alert: str
    why: str
    series: dict[str, str]
    expected: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def rule_test(self) -> dict[str, Any]:
        """The scenario as one promtool rule test: its series sampled each minute, the alert checked at each time."""
        return {
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in self.series.items()],
            "alert_rule_test": [
                {"eval_time": at, "alertname": self.alert, "exp_alerts": alerts} for at, alerts in self.expected.items()
            ],
        }


def firing(summary: str, severity: str, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    return [
        {
            "exp_labels": {"severity": severity, **(GPU if labels is None else labels)},
            "exp_annotations": {"summary": summary},
        }
    ]


def xid(code: int) -> list[dict[str, Any]]:
    return firing(f"GPU 0 on node-a reported XID {code}", "critical")


ECC = firing("GPU 0 on node-a had double-bit ECC errors", "critical")
XID_SERIES = f"DCGM_FI_DEV_XID_ERRORS{{{LABELS}}}"
ECC_SERIES = f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{LABELS}}}"
TEMP_SERIES = f"DCGM_FI_DEV_GPU_TEMP{{{LABELS}}}"

SCENARIOS = [
    Scenario(
        "GpuXidError",
        "a new code fires, and resolves after the 10-minute window although the gauge keeps the code",
        {XID_SERIES: "0x4 79x40"},
        {"4m": [], "6m": xid(79), "14m": xid(79), "16m": [], "40m": []},
    ),
    Scenario(
        "GpuXidError",
        "one XID, then an hour later: quiet (the gauge still holds 79)",
        {XID_SERIES: "0x4 79x70"},
        {"6m": xid(79), "65m": [], "75m": []},
    ),
    Scenario(
        "GpuXidError",
        "a different code fires again",
        {XID_SERIES: "0x4 79x19 48x20"},
        {"20m": [], "26m": xid(48), "40m": []},
    ),
    Scenario("GpuXidError", "a code left from before the window: quiet", {XID_SERIES: "13x60"}, {"15m": [], "59m": []}),
    Scenario("GpuXidError", "no XID: quiet", {XID_SERIES: "0x60"}, {"15m": [], "59m": []}),
    Scenario(
        "GpuXidError",
        "the exporter restarts and reports the same code again after a gap: quiet",
        {XID_SERIES: "0x4 79x20 _x3 79x20"},
        {"6m": xid(79), "30m": [], "45m": []},
    ),
    Scenario(
        "GpuEccUncorrectableErrors",
        "the double-bit counter rises: fires, and resolves 10 minutes later",
        {ECC_SERIES: "2x20 3x30"},
        {"19m": [], "22m": ECC, "29m": ECC, "32m": [], "50m": []},
    ),
    Scenario("GpuEccUncorrectableErrors", "a steady count: quiet", {ECC_SERIES: "5x60"}, {"30m": [], "59m": []}),
    Scenario(
        "GpuTemperatureHigh",
        "above 85 C for 5 minutes: fires; a 3-minute spike does not",
        {TEMP_SERIES: "70x10 90x3 70x10 90x10 70x10"},
        {"13m": [], "15m": [], "29m": [], "33m": firing("GPU 0 on node-a is at 90 C", "warning"), "45m": []},
    ),
    Scenario(
        "GpuIdleSpend",
        "average utilization under 30% for 30 minutes: fires; a busy GPU beside an idle one keeps it quiet",
        {
            f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{LABELS}}}": "0.1x40",
            'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1", Hostname="node-a"}': "0.1x20 0.9x20",
        },
        {"19m": [], "31m": [], "25m": []},
    ),
    Scenario(
        "GpuIdleSpend",
        "idle for 30 minutes: fires",
        {f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{LABELS}}}": "0.1x40"},
        {"29m": [], "31m": firing("average GPU utilization is 10%: GPUs are paid for and idle", "warning", {})},
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"{s.alert}: {s.why}")
def test_alert(tmp_path: Path, scenario: Scenario) -> None:
    run_rule_tests(tmp_path, shipped_rule_groups(), [scenario.rule_test()])
