"""`blueprint simulate`: replay a GPU-utilization series through a stack's serving autoscaling rule.

The rule is the one the stack deploys (`components.planning.serving_autoscaling.serving_rule`); the series is one
sample a minute of the serving pods' average GPU utilization (`--series FILE.csv`, else a built-in day). The plot
needs matplotlib (the `dev` extra). See docs/addons.md#serving-autoscaling.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from blueprint.plot_figure import Margins, axes_grid, write
from components.config import StackConfig
from components.errors import ConfigError, Problem
from components.planning.serving_autoscaling import ServingRule, Step, simulate
from components.planning.stack_plan import plan_stack

_DURATION = re.compile(r"^(\d+)([smh])$")
#: Image formats `--plot` writes, by file suffix: common ones among those matplotlib's savefig renders on the Agg
#: canvas (`FigureCanvasAgg.get_supported_filetypes()`); savefig picks the format by suffix.
PLOT_FORMATS = ("png", "svg", "pdf", "jpg", "jpeg", "webp")


def demo_series() -> list[float | None]:
    """A made-up day in minutes: quiet, a morning ramp above 85% for 40 minutes, busy, an evening lull below 30% for
    two hours, and a short spike that is too short to count."""
    segments: list[tuple[int, float | None]] = [
        (10, None),  # replicas loading: no data yet
        (50, 55.0),
        (40, 92.0),  # above 85% for 40 min: scale-out after 15, again after the cooldown if still high
        (60, 50.0),
        (10, 95.0),  # a 10-minute spike: the 15-minute average stays at 80%, not enough
        (60, 60.0),
        (120, 12.0),  # below 30% for 2 h: one node's worth removed after 30 min, then once per cooldown
        (30, 50.0),
    ]
    return [value for minutes, value in segments for _ in range(minutes)]


def read_csv_rows(path: Path, what: str) -> list[list[str]]:
    """The rows of a user's CSV file (a byte-order mark allowed); a file that is not UTF-8 is a ConfigError naming
    the byte, `what` naming the file's role ("series", "trace"). OSError passes through (exit 74 in the CLI)."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            return list(csv.reader(handle))
    except UnicodeDecodeError as error:
        raise ConfigError(
            [Problem(str(path), f"byte {error.start} is not UTF-8; save the {what} as UTF-8 CSV")]
        ) from None


def read_series(path: Path) -> list[float | None]:
    """One float (percent) per row from a `utilization` column, or the only column; empty cells are None."""
    rows = read_csv_rows(path, "series")
    if not rows:
        raise ConfigError([Problem(str(path), "empty series; give one utilization percentage per minute")])
    header = [cell.strip().lower() for cell in rows[0]]
    column = header.index("utilization") if "utilization" in header else 0
    body = rows[1:] if "utilization" in header or not _is_number(rows[0][column]) else rows
    out: list[float | None] = []
    for number, row in enumerate(body, start=1):
        cell = row[column].strip() if column < len(row) else ""
        if cell and not (_is_number(cell) and 0 <= float(cell) <= 100):
            raise ConfigError([Problem(f"{path}:{number}", f"{cell!r} is not a percentage from 0 to 100")])
        out.append(float(cell) if cell else None)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def minutes(duration: str) -> int:
    """`10m`, `600s`, `1h` -> whole minutes (cluster-autoscaler's duration flags as the config writes them)."""
    match = _DURATION.match(duration)
    if match is None:
        raise ValueError(f"not a duration: {duration}")
    value, unit = int(match[1]), match[2]
    return {"s": value // 60, "m": value, "h": value * 60}[unit]


def stack_rule(spec: StackConfig, workload_name: str | None) -> tuple[str, ServingRule]:
    """The named serving workload's rule (default the first), or ConfigError naming the choices."""
    serving = spec.workloads.serving
    if not serving:
        raise ConfigError([Problem("workloads.serving", "the stack has no serving workload to simulate")])
    names = [w.name for w in serving]
    if workload_name is not None and workload_name not in names:
        raise ConfigError([Problem("workloads.serving", f"no workload {workload_name}; choose one of {names}")])
    workload = next(w for w in serving if workload_name in (None, w.name))
    return workload.name, plan_stack(spec).serving[workload.name]


def timeline_rows(steps: Sequence[Step], every_minute: bool) -> list[tuple[str, ...]]:
    """Rows of the printed timeline: the first minute, every change of replicas or nodes (or every minute)."""
    rows: list[tuple[str, ...]] = []
    previous: Step | None = None
    for step in steps:
        changed = previous is None or (step.replicas, step.nodes) != (previous.replicas, previous.nodes)
        if every_minute or changed:
            utilization = "-" if step.utilization is None else f"{step.utilization:g}"
            rows.append((str(step.minute), utilization, step.action, str(step.replicas), str(step.nodes)))
        previous = step
    return rows


#: Room for the "%" and "count" labels, tick labels of up to four digits, the title, the shared minute axis.
MARGINS = Margins(left=0.8, right=0.15, top=0.4, bottom=0.6, between_rows=0.25)


def plot(steps: Sequence[Step], rule: ServingRule, title: str, out: Path | IO[bytes], image_format: str) -> None:
    """Utilization with the two thresholds above; replicas and nodes below, written to a path or an open file in
    `image_format` (one of `PLOT_FORMATS`). Needs matplotlib."""
    from matplotlib.ticker import MaxNLocator

    x = [s.minute for s in steps]
    figure, ((top,), (bottom,)) = axes_grid(2, 1, (10, 6), MARGINS, sharex=True)
    top.plot(x, [float("nan") if s.utilization is None else s.utilization for s in steps], label="GPU utilization")
    top.axhline(rule.scale_out_above_percent, color="tab:red", linestyle="--", label="scale-out threshold")
    top.axhline(rule.scale_in_below_percent, color="tab:green", linestyle="--", label="scale-in threshold")
    top.set_ylabel("%")
    top.set_ylim(0, 100)
    top.legend(loc="upper right", fontsize="small")
    top.set_title(title)
    bottom.step(x, [s.replicas for s in steps], where="post", label="replicas")
    bottom.step(x, [s.nodes for s in steps], where="post", label="nodes")
    bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.set_xlabel("minute")
    bottom.set_ylabel("count")
    bottom.legend(loc="upper right", fontsize="small")
    write(figure, out, image_format, dpi=100)


__all__ = ["demo_series", "minutes", "plot", "read_series", "simulate", "stack_rule", "timeline_rows"]
