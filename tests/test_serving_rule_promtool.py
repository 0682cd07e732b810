"""The GPU-utilization serving rule's query (the KEDA trigger of the inference stack with its pool in
`mode: gpu-utilization`) evaluated by Prometheus's own engine
(`promtool test rules`) on synthetic scrapes, and the replica count the HPA makes of its value.

Series: one scrape every 15 s (the dcgm-exporter chart's `serviceMonitor.interval`, [DCGM] values.yaml). The
evaluation times keep a minute of margin from every window edge, so the tests hold whether range selectors are
closed on the left (Prometheus 2.x, Debian's promtool) or open (3.x, what the pinned chart runs): docs/addons.md,
"Which Prometheus evaluates the rules".
"""

from __future__ import annotations

from math import ceil
from pathlib import Path
from typing import Any

import pytest

from tests.promql_expressions import SCALER, found_in, plan_resources, shape
from tests.promtool import needs_promtool, run_rule_tests

pytestmark = [pytest.mark.program, needs_promtool]

#: The inference stack with its pool in `mode: gpu-utilization` (a chart-test variant).
SEED_RULE_STACK = "inference-gpu-utilization"

SCRAPE_SECONDS = 15
EXPORTER = 'job="dcgm-exporter",namespace="monitoring"'
POD = 'exported_namespace="inference",exported_pod="chat-5d9f7c6b8-{}",gpu="0"'
REPLICAS = 'kube_deployment_spec_replicas{job="kube-state-metrics",namespace="inference",deployment="chat"}'


def scaled_object() -> dict[str, Any]:
    """The ScaledObject of the inference stack with its pool on the GPU-utilization rule (a chart-test variant)."""
    (scaler,) = [r for r in plan_resources(SEED_RULE_STACK) if r["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject"]
    spec: dict[str, Any] = scaler["inputs"]["spec"]
    return spec


def shipped_query() -> str:
    query: str = scaled_object()["triggers"][0]["metadata"]["query"]
    return query


def covered_scaler_shapes() -> set[str]:
    """The shapes of the autoscaler queries these tests evaluate (tests/test_promql_expressions.py holds every
    shipped query to them)."""
    return {
        shape(e.expr) for e in found_in(SEED_RULE_STACK).expressions if e.kind == SCALER and e.expr == shipped_query()
    }


def scrapes(*segments: tuple[float | None, float]) -> str:
    """A series in promtool's notation, one value a scrape: `(value, minutes)` segments, None for no sample."""
    values: list[str] = []
    for value, minutes in segments:
        values += ["_" if value is None else f"{value:g}"] * round(minutes * 60 / SCRAPE_SECONDS)
    return " ".join(values)


def utilization(pod: str, *segments: tuple[float | None, float], job: str = EXPORTER) -> dict[str, str]:
    return {"series": f"DCGM_FI_DEV_GPU_UTIL{{{job},{POD.format(pod)}}}", "values": scrapes(*segments)}


def replicas(*segments: tuple[float | None, float]) -> dict[str, str]:
    return {"series": REPLICAS, "values": scrapes(*segments)}


def expect_values(tmp_path: Path, series: list[dict[str, str]], values_at: dict[str, float]) -> None:
    """The shipped query's value at each evaluation time (minutes), by promtool."""
    run_rule_tests(
        tmp_path,
        [],
        [
            {
                "interval": f"{SCRAPE_SECONDS}s",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": shipped_query(), "eval_time": at, "exp_samples": [{"labels": "{}", "value": value}]}
                    for at, value in values_at.items()
                ],
            }
        ],
    )


def hpa_replicas(current: int, value: float) -> int:
    """What the HPA makes of the query's value for the ScaledObject's trigger: an external `Value` metric, desired
    `ceil(value / threshold * current)` unless within the 10% tolerance ([HPACALC]), cut to one `behavior` step
    ([HPA]) and to min/max replicas (first step of a period)."""
    spec = scaled_object()
    ratio = value / float(spec["triggers"][0]["metadata"]["threshold"])
    desired = current if abs(ratio - 1) <= 0.1 else ceil(ratio * current)
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    (up,), (down,) = behavior["scaleUp"]["policies"], behavior["scaleDown"]["policies"]
    desired = (
        min(desired, current + int(up["value"])) if desired > current else max(desired, current - int(down["value"]))
    )
    return max(int(spec["minReplicaCount"]), min(int(spec["maxReplicaCount"]), desired))


HOLD = 1.0


def scale_out() -> float:
    """Hold plus `1 + max replicas`: whatever the count, the HPA's desired count is above `max`."""
    return HOLD + 1 + scaled_object()["maxReplicaCount"]


SCALE_IN = 0.0


