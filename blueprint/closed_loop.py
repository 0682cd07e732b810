"""`blueprint simulate --demand`: a closed-loop model of a serving workload under a demand trace, one minute a step.

Demand (requests/s) meets the ready replicas' capacity; what is not served waits in vLLM's queue. Each rule sees what
it would see in the cluster (the seed rule and the plain HPA: the replicas' average GPU utilization, 0 on a replica
still loading its model; the queue rule: vLLM's running and waiting requests, from ready servers only) and sets the
Deployment's replicas; cluster-autoscaler starts nodes for replicas that do not fit (`node start` minutes) and
removes nodes unneeded for its scale-down time; a scheduled replica serves after `model load` minutes. Output per
rule: SLO-violation minutes (demand above ready capacity), GPU-hours and node cost. Deterministic: the traces' noise
comes from a seeded generator. Facts and their sources: components/catalog/serving_capacity.yaml; the rules:
components/planning/serving_autoscaling.py and serving_policies.py; the comparison: docs/serving-simulation.md.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from blueprint.plot_figure import Margins, axes_grid, write
from blueprint.simulate import read_csv_rows
from components.catalog import prices, serving_capacity
from components.config import StackConfig
from components.errors import ConfigError, Problem
from components.planning import serving_policies as hpa
from components.planning.cost import nodes_cost
from components.planning.serving_autoscaling import HOLD, SAMPLE_SECONDS, ServingRule, decide, hpa_step
from components.planning.stack_plan import plan_stack

TRACES = ("diurnal", "spike", "ramp")
RULES = ("seed", "hpa-utilization", "queue")
RULE_TITLES = {
    "seed": "seed rule (GPU util, 85%/15 min up, 30%/30 min down)",
    "hpa-utilization": f"plain HPA on GPU util (target {hpa.UTILIZATION_TARGET_PERCENT:g}%)",
    "queue": "KEDA on vLLM running + waiting requests",
}
#: The longest trace accepted: a week of minutes.
MAX_MINUTES = 7 * 24 * 60
DEFAULT_SEED = 7


@dataclass(frozen=True)
class Capacity:
    """One replica's serving capacity and the delays before new capacity serves."""

    requests_per_second: float
    #: Requests in flight on one replica at that throughput (the queue rule's per-replica target).
    concurrency: int
    node_start_minutes: int
    model_load_minutes: int
    #: The queue rule's requests in flight per replica when the stack plans its own (`autoscaling.
    #: targetInFlightPerReplica`), else 70% of `concurrency`.
    queue_target: float | None = None

    @property
    def in_flight_target(self) -> float:
        return self.queue_target if self.queue_target is not None else hpa.in_flight_target(self.concurrency)


@dataclass(frozen=True)
class Pool:
    """The pool as the simulation needs it: node bounds, slots, GPUs per node and the node cost per hour."""

    replicas_per_node: int
    gpus_per_node: int
    min_nodes: int
    max_nodes: int
    scale_down_unneeded_minutes: int
    #: Hourly cost of `n` nodes (the plan's cost model: on-demand base, spot share).
    cost_per_hour: Callable[[int], float]


@dataclass(frozen=True)
class Minute:
    minute: int
    demand: float
    capacity: float
    replicas: int
    ready: int
    nodes: int
    queue: float
    utilization: float | None


@dataclass(frozen=True)
class Outcome:
    rule: str
    timeline: tuple[Minute, ...]
    slo_violation_minutes: int
    gpu_hours: float
    cost_usd: float
    peak_replicas: int


