"""A run as a node x node matrix of % of the Plan's expected rate: built by a pure function, printed
by the CLI as a table and drawn here as a heat-map PNG (matplotlib, imported only when drawn)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpunet.bench.expected import BELOW_EXPECTED
from gpunet.bench.store import Measurement
from gpunet.errors import UsageError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

ANNOTATE_UP_TO = 16  # nodes: above this, numbers in cells are unreadable
LABEL_UP_TO = 64  # nodes: above this, no names on the axes
DPI = 100
STATUS_RANK = {"ok": 0, "low": 1, "failed": 2}  # the worst of several measurements of one cell wins


@dataclass(frozen=True)
class Matrix:
    """Rows are sources, columns destinations. `percent` is NaN where nothing was measured (or no
    expectation was known); `status` is None where nothing was measured."""

    names: tuple[str, ...]
    percent: tuple[tuple[float, ...], ...]
    status: tuple[tuple[str | None, ...], ...]


def percent_matrix(results: Iterable[Measurement]) -> Matrix:
    """Each measurement in its (source, destination) cell. A pair measured one way only shows in
    both cells (all-pairs measures each pair once); several measurements of one cell (one per
    rail) show the worst, as % of expected."""
    cells: dict[tuple[str, str], Measurement] = {}
    for m in results:
        key = (m.source, m.destination)
        cells[key] = _worse(cells[key], m) if key in cells else m
    names = tuple(sorted({n for key in cells for n in key}, key=natural_key))
    chosen = [[cells.get((a, b)) or cells.get((b, a)) if a != b else None for b in names] for a in names]
    return Matrix(names=names,
                  percent=tuple(tuple(_percent(m) for m in row) for row in chosen),
                  status=tuple(tuple(m.status if m else None for m in row) for row in chosen))


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """gpu2 before gpu10: digit runs compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part)


def _percent(m: Measurement | None) -> float:
    pct = m.percent_of_expected if m else None
    return math.nan if pct is None else pct


def _worse(a: Measurement, b: Measurement) -> Measurement:
    rank_a, rank_b = (STATUS_RANK.get(m.status, 2) for m in (a, b))
    if rank_a != rank_b:
        return a if rank_a > rank_b else b
    pct_a, pct_b = _percent(a), _percent(b)
    return b if math.isnan(pct_a) or pct_b < pct_a else a


def figure_pixels(nodes: int) -> tuple[int, int]:
    """Width and height of the PNG: cells grow with the nodes up to a 40-inch side, plus room on
    the right for the colour bar."""
    side = min(40.0, max(5.0, 2 + 0.4 * nodes))
    return round((side + 1.5) * DPI), round(side * DPI)


def write_png(matrix: Matrix, path: Path, title: str) -> None:
    """Draw the matrix as a heat map: red (0 %) through yellow (85 %, the flag) to green (100 %), above 100 % in
    blue, unmeasured cells grey; numbers in the cells for small clusters."""
    if not matrix.names:
        raise UsageError("nothing to draw: the run has no pair measurements")
    try:  # optional: only the heat map needs it (pip install 'gpunet[plot]')
        from matplotlib import colormaps  # noqa: PLC0415
        from matplotlib.colors import TwoSlopeNorm  # noqa: PLC0415
        from matplotlib.figure import Figure  # noqa: PLC0415
    except ImportError:
        raise UsageError("the heat map needs matplotlib: pip install 'gpunet[plot]'") from None
    width, height = figure_pixels(len(matrix.names))
    figure = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
    axes = figure.add_subplot()
    cmap = colormaps["RdYlGn"].with_extremes(over="#2b6cb0", bad="#d0d0d0")
    # Yellow at the flagging threshold: every flagged pair is orange to red, every passing one green.
    norm = TwoSlopeNorm(vmin=0, vcenter=100 * BELOW_EXPECTED, vmax=100)
    image = axes.imshow(matrix.percent, cmap=cmap, norm=norm, interpolation="nearest")
    figure.colorbar(image, ax=axes, extend="max", label="% of expected")
    axes.set(title=title, xlabel="to", ylabel="from")
    _label_axes(axes, matrix.names)
    if len(matrix.names) <= ANNOTATE_UP_TO:
        _annotate(axes, matrix)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=DPI)  # Agg, without pyplot's global state


def _label_axes(axes: Axes, names: tuple[str, ...]) -> None:
    ticks = list(range(len(names))) if len(names) <= LABEL_UP_TO else []
    shown = list(names) if ticks else []
    axes.set_xticks(ticks, shown, rotation=90)
    axes.set_yticks(ticks, shown)


def _annotate(axes: Axes, matrix: Matrix) -> None:
    for i, row in enumerate(matrix.percent):
        for j, pct in enumerate(row):
            if not math.isnan(pct):
                axes.text(j, i, f"{pct:.0f}", ha="center", va="center", fontsize=8)
