"""The queue rule's query (the hybrid stack's KEDA trigger on vLLM's requests in flight) evaluated by Prometheus's own
engine (`promtool test rules`) on synthetic scrapes, and the replica count the HPA makes of its value.

The trigger is `metricType: AverageValue`: the HPA divides the query's value by the threshold for its desired count
(`ceil(total / target)`, [HPACALC]), so the scenarios check the value promtool returns and the count the HPA's
calculation gives for it. No value (no ready server publishes `/metrics`, [VLLMMETRICS]) is an empty answer, which
KEDA's Prometheus scaler turns into an error with `ignoreNullValues: false` and no `fallback`, and the HPA keeps the
count on an error ([KEDA] `pkg/scalers/prometheus_scaler.go`, `pkg/fallback/fallback.go`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.planning.serving_policies import Bounds, in_flight_recommendation, scale_up_limit
from tests.builders import shipped_plan
from tests.promql_expressions import SCALER, found_in, shape
from tests.promtool import needs_promtool, run_rule_tests

pytestmark = [pytest.mark.program, needs_promtool]

SCRAPE_SECONDS = 30
OWN = 'job="inference/chat",namespace="inference"'
LABELS = 'model_name="Qwen2.5-7B-Instruct",engine="0"'


def scaled_object() -> dict[str, Any]:
    (scaler,) = [
        r for r in shipped_plan("hybrid")["resources"] if r["type"] == "kubernetes:keda.sh/v1alpha1:ScaledObject"
    ]
    spec: dict[str, Any] = scaler["inputs"]["spec"]
    return spec


def shipped_query() -> str:
    query: str = scaled_object()["triggers"][0]["metadata"]["query"]
    return query


def covered_queue_shapes() -> set[str]:
    """The shapes of the queue rule's queries these tests evaluate (tests/test_promql_expressions.py)."""
    return {shape(e.expr) for e in found_in("hybrid").expressions if e.kind == SCALER and e.expr == shipped_query()}


def gauges(pod: str, running: float, waiting: float, minutes: int = 10, target: str = OWN) -> list[dict[str, str]]:
    """Both vLLM gauges of one server, steady for `minutes`, one scrape every `SCRAPE_SECONDS`."""
    scrapes = round(minutes * 60 / SCRAPE_SECONDS)
    return [
        {"series": f'vllm:{name}{{{target},pod="{pod}",{LABELS}}}', "values": " ".join([f"{value:g}"] * scrapes)}
        for name, value in (("num_requests_running", running), ("num_requests_waiting", waiting))
    ]


def expect(tmp_path: Path, series: list[dict[str, str]], value: float | None, at: str = "5m") -> None:
    """The shipped query's value at `at` by promtool; None: no sample (an empty answer)."""
    samples = [] if value is None else [{"labels": "{}", "value": value}]
    run_rule_tests(
        tmp_path,
        [],
        [
            {
                "interval": f"{SCRAPE_SECONDS}s",
                "input_series": series,
                "promql_expr_test": [{"expr": shipped_query(), "eval_time": at, "exp_samples": samples}],
            }
        ],
    )


def hpa_replicas(current: int, total: float | None) -> int:
    """The HPA's next count for the trigger's value: `ceil(total / threshold)` outside the 10% tolerance, within
    the default scale-up policy, clamped to the ScaledObject's bounds; no value holds."""
    spec = scaled_object()
    bounds = Bounds(int(spec["minReplicaCount"]), int(spec["maxReplicaCount"]))
    wanted = in_flight_recommendation(current, total, float(spec["triggers"][0]["metadata"]["threshold"]))
    return bounds.clamp(min(wanted, scale_up_limit(current)))


def servers(count: int, running: float, waiting: float) -> list[dict[str, str]]:
    return [s for i in range(count) for s in gauges(f"chat-5d9f7c6b8-p{i}", running, waiting)]


def test_the_shipped_trigger_is_average_value_on_the_in_flight_total() -> None:
    metadata = scaled_object()["triggers"][0]
    assert metadata["metricType"] == "AverageValue"
    assert metadata["metadata"]["ignoreNullValues"] == "false"
    assert "fallback" not in scaled_object()


def test_above_the_target_per_replica_scales_out(tmp_path: Path) -> None:
    """4 servers with 40 running and 20 waiting each: 240 in flight, 60 a replica against 35: out to 7."""
    expect(tmp_path, servers(4, 40, 20), 240)
    assert hpa_replicas(4, 240) == 7


def test_below_the_target_per_replica_scales_in(tmp_path: Path) -> None:
    """4 servers with 10 running and none waiting: 40 in flight, 10 a replica: in to 2 (the minimum)."""
    expect(tmp_path, servers(4, 10, 0), 40)
    assert hpa_replicas(4, 40) == 2


def test_near_the_target_holds(tmp_path: Path) -> None:
    """4 servers at 36 in flight each: within the HPA's 10% tolerance of 35, no change."""
    expect(tmp_path, servers(4, 30, 6), 144)
    assert hpa_replicas(4, 144) == 4


def test_no_data_holds(tmp_path: Path) -> None:
    """No server publishes metrics (all loading, or the scrape is down): no value, which holds; a series that went
    stale (last scrape over 5 minutes ago) counts as none."""
    expect(tmp_path, [], None)
    expect(tmp_path, servers(2, 40, 20), None, at="16m")
    assert hpa_replicas(4, None) == 4


def test_only_the_deployments_own_pods_count(tmp_path: Path) -> None:
    """Another Deployment whose name starts the same (`chat-large`), another namespace, and another scrape job on
    the same pods (a ServiceMonitor someone adds) are not counted: 2 x 30 in flight, not more."""
    noise = [
        *gauges("chat-large-6c7d8e9f0-x1", 100, 100, target='job="inference/chat-large",namespace="inference"'),
        *gauges("chat-5d9f7c6b8-p0", 100, 100, target='job="inference/chat",namespace="staging"'),
        *gauges("chat-5d9f7c6b8-p0", 100, 100, target='job="chat",namespace="inference"'),
        *gauges("chat-canary", 100, 100),
    ]
    expect(tmp_path, servers(2, 20, 10) + noise, 60)