# ------------------------------------------------------------------------------------------------------ traces
def builtin_trace(shape: str, per_replica: float, seed: int = DEFAULT_SEED) -> list[float]:
    """Requests/s per minute, in multiples of one replica's capacity, with +-5% seeded noise. `diurnal`: a day
    between 3 and 20 replicas' worth; `spike`: 6 h at 4 with 30 min at 16 from hour 2; `ramp`: 6 h climbing from 2 to
    24 over 4 h, an hour at the top, an hour back at 2."""
    rng = random.Random(seed)
    if shape == "diurnal":
        load = [11.5 - 8.5 * math.cos(2 * math.pi * (m - 180) / 1440) for m in range(1440)]
    elif shape == "spike":
        load = [16.0 if 120 <= m < 150 else 4.0 for m in range(360)]
    elif shape == "ramp":
        load = [2 + 22 * min(1.0, m / 240) if m < 300 else 2.0 for m in range(360)]
    else:
        raise ValueError(f"unknown trace {shape}")
    return [round(x * per_replica * rng.uniform(0.95, 1.05), 3) for x in load]


DEMAND_COLUMNS = ("requests_per_second", "gpu_seconds")


def read_demand(path: Path, per_replica: float, gpus_per_replica: int, unit: str = "req/s") -> list[float]:
    """One row a minute: a `requests_per_second` column, or `gpu_seconds` (GPU-seconds of work arriving in that
    minute, turned into requests/s at the replica's throughput). Every bad row is reported, each once. Requests/s
    need a throughput figure (`unit` `req/s`)."""
    rows = read_csv_rows(path, "trace")
    wanted = " or ".join(f"`{c}`" for c in DEMAND_COLUMNS)
    if not rows:
        raise ConfigError([Problem(str(path), f"empty file; give a header with {wanted} and one row a minute")])
    header = [cell.strip().lower() for cell in rows[0]]
    column = next((c for c in DEMAND_COLUMNS if c in header), None)
    if column is None:
        raise ConfigError([Problem(f"{path}:1", f"no {wanted} column in the header {rows[0]!r}")])
    if column == "requests_per_second" and unit != "req/s":
        raise ConfigError(
            [Problem(str(path), "requests_per_second needs the requests/s one replica serves: give --replica-rps")]
        )
    index = header.index(column)
    problems: list[Problem] = []
    values: list[float] = []
    body = rows[1:]
    if not body:
        problems.append(Problem(str(path), "no rows after the header; give one row a minute"))
    if len(body) > MAX_MINUTES:
        problems.append(Problem(str(path), f"{len(body)} rows; at most {MAX_MINUTES} (a week of minutes)"))
    for line, row in enumerate(body[:MAX_MINUTES], start=2):
        cell = row[index].strip() if index < len(row) else ""
        try:
            value = float(cell)
        except ValueError:
            value = -1.0
        if not math.isfinite(value) or value < 0:
            problems.append(Problem(f"{path}:{line}", f"{column} {cell!r} is not a number of 0 or more"))
            continue
        values.append(value if column == "requests_per_second" else value / 60 / gpus_per_replica * per_replica)
    if problems:
        raise ConfigError(problems)
    return values


# -------------------------------------------------------------------------------------------------- the rules
@dataclass
class _Seen:
    """What a rule has observed so far."""

    utilization: list[float | None] = field(default_factory=list)
    #: (minute, recommendation) within the HPA's stabilization window; older ones are dropped as minutes advance.
    recommendations: deque[tuple[int, int]] = field(default_factory=deque)
    changes: list[tuple[int, int]] = field(default_factory=list)


def _seed_rule(rule: ServingRule) -> Callable[[int, int, float | None, float | None, _Seen], int]:
    def step(minute: int, replicas: int, utilization: float | None, _in_flight: float | None, seen: _Seen) -> int:
        steady = minute - seen.changes[-1][0] // SAMPLE_SECONDS if seen.changes else None
        value = decide(rule, seen.utilization, steady)
        return replicas if value == HOLD else hpa_step(rule, value, replicas, seen.changes, minute * SAMPLE_SECONDS)

    return step


def _hpa_rule(bounds: hpa.Bounds, recommend: Callable[[int, float | None, float | None], int]) -> Callable[..., int]:
    window = hpa.HPA_DOWNSCALE_STABILIZATION_SECONDS // SAMPLE_SECONDS

    def step(minute: int, replicas: int, utilization: float | None, in_flight: float | None, seen: _Seen) -> int:
        wanted = recommend(replicas, utilization, in_flight)
        while seen.recommendations and minute - seen.recommendations[0][0] >= window:
            seen.recommendations.popleft()
        recent = [r for _, r in seen.recommendations]
        seen.recommendations.append((minute, wanted))
        return hpa.stabilized(replicas, wanted, recent, bounds, SAMPLE_SECONDS)

    return step


