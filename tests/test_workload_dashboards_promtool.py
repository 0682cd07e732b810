"""The serving and training dashboards' panels evaluated by Prometheus's own engine (`promtool test rules`) on
synthetic scrapes of vLLM and of the reference training script, named and labelled as their PodMonitors scrape them:
each panel's query, as the plan ships it (Grafana's variables filled in: tests/promql_expressions.py), gives the
value worked out by hand. A panel added without a case here fails `test_every_panel_is_evaluated`.

Series: one scrape every 15 s; counters grow linearly, so a rate over any window is exact. Histogram buckets are
chosen so each quantile falls inside a bucket, where Prometheus interpolates linearly ([PROMTOOL], docs/addons.md,
"Which Prometheus evaluates the rules").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.promql_expressions import PANEL, Expression, found_in
from tests.promtool import needs_promtool, run_rule_tests

pytestmark = [pytest.mark.program, needs_promtool]

SCRAPE_SECONDS = 15
EVAL_AT = "10m"


def counter(per_second: float) -> str:
    """A counter growing `per_second`, sampled every scrape for 11 minutes, in promtool's `start+step x count`."""
    return f"0+{per_second * SCRAPE_SECONDS:g}x{11 * 60 // SCRAPE_SECONDS}"


def gauge(value: float) -> str:
    return f"{value:g}+0x{11 * 60 // SCRAPE_SECONDS}"


def panels(stack: str, title: str) -> dict[str, Expression]:
    """The dashboard's panel queries in the stack's plan, by `<panel title> <refId>` (the collector names each
    `<dashboard title> / ... / <panel title> <refId>`)."""
    prefix = f"{title} / "
    return {e.name.rsplit(prefix, 1)[1]: e for e in found_in(stack).expressions if e.kind == PANEL and prefix in e.name}


def evaluate(tmp_path: Path, series: list[dict[str, str]], queries: dict[str, Expression], expected: dict) -> None:
    run_rule_tests(
        tmp_path,
        [],
        [
            {
                "interval": f"{SCRAPE_SECONDS}s",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": queries[name].promql,
                        "eval_time": EVAL_AT,
                        "exp_samples": [{"labels": labels, "value": value} for labels, value in samples],
                    }
                    for name, samples in expected.items()
                ],
            }
        ],
    )


# ------------------------------------------------------------------------------------------------------- serving
SERVING = "GPU cluster / Serving"
JOB = 'job="inference/chat"'
#: Two vLLM servers of the inference stack's `chat` workload, as its PodMonitor labels their samples.
SERVERS = {"a": "chat-5d9f7c6b8-a", "b": "chat-5d9f7c6b8-b"}


def server(pod: str) -> str:
    return f'{JOB},namespace="inference",pod="{SERVERS[pod]}",container="vllm",model_name="qwen",engine="0"'


def histogram(name: str, bounds: tuple[str, ...], per_second: tuple[float, ...]) -> list[dict[str, str]]:
    """Both servers' buckets of one histogram: cumulative counts growing `per_second` per bucket."""
    return [
        {"series": f'{name}_bucket{{{server(pod)},le="{le}"}}', "values": counter(rate)}
        for pod in SERVERS
        for le, rate in zip(bounds, per_second, strict=True)
    ]


def serving_series() -> list[dict[str, str]]:
    series = [
        {"series": f"vllm:num_requests_waiting{{{server('a')}}}", "values": gauge(3)},
        {"series": f"vllm:num_requests_waiting{{{server('b')}}}", "values": gauge(5)},
        {"series": f"vllm:num_requests_running{{{server('a')}}}", "values": gauge(10)},
        {"series": f"vllm:num_requests_running{{{server('b')}}}", "values": gauge(20)},
        {"series": f"vllm:kv_cache_usage_perc{{{server('a')}}}", "values": gauge(0.5)},
        {"series": f"vllm:kv_cache_usage_perc{{{server('b')}}}", "values": gauge(0.75)},
        *(
            {"series": f'vllm:request_success_total{{{server(pod)},finished_reason="stop"}}', "values": counter(1)}
            for pod in SERVERS
        ),
        {"series": f'vllm:request_success_total{{{server("a")},finished_reason="length"}}', "values": counter(0.5)},
        *({"series": f"vllm:generation_tokens_total{{{server(pod)}}}", "values": counter(100)} for pod in SERVERS),
        *({"series": f"vllm:prompt_tokens_total{{{server(pod)}}}", "values": counter(50)} for pod in SERVERS),
    ]
    # time to first token: per second and server, 1 request in (0.125, 0.25] s and 1 in (0.25, 0.5] s
    series += histogram("vllm:time_to_first_token_seconds", ("0.125", "0.25", "0.5", "+Inf"), (0, 1, 2, 2))
    # end-to-end latency: 2 requests a second per server, all in (1, 3] s
    series += histogram("vllm:e2e_request_latency_seconds", ("1", "3", "+Inf"), (0, 2, 2))
    return series


