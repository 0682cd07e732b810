"""What the `blueprint simulate --plot` tests read from a figure or an image: the texts an SVG draws, the tick labels
shown, the figure a plot builds, and whether its labels fit inside it clear of each other."""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

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


def labels(svg: bytes) -> list[str]:
    """The texts an SVG draws: matplotlib writes each text's string in a comment before its glyphs."""
    return [text.decode() for text in re.findall(rb"<!-- (.*?) -->", svg)]


def shown_y_ticks(axes: Axes) -> list[str]:
    """The y tick labels drawn: those inside the axis' limits."""
    low, high = sorted(axes.get_ylim())
    return [label.get_text() for label in axes.get_yticklabels() if low <= label.get_position()[1] <= high]


def built(monkeypatch: pytest.MonkeyPatch, module: ModuleType, draw: Callable[[], None]) -> Figure:
    """The figure `draw` builds in `module`, instead of writing it."""
    figures: list[Figure] = []
    monkeypatch.setattr(module, "write", lambda figure, *_args, **_kwargs: figures.append(figure))
    draw()
    (figure,) = figures
    return figure


def assert_laid_out(figure: Figure) -> None:
    """Every axes with its tick labels, axis labels, title and legend inside the figure, no two of them and the
    figure's title overlapping (each axes' tight box places its ticks, labels and title as a drawing would)."""
    boxes = [axes.get_tightbbox() for axes in figure.axes] + [text.get_window_extent() for text in figure.texts]
    for box in boxes:
        assert box is not None
        assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1, (box, figure.bbox)
        assert figure.bbox.y0 <= box.y0 and box.y1 <= figure.bbox.y1, (box, figure.bbox)
    for i, box in enumerate(boxes):
        for other in boxes[i + 1 :]:
            assert box is not None and other is not None and not box.overlaps(other), (box, other)