def rule_step(name: str, rule: ServingRule, capacity: Capacity) -> Callable[..., int]:
    bounds = hpa.Bounds(rule.min_replicas, rule.max_replicas)
    if name == "seed":
        return _seed_rule(rule)
    if name == "hpa-utilization":
        target = hpa.UTILIZATION_TARGET_PERCENT
        return _hpa_rule(bounds, lambda r, u, _q: hpa.utilization_recommendation(r, u, target))
    if name == "queue":
        return _hpa_rule(bounds, lambda r, _u, q: hpa.in_flight_recommendation(r, q, capacity.in_flight_target))
    raise ValueError(f"unknown rule {name}")


# ------------------------------------------------------------------------------------------------- the model
def run(name: str, rule: ServingRule, pool: Pool, capacity: Capacity, demand: Sequence[float]) -> Outcome:
    """One rule through the trace. Starts settled: the replicas the first minute's demand needs at the targets'
    headroom, all ready, on the nodes they need (the same start for every rule)."""
    step = rule_step(name, rule, capacity)
    per_node = pool.replicas_per_node
    first = demand[0] if demand else 0.0
    settled = math.ceil(first / (capacity.requests_per_second * hpa.IN_FLIGHT_TARGET_SHARE))
    replicas = hpa.Bounds(rule.min_replicas, rule.max_replicas).clamp(settled)
    nodes_ready = max(pool.min_nodes, min(pool.max_nodes, math.ceil(replicas / per_node)))
    starting: list[int] = []  # minutes at which starting nodes become Ready
    pods: list[int] = [0] * replicas  # minute each scheduled replica serves from
    queue = 0.0
    unneeded_since: int | None = None
    seen = _Seen()
    timeline: list[Minute] = []
    violations, gpu_minutes, cost = 0, 0.0, 0.0
    for minute, rps in enumerate(demand):
        nodes_ready += sum(1 for at in starting if at <= minute)
        starting = [at for at in starting if at > minute]
        # Schedule pending replicas on free slots of Ready nodes; each then loads its model.
        free = nodes_ready * per_node - len(pods)
        pods += [minute + capacity.model_load_minutes] * max(0, min(free, replicas - len(pods)))
        ready = sum(1 for at in pods if at <= minute)
        serving = ready * capacity.requests_per_second
        work = queue + rps * SAMPLE_SECONDS  # requests waiting plus this minute's arrivals
        served = min(work, serving * SAMPLE_SECONDS) / SAMPLE_SECONDS  # requests/s
        queue = work - served * SAMPLE_SECONDS
        violations += rps > serving
        # What the rules see: GPU utilization averaged over scheduled replicas (0 while loading), and requests
        # running (Little's law at the benchmark's concurrency) plus waiting, reported by ready servers only.
        utilization = None if not pods else 100 * served / capacity.requests_per_second / len(pods)
        in_flight = None if ready == 0 else served / capacity.requests_per_second * capacity.concurrency + queue
        seen.utilization.append(None if utilization is None else round(min(100.0, utilization), 3))
        new = step(minute, replicas, seen.utilization[-1], in_flight, seen)
        if new != replicas:
            seen.changes.append((minute * SAMPLE_SECONDS, new - replicas))
        if new < len(pods):  # the ReplicaSet removes replicas not yet ready first
            pods = sorted(pods)[:new]
        replicas = new
        # cluster-autoscaler: start nodes for replicas that fit nowhere; remove nodes unneeded long enough.
        needed = max(pool.min_nodes, min(pool.max_nodes, math.ceil(replicas / per_node)))
        have = nodes_ready + len(starting)
        if needed > have:
            starting += [minute + capacity.node_start_minutes] * (needed - have)
            unneeded_since = None
        elif needed < nodes_ready and not starting:
            unneeded_since = minute if unneeded_since is None else unneeded_since
            if minute - unneeded_since >= pool.scale_down_unneeded_minutes:
                nodes_ready, unneeded_since = max(needed, math.ceil(len(pods) / per_node), pool.min_nodes), None
        else:
            unneeded_since = None
        billed = nodes_ready + len(starting)
        gpu_minutes += billed * pool.gpus_per_node
        cost += pool.cost_per_hour(billed) / 60
        timeline.append(Minute(minute, rps, serving, replicas, ready, billed, round(queue, 3), utilization))
    return Outcome(
        name,
        tuple(timeline),
        violations,
        round(gpu_minutes / 60, 1),
        round(cost, 2),
        max((m.replicas for m in timeline), default=replicas),
    )


