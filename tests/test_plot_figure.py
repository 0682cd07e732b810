"""`blueprint simulate --plot`'s figures (blueprint.plot_figure): written in every format `--plot` names, the same
bytes on each run, the labels inside the figure and clear of each other on the fixed margins, a trace file titled by
its name."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import matplotlib
import pytest

from blueprint import closed_loop as cl
from blueprint import plot_figure
from blueprint import simulate as sim
from components.planning.serving_autoscaling import Step
from tests.test_closed_loop import CAPACITY, POOL, RULE

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Magic bytes of each format `--plot` writes.
SIGNATURES = {
    "png": b"\x89PNG\r\n\x1a\n",
    "svg": b"<?xml",
    "pdf": b"%PDF-",
    "jpg": b"\xff\xd8\xff",
    "jpeg": b"\xff\xd8\xff",
    "webp": b"RIFF",
}
#: A replay whose replica counts take four digits, the widest the replay's margins are sized for.
STEPS = [Step(m, None if m < 2 else 90.0, "hold", 2 if m < 10 else 1200, 1 if m < 10 else 300) for m in range(20)]


def labels(svg: bytes) -> list[str]:
    """The texts an SVG draws: matplotlib writes each text's string in a comment before its glyphs."""
    return [text.decode() for text in re.findall(rb"<!-- (.*?) -->", svg)]


def shown_y_ticks(axes: Axes) -> list[str]:
    """The y tick labels drawn: those inside the axis' limits."""
    low, high = sorted(axes.get_ylim())
    return [label.get_text() for label in axes.get_yticklabels() if low <= label.get_position()[1] <= high]


def drawn(monkeypatch: pytest.MonkeyPatch, module: ModuleType, draw: Callable[[], None]) -> Figure:
    """The figure `draw` builds in `module`, laid out as it would be written."""
    figures: list[Figure] = []
    monkeypatch.setattr(module, "write", lambda figure, *_args, **_kwargs: figures.append(figure))
    draw()
    (figure,) = figures
    figure.draw_without_rendering()
    return figure


def assert_laid_out(figure: Figure) -> None:
    """Every axes with its tick labels, axis labels, title and legend inside the figure, no two of them and the
    figure's title overlapping."""
    boxes = [axes.get_tightbbox() for axes in figure.axes] + [text.get_window_extent() for text in figure.texts]
    for box in boxes:
        assert box is not None
        assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1, (box, figure.bbox)
        assert figure.bbox.y0 <= box.y0 and box.y1 <= figure.bbox.y1, (box, figure.bbox)
    for i, box in enumerate(boxes):
        for other in boxes[i + 1 :]:
            assert box is not None and other is not None and not box.overlaps(other), (box, other)


@pytest.mark.parametrize("image_format", sim.PLOT_FORMATS)
def test_every_format_plot_names_is_written_the_same_on_each_run(image_format: str) -> None:
    salt = matplotlib.rcParams["svg.hashsalt"]
    runs = []
    for _ in range(2):
        figure, ((axes,),) = plot_figure.axes_grid(1, 1, (2, 1.5), plot_figure.Margins(0.4, 0.1, 0.3, 0.3))
        axes.plot([0, 1], [0, 1], label="demand")
        axes.set_title("spike: replicas")
        axes.legend()
        out = io.BytesIO()
        plot_figure.write(figure, out, image_format, dpi=20)
        runs.append(out.getvalue())
    assert runs[0].startswith(SIGNATURES[image_format])
    assert runs[0] == runs[1]
    assert b"dc:date" not in runs[0] and b"CreationDate" not in runs[0]
    assert matplotlib.rcParams["svg.hashsalt"] == salt, "the salt is set for the write only, not for the process"
    if image_format == "svg":
        assert {"spike: replicas", "demand"} <= set(labels(runs[0]))


def test_the_replay_plot_fits_four_digit_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    figure = drawn(monkeypatch, sim, lambda: sim.plot(STEPS, RULE, "inference/chat", io.BytesIO(), "png"))
    assert max(len(tick) for tick in shown_y_ticks(figure.axes[1])) == 4
    assert_laid_out(figure)


def test_the_comparison_plot_fits_five_digit_demand_and_titles_a_trace_file_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    capacity = type(CAPACITY)(requests_per_second=2000.0, concurrency=50, node_start_minutes=5, model_load_minutes=3)
    model = cl.Model("chat", RULE, POOL, capacity, "req/s", "a test figure", 1)
    demand = [30000.0] * 20 + [60000.0] * 40
    trace = str(tmp_path / "a-directory-of-demand-traces-with-a-long-name" / "demand.csv")
    results = {trace: cl.compare(RULE, POOL, capacity, demand), "spike": cl.compare(RULE, POOL, capacity, demand)}
    figure = drawn(monkeypatch, cl, lambda: cl.plot(results, model, "inference/chat", io.BytesIO(), "svg"))
    titles = [axes.get_title() for axes in figure.axes[:2]]
    assert titles == ["demand.csv: demand and ready capacity", "demand.csv: replicas"]
    assert figure.texts and figure.get_suptitle() == "inference/chat"
    assert max(len(tick) for tick in shown_y_ticks(figure.axes[0])) == 5
    assert_laid_out(figure)
