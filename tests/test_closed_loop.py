"""`blueprint simulate --demand`: the closed-loop model (capacity, delays, what each rule sees), the three rules'
decisions as Kubernetes' HPA takes them, the traces and the CSV a user brings, the CLI, and the generated docs."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from blueprint import closed_loop as cl
from blueprint import plot_figure, simulation_docs
from blueprint.simulate import PLOT_FORMATS
from components.catalog import serving_capacity
from components.errors import ConfigError
from components.planning import serving_policies as hpa
from components.planning.serving_autoscaling import ScrapeTarget, ServingRule
from tests.builders import CliResult
from tests.plot_checks import SIGNATURES, assert_laid_out, built, labels, shown_y_ticks

RULE = ServingRule(
    scale_out_above_percent=85,
    scale_out_after_minutes=15,
    scale_out_replicas=8,
    scale_in_below_percent=30,
    scale_in_after_minutes=30,
    scale_in_replicas=4,
    cooldown_seconds=300,
    min_replicas=2,
    max_replicas=32,
    replicas_per_node=4,
    min_nodes=1,
    max_nodes=8,
    exporter=ScrapeTarget("dcgm-exporter", "monitoring"),
)
POOL = cl.Pool(
    replicas_per_node=4,
    gpus_per_node=4,
    min_nodes=1,
    max_nodes=8,
    scale_down_unneeded_minutes=10,
    cost_per_hour=lambda nodes: 10.0 * nodes,
)
CAPACITY = cl.Capacity(requests_per_second=2.0, concurrency=50, node_start_minutes=5, model_load_minutes=3)


# --------------------------------------------------------------------------------------------- the model
def test_demand_above_ready_capacity_queues_and_counts_as_slo_violation() -> None:
    fixed = replace(RULE, min_replicas=4, max_replicas=4)
    outcome = cl.run("queue", fixed, POOL, CAPACITY, [4.0] * 5 + [12.0] * 10)
    queue = [m.queue for m in outcome.timeline]
    assert queue[:5] == [0.0] * 5 and queue[5:] == sorted(queue[5:]) and queue[-1] == pytest.approx(4 * 60 * 10)
    assert outcome.slo_violation_minutes == 10
    assert {m.capacity for m in outcome.timeline} == {8.0}


def test_utilization_falls_as_replicas_rise() -> None:
    outcome = cl.run("hpa-utilization", RULE, POOL, CAPACITY, [3.0] * 5 + [12.0] * 60)
    busy = [(m.ready, m.utilization) for m in outcome.timeline if m.minute >= 5 and m.utilization is not None]
    (first_ready, first), (last_ready, last) = busy[0], busy[-1]
    assert first == pytest.approx(100.0)
    assert last_ready > first_ready and last < first
    assert last == pytest.approx(100 * 12 / (2.0 * last_ready))


def test_new_capacity_waits_for_the_node_start_and_the_model_load() -> None:
    """A jump to 16 replicas' worth: from 2 replicas on one 4-slot node the free slots serve after the model load;
    from a full node, the new replicas serve after node start + model load."""
    load, start = CAPACITY.model_load_minutes, CAPACITY.node_start_minutes
    ready = [m.ready for m in cl.run("queue", RULE, POOL, CAPACITY, [2.0] + [32.0] * 30).timeline]
    assert ready[: 2 + load] == [2] * (2 + load) and ready[2 + load] == 4  # decided at 1, scheduled at 2
    full = cl.run("queue", RULE, POOL, CAPACITY, [5.6] + [32.0] * 30).timeline
    assert full[0].replicas == 4 and full[1].replicas > 4  # decided at 1, a node ready at 1 + start
    assert [m.ready for m in full[: 1 + start + load]] == [4] * (1 + start + load)
    assert full[1 + start + load].ready > 4


def test_a_loading_replica_reports_zero_utilization_and_no_requests() -> None:
    outcome = cl.run("seed", RULE, POOL, CAPACITY, [2.0] * 3)
    assert outcome.timeline[0].utilization == pytest.approx(50.0)  # 2 replicas, one replica's worth
    fresh = cl.Capacity(2.0, 50, 5, 3)
    assert cl.run("seed", replace(RULE, min_replicas=2), POOL, fresh, [0.0]).timeline[0].utilization == 0.0


def test_cost_and_gpu_hours_follow_the_nodes_billed() -> None:
    outcome = cl.run("seed", RULE, POOL, CAPACITY, [2.0] * 60)
    assert {m.nodes for m in outcome.timeline} == {1}
    assert outcome.gpu_hours == pytest.approx(4.0) and outcome.cost_usd == pytest.approx(10.0)


def test_idle_nodes_leave_after_the_scale_down_unneeded_time() -> None:
    outcome = cl.run("queue", RULE, POOL, CAPACITY, [40.0] * 40 + [2.0] * 60)
    nodes = [m.nodes for m in outcome.timeline]
    peak = max(nodes)
    assert peak > 2 and nodes[-1] < peak
    drop = next(m for m in range(40, 100) if nodes[m] < peak)
    fewer_replicas = next(m.minute for m in outcome.timeline if m.minute >= 40 and m.replicas < 4 * peak)
    assert drop - fewer_replicas >= POOL.scale_down_unneeded_minutes


# --------------------------------------------------------------------------------------------- the rules
def test_hpa_keeps_the_count_within_the_tolerance_and_scales_by_the_ratio_beyond() -> None:
    assert hpa.utilization_recommendation(10, 76.0, 70.0) == 10  # ratio 1.086
    assert hpa.utilization_recommendation(10, 80.0, 70.0) == 12  # ceil(10 * 1.143)
    assert hpa.utilization_recommendation(10, 35.0, 70.0) == 5
    assert hpa.utilization_recommendation(10, None, 70.0) == 10


def test_hpa_default_behaviour_limits_scale_up_and_stabilizes_scale_down() -> None:
    bounds = hpa.Bounds(1, 100)
    # one 15 s sync: at most max(2 x current, 4)
    assert hpa.stabilized(1, 50, [], bounds, seconds=15) == 4
    assert hpa.stabilized(10, 50, [], bounds, seconds=15) == 20
    # a minute is four syncs: 1 -> 4 -> 8 -> 16 -> 32; from 10 the 50 asked for is within reach
    assert hpa.stabilized(1, 50, [], bounds) == 32
    assert hpa.stabilized(10, 50, [], bounds) == 50
    assert hpa.stabilized(10, 3, [9, 7], bounds) == 9  # the highest recommendation of the window
    assert hpa.stabilized(10, 3, [], bounds) == 3


def test_queue_rule_asks_for_in_flight_over_the_per_replica_target() -> None:
    assert hpa.in_flight_target(50) == pytest.approx(35.0)
    assert hpa.in_flight_recommendation(4, 350.0, 35.0) == 10
    assert hpa.in_flight_recommendation(4, 145.0, 35.0) == 4  # within 10% of 4 x 35
    assert hpa.in_flight_recommendation(4, None, 35.0) == 4  # no ready server: no data, hold
    assert 'sum(vllm:num_requests_waiting{job="inference/chat",namespace="inference"' in hpa.in_flight_query(
        "inference", "chat"
    )


def test_the_seed_rule_waits_its_window_before_scaling_out() -> None:
    outcome = cl.run("seed", RULE, POOL, CAPACITY, [2.0] + [8.0] * 30)
    first = next(m.minute for m in outcome.timeline if m.replicas > 2)
    window = RULE.scale_out_after_minutes
    seen = [m.utilization or 0.0 for m in outcome.timeline]
    # the first minute whose full window (the minute and the window - 1 before it) averages above 85%
    hot = next(
        end
        for end in range(window - 1, len(seen))
        if sum(seen[end - window + 1 : end + 1]) / window > RULE.scale_out_above_percent
    )
    assert seen[0] < RULE.scale_out_above_percent  # the cold first minute is inside that window
    assert first == hot
    assert outcome.timeline[first].replicas == 2 + RULE.scale_out_replicas


def test_on_a_spike_the_queue_rule_violates_fewer_minutes_than_the_seed_rule() -> None:
    demand = cl.builtin_trace("spike", CAPACITY.requests_per_second)
    seed, queue = (cl.run(name, RULE, POOL, CAPACITY, demand) for name in ("seed", "queue"))
    assert queue.slo_violation_minutes < seed.slo_violation_minutes
    assert cl.best([seed, queue]) is queue


# --------------------------------------------------------------------------------------------- traces
@pytest.mark.parametrize("shape", cl.TRACES)
def test_builtin_traces_are_seeded(shape: str) -> None:
    assert cl.builtin_trace(shape, 2.0, seed=1) == cl.builtin_trace(shape, 2.0, seed=1)
    assert cl.builtin_trace(shape, 2.0, seed=1) != cl.builtin_trace(shape, 2.0, seed=2)


def test_a_demand_csv_in_requests_or_gpu_seconds(tmp_path: Path) -> None:
    rps = tmp_path / "rps.csv"
    rps.write_text("minute,requests_per_second\n0,1.5\n1,3\n")
    assert cl.read_demand(rps, 2.0, 1) == [1.5, 3.0]
    work = tmp_path / "work.csv"
    work.write_text("gpu_seconds\n120\n60\n")
    assert cl.read_demand(work, 2.0, 1) == [4.0, 2.0]  # 2 and 1 busy GPUs' worth at 2 req/s each
    with pytest.raises(ConfigError, match="needs the requests/s one replica serves"):
        cl.read_demand(rps, 1.0, 1, unit="replicas")


def test_a_bad_demand_csv_reports_every_bad_row_once(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("requests_per_second\n1\nbusy\n-2\n\nnan\n")
    with pytest.raises(ConfigError) as error:
        cl.read_demand(bad, 2.0, 1)
    where = [p.path for p in error.value.problems]
    assert where == [f"{bad}:3", f"{bad}:4", f"{bad}:5", f"{bad}:6"]
    header = tmp_path / "header.csv"
    header.write_text("when,load\n0,1\n")
    with pytest.raises(ConfigError, match="no `requests_per_second` or `gpu_seconds` column"):
        cl.read_demand(header, 2.0, 1)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"requests_per_second\n\xff\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        cl.read_demand(binary, 2.0, 1)


# --------------------------------------------------------------------------------------------- catalog, CLI, docs
def test_the_catalog_has_a_sourced_figure_or_says_it_has_none() -> None:
    figure = serving_capacity.throughput("Qwen2.5-7B-Instruct", "A40")
    assert figure is not None and figure.requests_per_second == 2.13 and figure.source == "DBMA40"
    assert serving_capacity.throughput("models/Qwen2.5-7B-Instruct", "A40") == figure
    assert serving_capacity.throughput("Qwen2.5-7B-Instruct", "L40S") is None
    assert serving_capacity.node_start_minutes().source == "NODESTART"


def test_simulate_compares_the_rules_on_a_demand_trace(blueprint_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    image = tmp_path / "out.svg"
    result = blueprint_cli("simulate", "--stack", "inference", "--demand", "spike", "--plot", str(image))
    assert result.returncode == 0, result.stderr
    assert all(rule in result.stdout for rule in cl.RULES) and "(best)" in result.stdout
    assert "no sourced throughput for Qwen2.5-7B-Instruct on L40S" in " ".join(result.stdout.split())
    svg = image.read_text()
    assert svg.startswith("<?xml")
    drawn = set(labels(svg.encode()))
    assert {"inference/chat", "spike: demand and ready capacity", "spike: replicas", "replicas", "minute"} <= drawn
    assert {"demand", *(f"capacity: {rule}" for rule in cl.RULES), *cl.RULES} <= drawn


def test_the_comparison_plot_fits_five_digit_demand_and_titles_a_trace_file_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Demand of five digits, the widest the comparison's margins (`blueprint.closed_loop.MARGINS`) are sized for;
    two traces, as the docs' plot has rows."""
    capacity = replace(CAPACITY, requests_per_second=2000.0)
    model = cl.Model("chat", RULE, POOL, capacity, "req/s", "a test figure", 1)
    demand = [30000.0] * 20 + [60000.0] * 40
    trace = str(tmp_path / "a-directory-of-demand-traces-with-a-long-name" / "demand.csv")
    results = {trace: cl.compare(RULE, POOL, capacity, demand), "spike": cl.compare(RULE, POOL, capacity, demand)}
    figure = built(monkeypatch, cl, lambda: cl.plot(results, model, "inference/chat", io.BytesIO(), "svg"))
    titles = [axes.get_title() for axes in figure.axes[:2]]
    assert titles == ["demand.csv: demand and ready capacity", "demand.csv: replicas"]
    assert figure.texts and figure.get_suptitle() == "inference/chat"
    assert max(len(tick) for tick in shown_y_ticks(figure.axes[0])) == 5
    assert_laid_out(figure)