def compare(
    rule: ServingRule, pool: Pool, capacity: Capacity, demand: Sequence[float], rules: Sequence[str] = RULES
) -> list[Outcome]:
    return [run(name, rule, pool, capacity, demand) for name in rules]


def best(outcomes: Sequence[Outcome]) -> Outcome:
    """Fewest SLO-violation minutes, then the lowest cost."""
    return min(outcomes, key=lambda o: (o.slo_violation_minutes, o.cost_usd))


# --------------------------------------------------------------------------------------------- from the stack
@dataclass(frozen=True)
class Model:
    """A stack's serving workload as the simulation sees it."""

    workload: str
    rule: ServingRule
    pool: Pool
    capacity: Capacity
    #: `req/s`, or `replicas` when no throughput figure is known (demand in replicas' worth of work).
    unit: str
    #: Where the capacity figure came from, for the printed header.
    basis: str
    gpus_per_replica: int


def stack_model(
    spec: StackConfig,
    workload_name: str | None,
    replica_rps: float | None = None,
    node_start_minutes: int | None = None,
    model_load_minutes: int | None = None,
) -> Model:
    """The workload's planned rule and pool, and its capacity: `replica_rps`, else the catalog's figure for its model
    on the pool's GPU, else one replica's worth of work a second (demand then counts in replicas)."""
    from blueprint.simulate import minutes, stack_rule

    name, rule = stack_rule(spec, workload_name)
    workload = next(w for w in spec.workloads.serving if w.name == name)
    stack = plan_stack(spec)
    plan = stack.pool(workload.pool)
    planned_queue = stack.queue_rules.get(name)
    instance = plan.instance
    gpu = plan.gpu_model or "an unknown GPU"
    figure = serving_capacity.throughput(workload.model, gpu)
    if replica_rps is not None:
        rps, unit, basis = replica_rps, "req/s", f"{replica_rps:g} req/s per replica (--replica-rps)"
    elif figure is not None:
        rps, unit = figure.requests_per_second, "req/s"
        basis = f"{rps:g} req/s per replica: {figure.model} on {figure.gpu}, {figure.workload} [{figure.source}]"
    else:
        rps, unit = 1.0, "replicas"
        basis = (
            f"no sourced throughput for {workload.model} on {gpu} (components/catalog/serving_capacity.yaml):"
            " demand in replicas' worth of work; give --replica-rps for requests/s"
        )
    node_start = serving_capacity.node_start_minutes()
    model_load = serving_capacity.model_load_minutes()
    capacity = Capacity(
        requests_per_second=rps,
        # Without a figure only the queue rule's planned threshold depends on it; the verdicts do not (demand,
        # capacity and targets all scale with it).
        concurrency=figure.concurrency if figure is not None else hpa.UNMEASURED_CONCURRENCY,
        node_start_minutes=node_start.minutes if node_start_minutes is None else node_start_minutes,
        model_load_minutes=model_load.minutes if model_load_minutes is None else model_load_minutes,
        queue_target=planned_queue.target_in_flight if planned_queue is not None else None,
    )
    price = prices.on_demand_usd_per_hour(instance.name, spec.region) if instance is not None else None
    discount = prices.spot_discount_estimate()

    def cost_per_hour(nodes: int) -> float:
        return 0.0 if price is None else nodes_cost(plan, nodes, price, discount)

    pool = Pool(
        replicas_per_node=rule.replicas_per_node,
        gpus_per_node=plan.gpus_per_node,
        min_nodes=rule.min_nodes,
        max_nodes=rule.max_nodes,
        scale_down_unneeded_minutes=minutes(spec.addons.cluster_autoscaler.scale_down_unneeded_time),
        cost_per_hour=cost_per_hour,
    )
    return Model(name, rule, pool, capacity, unit, basis, workload.gpus_per_replica)


