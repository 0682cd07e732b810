"""The shipped node health alerts evaluated by Prometheus's own engine (`promtool test rules`): the node monitoring
agent's conditions (kube-state-metrics `kube_node_status_condition`), the health loop's counters (a repair storm
held by the hourly cap, gate failures) and a node left `failed` (`kube_node_labels`). When each fires and when it
stays quiet; one sample a minute. The rules are the inference stack's planned `node-health` group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.planning.node_health import CHECKS_METRIC, LAST_PASS_METRIC, REPAIRS_HELD_METRIC
from tests.promql_expressions import found_in
from tests.promtool import needs_promtool, run_rule_tests
from tests.test_alert_rules_promtool import Scenario

pytestmark = [pytest.mark.program, needs_promtool]

#: The target labels a kube-state-metrics sample carries besides its own (the scrape adds them).
KSM = 'job="kube-state-metrics", instance="10.0.0.9:8080"'
#: The health loop's target labels (its PodMonitor's scrape).
LOOP = 'job="node-health/node-health", namespace="node-health", pod="node-health-abc"'


def condition(node: str, kind: str, status: str) -> str:
    return f'kube_node_status_condition{{{KSM}, node="{node}", condition="{kind}", status="{status}"}}'


def firing(summary: str, severity: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    return [{"exp_labels": {"severity": severity, **labels}, "exp_annotations": {"summary": summary}}]


def node_condition(node: str, kind: str) -> dict[str, str]:
    return {
        "job": "kube-state-metrics",
        "instance": "10.0.0.9:8080",
        "node": node,
        "condition": kind,
        "status": "false",
    }


GPU_FAULT = firing(
    "node gpu-1 reports a GPU fault (AcceleratedHardwareReady False: XID, DCGM health, NVLink or GPU count); "
    "kubectl describe node shows the reason",
    "critical",
    node_condition("gpu-1", "AcceleratedHardwareReady"),
)
HELD = firing(
    "repairs held back in pool h100 (hourly-cap): a repair storm or capacity that cannot be replaced; "
    "failed nodes stay cordoned",
    "critical",
    {"pool": "h100", "reason": "hourly-cap"},
)
HELD_SERIES = f'{REPAIRS_HELD_METRIC}{{{LOOP}, pool="h100", reason="hourly-cap"}}'
GATE_FAILED = f'{CHECKS_METRIC}{{{LOOP}, pool="h100", kind="gate", result="failed"}}'
GATE_PASSED = f'{CHECKS_METRIC}{{{LOOP}, pool="h100", kind="gate", result="passed"}}'
FAILED_LABEL = f'kube_node_labels{{{KSM}, node="gpu-1", label_gpu_clusters_pool="h100", label_gpu_clusters_node_health='


def failed_long(node: str = "gpu-1") -> list[dict[str, Any]]:
    labels = {
        "job": "kube-state-metrics",
        "instance": "10.0.0.9:8080",
        "node": node,
        "label_gpu_clusters_pool": "h100",
        "label_gpu_clusters_node_health": "failed",
    }
    summary = f"node {node} has been marked failed for over 60 minutes and is still in the cluster"
    return firing(summary, "warning", labels)


NODE_HEALTH_SCENARIOS = [
    Scenario(
        "GpuNodeHardwareFault",
        "AcceleratedHardwareReady False for 5 minutes fires; back to True resolves",
        {
            condition("gpu-1", "AcceleratedHardwareReady", "false"): "0x5 1x10 0x10",
            condition("gpu-1", "AcceleratedHardwareReady", "true"): "1x5 0x10 1x10",
        },
        {"4m": [], "9m": [], "11m": GPU_FAULT, "15m": GPU_FAULT, "17m": []},
    ),
    Scenario(
        "GpuNodeHardwareFault",
        "a 3-minute flap stays quiet; another node's healthy condition stays quiet",
        {
            condition("gpu-1", "AcceleratedHardwareReady", "false"): "0x5 1x3 0x20",
            condition("gpu-2", "AcceleratedHardwareReady", "false"): "0x30",
        },
        {"8m": [], "12m": [], "25m": []},
    ),
    Scenario(
        "GpuNodeHardwareFault",
        "the standard Ready condition False is not the agent's: quiet",
        {condition("gpu-1", "Ready", "false"): "1x20"},
        {"10m": [], "19m": []},
    ),
    Scenario(
        "NodeConditionFalse",
        "NetworkingReady False for 5 minutes fires as a warning; AcceleratedHardwareReady is not this alert's",
        {
            condition("gpu-1", "NetworkingReady", "false"): "1x20",
            condition("gpu-2", "AcceleratedHardwareReady", "false"): "1x20",
        },
        {
            "3m": [],
            "6m": firing(
                "NetworkingReady is False on node gpu-1", "warning", node_condition("gpu-1", "NetworkingReady")
            ),
        },
    ),
    Scenario(
        "NodeHealthRepairsHeld",
        "the first repair held by the hourly cap (a new series at 1) fires at once, and resolves an hour later",
        {HELD_SERIES: "_x10 1x80"},
        {"9m": [], "11m": HELD, "60m": HELD, "75m": []},
    ),
    Scenario(
        "NodeHealthRepairsHeld",
        "a counter initialised at zero stays quiet until it rises",
        {HELD_SERIES: "0x70 1x30"},
        {"30m": [], "69m": [], "71m": HELD},
    ),
    Scenario(
        "NodeHealthRepairsHeld",
        "the health loop restarts (its counter starts again at zero under a new pod): quiet",
        {
            HELD_SERIES: "0x30",
            HELD_SERIES.replace("node-health-abc", "node-health-def"): "_x30 0x40",
        },
        {"35m": [], "65m": []},
    ),
    Scenario(
        "NodeHealthGateFailures",
        "two gate failures in an hour fire; passes do not count; an hour later it resolves",
        {GATE_FAILED: "_x5 1x10 2x70", GATE_PASSED: "0x5 1x5 5x80"},
        {
            "10m": [],
            "16m": firing("2 new nodes of pool h100 failed the health gate in 1h", "warning", {"pool": "h100"}),
            "50m": firing("2 new nodes of pool h100 failed the health gate in 1h", "warning", {"pool": "h100"}),
            "80m": [],
        },
    ),
    Scenario(
        "NodeHealthGateFailures",
        "one failure an hour: quiet",
        {GATE_FAILED: "0x10 1x70 2x70"},
        {"30m": [], "100m": []},
    ),
    Scenario(
        "NodeHealthFailedTooLong",
        "a node labelled failed for an hour fires; one repaired within the hour stays quiet",
        {
            f'{FAILED_LABEL}"failed"}}': "1x75",
            f'{FAILED_LABEL}"failed"}}'.replace("gpu-1", "gpu-2"): "1x40",
        },
        {"59m": [], "61m": failed_long(), "70m": failed_long()},
    ),
    Scenario(
        "NodeHealthFailedTooLong",
        "pending and passed nodes are never this alert's",
        {f'{FAILED_LABEL}"pending"}}': "1x90", f'{FAILED_LABEL}"passed"}}'.replace("gpu-1", "gpu-2"): "1x90"},
        {"80m": []},
    ),
    Scenario(
        "NodeHealthPendingTooLong",
        "a node pending past the check and schedule timeouts (1800 s by default) fires; one gated in time is quiet",
        {
            f'{FAILED_LABEL}"pending"}}': "1x40",
            f'{FAILED_LABEL}"pending"}}'.replace("gpu-1", "gpu-2"): "1x20",
        },
        {
            "29m": [],
            "31m": firing(
                "node gpu-1 has waited for its health gate for over 1800 seconds: the health loop is not gating it "
                "and its startup taint keeps work off",
                "warning",
                {
                    "job": "kube-state-metrics",
                    "instance": "10.0.0.9:8080",
                    "node": "gpu-1",
                    "label_gpu_clusters_pool": "h100",
                    "label_gpu_clusters_node_health": "pending",
                },
            ),
        },
    ),
    Scenario(
        "NodeHealthLoopStuck",
        "the heartbeat stops advancing: fires once it is 150 s old for 5 minutes; a live loop is quiet",
        # The loop writes the Unix time of its last pass: the evaluation clock starts at 0, so the value tracks it
        # (60 s a sample) for 10 minutes, then freezes at 600.
        {f"{LAST_PASS_METRIC}{{{LOOP}}}": "0+60x10 600x20"},
        {
            "10m": [],
            "14m": [],
            "18m": firing(
                "the health loop has finished no pass for over 150 seconds: new GPU nodes stay tainted and failed "
                "nodes are not repaired (kubectl -n node-health logs deploy/node-health)",
                "critical",
                {},
            ),
        },
    ),
    Scenario(
        "NodeHealthLoopDown",
        "no heartbeat at all (the pod crash-looping) for 10 minutes fires; a heartbeat resolves it",
        {f"{LAST_PASS_METRIC}{{{LOOP}}}": "_x15 900+60x10"},
        {
            "9m": [],
            "11m": firing(
                "the health loop reports no heartbeat: new GPU nodes stay tainted and failed nodes are not repaired "
                "(kubectl -n node-health get pods; logs deploy/node-health)",
                "critical",
                {},
            ),
            "20m": [],
        },
    ),
]


def shipped_rule_groups() -> list[dict[str, Any]]:
    groups = [found.group for found in found_in("inference").rule_groups]
    return [g for g in groups if g["name"] == "node-health"]


def test_the_inference_stack_ships_the_node_health_group() -> None:
    (group,) = shipped_rule_groups()
    assert {rule["alert"] for rule in group["rules"]} == {s.alert for s in NODE_HEALTH_SCENARIOS}


@pytest.mark.parametrize("scenario", NODE_HEALTH_SCENARIOS, ids=lambda s: f"{s.alert}: {s.why}")
def test_node_health_alert(tmp_path: Path, scenario: Scenario) -> None:
    run_rule_tests(tmp_path, shipped_rule_groups(), [scenario.rule_test()])