def test_every_format_plot_names_is_written_the_same_on_each_run() -> None:
    """A figure without text (no fonts to lay out or embed: the plots' labels are checked above); its clipped line
    gives the SVG an id from the salt."""
    import matplotlib  # here, not at the top: collecting this file does not import matplotlib

    salt = matplotlib.rcParams["svg.hashsalt"]
    figure, ((axes,),) = plot_figure.axes_grid(1, 1, (2, 1.5), plot_figure.Margins(0.4, 0.1, 0.3, 0.3))
    axes.plot([0, 1], [0, 1])
    axes.set_axis_off()
    written: dict[str, bytes] = {}
    for image_format in PLOT_FORMATS:  # each twice: an SVG's ids come from a salt, random unless fixed
        first, second = io.BytesIO(), io.BytesIO()
        plot_figure.write(figure, first, image_format, dpi=20)
        plot_figure.write(figure, second, image_format, dpi=20)
        assert first.getvalue() == second.getvalue(), image_format
        written[image_format] = first.getvalue()
    assert {f: image[: len(SIGNATURES[f])] for f, image in written.items()} == SIGNATURES
    assert b"clip-path" in written["svg"] and b"dc:date" not in written["svg"] and b"CreationDate" not in written["pdf"]
    assert matplotlib.rcParams["svg.hashsalt"] == salt, "the salt is set for the write only, not for the process"