def test_the_hpa_steps_by_the_documented_step_on_each_value() -> None:
    """Out by `scaleOutBy` nodes' worth (2 x 4 replicas on g6e.12xlarge), in by `scaleInBy` (1 x 4), hold on 1."""
    assert hpa_replicas(8, scale_out()) == 16
    assert hpa_replicas(8, SCALE_IN) == 4
    assert hpa_replicas(8, HOLD) == 8
    assert hpa_replicas(4, SCALE_IN) == 2  # min replicas


def test_hot_for_the_window_scales_out(tmp_path: Path) -> None:
    """50% for 20 minutes, then 95%: not yet 10 minutes in (the window's average is under 85%), out once the
    15-minute window is hot."""
    series = [utilization(pod, (50, 20), (95, 30)) for pod in ("x2k9q", "x2k9r")] + [replicas((4, 50))]
    expect_values(tmp_path, series, {"10m": HOLD, "30m": HOLD, "37m": scale_out(), "45m": scale_out()})


def test_cold_for_the_window_scales_in(tmp_path: Path) -> None:
    """A window not yet full holds; 60% for 30 minutes, then 10%: in once the 30-minute average is under 30%."""
    series = [utilization(pod, (60, 30), (10, 30)) for pod in ("x2k9q", "x2k9r")] + [replicas((4, 60))]
    expect_values(tmp_path, series, {"25m": HOLD, "45m": HOLD, "58m": SCALE_IN})


def test_a_replica_count_change_restarts_the_windows(tmp_path: Path) -> None:
    """Hot throughout; the count goes from 4 to 12 at minute 20: no second step until 15 minutes at 12."""
    series = [utilization(pod, (95, 60)) for pod in ("x2k9q", "x2k9r")] + [replicas((4, 20), (12, 40))]
    expect_values(tmp_path, series, {"17m": scale_out(), "25m": HOLD, "33m": HOLD, "37m": scale_out()})


def test_no_data_holds(tmp_path: Path) -> None:
    """No utilization (pods Pending), no kube-state-metrics, or minutes without a sample in the window (a 3-minute
    gap: Prometheus 2.x's left-closed subquery has one point more than the window, which a 1-minute gap would
    leave full): hold, never scale in."""
    expect_values(tmp_path, [replicas((4, 60))], {"45m": HOLD})
    expect_values(tmp_path, [utilization("x2k9q", (10, 60))], {"45m": HOLD})
    gap = [utilization("x2k9q", (10, 40), (None, 3), (10, 40)), replicas((4, 83))]
    expect_values(tmp_path, gap, {"38m": SCALE_IN, "50m": HOLD, "70m": HOLD, "77m": SCALE_IN})


def test_a_loading_replica_reporting_zero_neither_scales_in_nor_out(tmp_path: Path) -> None:
    """After a scale-out from 2 to 4 replicas at minute 20, the new replicas hold their GPUs and report 0% for the 8
    minutes they load the model, while the load moves over: the windows restart at the change, and the loading
    minutes alone do not bring the 30-minute average under 30% or the 15-minute one over 85%."""
    series = [utilization(pod, (95, 20), (60, 50)) for pod in ("x2k9q", "x2k9r")]
    series += [utilization(pod, (None, 20), (0, 8), (60, 42)) for pod in ("x2k9s", "x2k9t")]
    series.append(replicas((2, 20), (4, 50)))
    expect_values(
        tmp_path, series, {"18m": scale_out(), "25m": HOLD, "37m": HOLD, "45m": HOLD, "52m": HOLD, "65m": HOLD}
    )


def test_one_noisy_scrape_does_not_restart_the_window(tmp_path: Path) -> None:
    """95% for 40 minutes but one scrape reads 0% at minute 30: the window averages one-minute averages, so it
    still scales out (a window that needed every minute's last scrape above 85% held)."""
    series = [utilization("x2k9q", (95, 30), (0, 0.25), (95, 10)), replicas((4, 41))]
    expect_values(tmp_path, series, {"40m": scale_out()})


def test_another_target_cannot_forge_the_serving_pods_utilization(tmp_path: Path) -> None:
    """A target in the tenant's namespace exporting 0% for the serving pod would pull the average of a busy pod
    (50%) under the scale-in threshold; the query selects the exporter's own `job` and `namespace`, so it holds."""
    forged = utilization("x2k9q", (0, 45), job='job="impostor",namespace="inference"')
    series = [utilization("x2k9q", (50, 45)), forged, replicas((2, 45))]
    expect_values(tmp_path, series, {"40m": HOLD})
    expect_values(tmp_path, [utilization("x2k9q", (10, 45)), replicas((2, 45))], {"40m": SCALE_IN})