def demand_trace(model: Model, source: str, seed: int = DEFAULT_SEED) -> list[float]:
    """A built-in shape by name, else the CSV at that path (ConfigError for bad content, OSError if unreadable)."""
    if source in TRACES:
        return builtin_trace(source, model.capacity.requests_per_second, seed)
    path = Path(source)
    values = read_demand(path, model.capacity.requests_per_second, model.gpus_per_replica, model.unit)
    return values


# --------------------------------------------------------------------------------------------------- reporting
def comparison(model: Model, traces: Sequence[str], seed: int = DEFAULT_SEED) -> dict[str, list[Outcome]]:
    """Every rule on every built-in trace (the same demand for each rule)."""
    return {t: compare(model.rule, model.pool, model.capacity, demand_trace(model, t, seed)) for t in traces}


def table_rows(results: dict[str, list[Outcome]]) -> list[tuple[str, ...]]:
    """trace, rule, SLO-violation minutes, GPU-hours, cost, peak replicas; the best rule per trace marked."""
    rows: list[tuple[str, ...]] = []
    for trace, outcomes in results.items():
        winner = best(outcomes).rule
        for o in outcomes:
            mark = " (best)" if o.rule == winner else ""
            rows.append(
                (
                    trace,
                    o.rule + mark,
                    str(o.slo_violation_minutes),
                    f"{o.gpu_hours:.1f}",
                    f"{o.cost_usd:.2f}",
                    str(o.peak_replicas),
                )
            )
    return rows


TABLE_HEADER = ("trace", "rule", "SLO-violation min", "GPU-hours", "cost $", "peak replicas")


#: Room for a unit label, tick labels of up to five digits, the title and each row's titles, minute axis.
MARGINS = Margins(left=0.9, right=0.15, top=0.7, bottom=0.6, between_rows=0.8, between_columns=0.6)


def plot(results: dict[str, list[Outcome]], model: Model, title: str, out: Path | IO[bytes], image_format: str) -> None:
    """Per trace: demand and each rule's ready capacity (left), each rule's replicas (right), written to a path or an
    open file in `image_format` (one of `blueprint.simulate.PLOT_FORMATS`). Needs matplotlib; the same run writes
    the same file (`blueprint.plot_figure.write`)."""
    from matplotlib.ticker import MaxNLocator

    figure, axes = axes_grid(len(results), 2, (12, 3.2 * len(results)), MARGINS)
    for (trace, outcomes), (left, right) in zip(results.items(), axes, strict=True):
        name = Path(trace).name  # a trace file by its name: a whole path would run into the next title
        x = [m.minute for m in outcomes[0].timeline]
        left.plot(x, [m.demand for m in outcomes[0].timeline], color="black", linewidth=1, label="demand")
        for o in outcomes:
            left.step(x, [m.capacity for m in o.timeline], where="post", linewidth=1, label=f"capacity: {o.rule}")
            right.step(x, [m.replicas for m in o.timeline], where="post", linewidth=1, label=o.rule)
        left.set_title(f"{name}: demand and ready capacity", fontsize="small")
        left.set_ylabel(model.unit)
        right.set_title(f"{name}: replicas", fontsize="small")
        right.yaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in (left, right):
            ax.set_xlabel("minute")
            ax.legend(loc="upper right", fontsize="x-small")
    figure.suptitle(title)
    write(figure, out, image_format, dpi=80)