def test_simulate_refuses_bad_demand_input(blueprint_cli: Callable[..., CliResult], tmp_path: Path) -> None:
    bad = tmp_path / "d.csv"
    bad.write_text("requests_per_second\n1\nlots\n")
    result = blueprint_cli("simulate", "--stack", "inference", "--demand", str(bad), "--replica-rps", "2")
    assert result.returncode == 2 and f"{bad}:3" in result.stderr and "Traceback" not in result.stderr
    missing = blueprint_cli("simulate", "--stack", "inference", "--demand", str(tmp_path / "none.csv"))
    assert missing.returncode == 74
    usage = blueprint_cli("simulate", "--stack", "inference", "--replica-rps", "0")
    assert usage.returncode == 64


def test_the_docs_comparison_is_the_simulations() -> None:
    assert simulation_docs.main(["--check"]) == 0, "run python -m blueprint.simulation_docs --write"
    assert simulation_docs.PLOT.read_text(encoding="utf-8").startswith("<?xml")


def test_the_queue_rule_plans_a_keda_trigger_on_vllm_requests() -> None:
    rule = hpa.QueueRule(min_replicas=2, max_replicas=32, target_in_flight=hpa.in_flight_target(50))
    spec = hpa.queue_scaled_object(rule, "inference", "chat", "http://prometheus:9090")
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    assert trigger["metadata"]["threshold"] == "35"
    assert trigger["metadata"]["query"] == hpa.in_flight_query("inference", "chat")
    assert trigger["metadata"]["ignoreNullValues"] == "false"
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 32) and "advanced" not in spec
