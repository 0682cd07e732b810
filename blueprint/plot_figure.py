"""The figure `blueprint simulate --plot` draws on, and how it is written; both plots use it (the utilization replay,
`blueprint.simulate`; the rules under demand, `blueprint.closed_loop`).

matplotlib's object-oriented API without pyplot: a `Figure` of its own, saved by `savefig`, no global figure list
(cheaper to import, nothing to close). The margins are fixed, in inches, sized for the labels these plots carry:
`tight_layout` measured every text once more and left a layout engine that made `savefig` draw twice, for about
half of each render. The same run writes the same bytes: no date in an SVG or PDF, a fixed SVG id salt."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Seeds the ids of an SVG's clip paths, markers and hatches (`svg.hashsalt`), instead of a random one per file.
SVG_ID_SALT = "blueprint-simulate"


@dataclass(frozen=True)
class Margins:
    """Room around and between the axes, in inches, for tick labels, axis labels, titles."""

    left: float
    right: float
    top: float
    bottom: float
    between_rows: float = 0.0
    between_columns: float = 0.0


def axes_grid(
    rows: int, columns: int, size: tuple[float, float], margins: Margins, sharex: bool = False
) -> tuple[Figure, list[list[Axes]]]:
    """A figure of `size` inches with rows x columns axes placed inside `margins`."""
    from matplotlib.figure import Figure

    width, height = size
    axes_width = (width - margins.left - margins.right - (columns - 1) * margins.between_columns) / columns
    axes_height = (height - margins.top - margins.bottom - (rows - 1) * margins.between_rows) / rows
    figure = Figure(figsize=size)
    axes = figure.subplots(rows, columns, sharex=sharex, squeeze=False)
    figure.subplots_adjust(
        left=margins.left / width,
        right=1 - margins.right / width,
        top=1 - margins.top / height,
        bottom=margins.bottom / height,
        wspace=margins.between_columns / axes_width,
        hspace=margins.between_rows / axes_height,
    )
    return figure, [list(row) for row in axes]


def write(figure: Figure, out: Path | IO[bytes], image_format: str, dpi: int) -> None:
    """Save to a path or an open file in `image_format` (one of `blueprint.simulate.PLOT_FORMATS`), the same bytes
    for the same figure."""
    import matplotlib

    undated = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(image_format)
    with matplotlib.rc_context({"svg.hashsalt": SVG_ID_SALT}):
        figure.savefig(out, dpi=dpi, format=image_format, metadata=undated)