def test_serving_panels_show_queue_latency_first_token_kv_cache_and_tokens(tmp_path: Path) -> None:
    chat, a, b = f"{{{JOB}}}", f'{{pod="{SERVERS["a"]}"}}', f'{{pod="{SERVERS["b"]}"}}'
    expected = {
        "Requests completed per second A": [(chat, 2.5)],
        "Requests waiting A": [(chat, 8)],
        "Requests running A": [(chat, 30)],
        "KV-cache usage, busiest server A": [(chat, 0.75)],
        "Queue length per server A": [(a, 3), (b, 5)],
        "Queue length per server B": [(a, 10), (b, 20)],
        "Requests completed per second, by finish reason A": [
            (f'{{{JOB},finished_reason="stop"}}', 2),
            (f'{{{JOB},finished_reason="length"}}', 0.5),
        ],
        # 4 a second in all: the median (2nd) at the end of (0.125, 0.25], the 95th percentile (3.8th) 90% into
        # (0.25, 0.5]
        "Time to first token A": [(chat, 0.25)],
        "Time to first token B": [(chat, 0.475)],
        # all in (1, 3]: the median half-way, the 95th percentile 95% into it
        "End-to-end request latency A": [(chat, 2)],
        "End-to-end request latency B": [(chat, 2.9)],
        "Tokens per second A": [(chat, 200)],
        "Tokens per second B": [(chat, 100)],
        "KV-cache usage per server A": [(a, 0.5), (b, 0.75)],
    }
    queries = panels("inference", SERVING)
    assert set(queries) == set(expected)
    evaluate(tmp_path, serving_series(), queries, expected)


# ------------------------------------------------------------------------------------------------------ training
TRAINING = "GPU cluster / Training"
JOBSET = 'jobset="reference"'


def worker(index: int) -> str:
    return f'job="training/reference",namespace="training",pod="reference-workers-0-{index}-x",{JOBSET}'


def training_series() -> list[dict[str, str]]:
    """Two workers at step 120, resumed from 100 in the JobSet's first restart: worker 0 takes 0.5 s a step, worker
    1 0.75 s; each trains 256 samples a second; worker 1 has saved two checkpoints, worker 0 one so far."""
    per_worker = [
        {
            "step_seconds_total": counter(1),
            "steps_total": counter(2),
            "checkpoint_saves_total": gauge(1),
            "checkpoint_save_seconds": gauge(2),
        },
        {
            "step_seconds_total": counter(1),
            "steps_total": counter(4 / 3),
            "checkpoint_saves_total": gauge(2),
            "checkpoint_save_seconds": gauge(3),
        },
    ]
    series = []
    for index, own in enumerate(per_worker):
        shared = {
            "step": gauge(120),
            "loss": gauge(0.5),
            "resumed_step": gauge(100),
            "restarts": gauge(1),
            "samples_total": counter(256),
        }
        for key, values in {**shared, **own}.items():
            series.append({"series": f"train_reference_{key}{{{worker(index)}}}", "values": values})
    return series


def test_training_panels_show_progress_throughput_step_time_and_checkpoints(tmp_path: Path) -> None:
    job = f"{{{JOBSET}}}"
    expected = {
        "Step A": [(job, 120)],
        "Loss A": [(job, 0.5)],
        "Restarts A": [(job, 1)],
        "Resumed from step A": [(job, 100)],
        "Checkpoints saved since the restart A": [(job, 1)],
        "Samples per second A": [(job, 512)],
        "Step time A": [(job, 0.75)],
        "Checkpoint save time A": [(job, 3)],
    }
    queries = panels("training", TRAINING)
    # the two Loss panels (a stat and a graph) run the same query
    assert set(queries) == set(expected)
    evaluate(tmp_path, training_series(), queries, expected)


@pytest.mark.parametrize(
    ("stack", "title"), [("inference", SERVING), ("hybrid", SERVING), ("training", TRAINING), ("hybrid", TRAINING)]
)
def test_the_workload_dashboards_are_planned_where_the_workloads_run(stack: str, title: str) -> None:
    assert panels(stack, title)
