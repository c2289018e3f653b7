"""A run as a node x node matrix of % of the Plan's expected rate: built by a pure function, printed
by the CLI as a table and drawn here as a heat-map PNG (numpy and matplotlib, imported only when
drawn). Drawing reads a run as columns (CellColumns) so a 2 000-node run's 2 million pairs go from
SQLite to pixels in arrays, never one Python object a pair."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunet.bench.expected import BELOW_EXPECTED
from gpunet.bench.store import PERCENT_SCALE, CellColumns, Measurement, cell_code
from gpunet.errors import UsageError

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap, Normalize
    from matplotlib.figure import Figure

ANNOTATE_UP_TO = 16  # nodes: above this, numbers in cells are unreadable
LABEL_UP_TO = 64  # nodes: above this, no names on the axes
DPI = 100
# The worst of several measurements of one cell wins: a low rail shows over an inconclusive one.
# A congested pair (low, and its ends paused or got CNPs) ranks below an unexplained low one.
STATUS_RANK = {"ok": 0, "inconclusive": 1, "congested": 2, "low": 3, "failed": 4}
UNMEASURED, FAILED, INCONCLUSIVE = -1, STATUS_RANK["failed"], STATUS_RANK["inconclusive"]
CONGESTED = STATUS_RANK["congested"]
ABOVE_COLOUR = "#2b6cb0"  # above 100 % (blue)
UNMEASURED_COLOUR = "#d0d0d0"  # nothing measured, or no expectation (grey)
FAILED_COLOUR = "#1a1a1a"  # the tool measured nothing (black, not the grey of unmeasured)
INCONCLUSIVE_COLOUR = "#9f7aea"  # an end was saturated (violet, hatched where cells are large)
CONGESTED_COLOUR = "#dd6b20"  # low, with pause or CNP growth at an end: flow control (orange, dotted)
# Past LABEL_UP_TO nodes a cell is a whole number of pixels, about BIG_AXES_PX across in all: every
# pair stays visible (one pixel each from 2 400 nodes) and the PNG stays a few megapixels (a 40-inch
# figure of 2 000 nodes was 16.6 Mpx, 3-6 s to encode).
BIG_AXES_PX = 2400
MARGINS = {"left": 70, "right": 260, "top": 60, "bottom": 50}  # pixels around a large map's cells


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
    rank_a, rank_b = (STATUS_RANK.get(m.status, FAILED) for m in (a, b))
    if rank_a != rank_b:
        return a if rank_a > rank_b else b
    pct_a, pct_b = _percent(a), _percent(b)
    return b if math.isnan(pct_a) or pct_b < pct_a else a


def shown_percent(pct: float) -> float:
    """The whole percent written in a cell (round half to even, as format() and numpy round): a
    cell is coloured from this number, so every cell that reads 100 has one colour."""
    return pct if math.isnan(pct) else float(round(pct))


def cells_of(results: Iterable[Measurement]) -> CellColumns:
    """Measurements in memory as the columns the store reads for drawing."""
    kept = list(results)
    codes = " ".join(str(cell_code(m.percent_of_expected, m.status)) for m in kept)
    return CellColumns(sources=[m.source for m in kept], runs=[1] * len(kept),
                       destinations=[m.destination for m in kept], codes=codes)


@dataclass(frozen=True)
class Grid:
    """The matrix as arrays (for drawing): `percent` NaN where unmeasured or without expectation,
    `rank` the cell's STATUS_RANK, UNMEASURED (-1) where nothing was measured."""

    names: tuple[str, ...]
    percent: np.ndarray[Any, np.dtype[np.float64]]
    rank: np.ndarray[Any, np.dtype[np.int8]]


def grid_of(cells: CellColumns) -> Grid:
    """The same cells as percent_matrix, from columns, in arrays: each measurement in its cell, the
    worst of several, a pair measured one way in both cells, the diagonal unmeasured."""
    np = _numpy()
    names = tuple(sorted(set(cells.sources) | set(cells.destinations), key=natural_key))
    index = {name: i for i, name in enumerate(names)}
    count, n = cells.count, len(names)
    sources = np.repeat(np.fromiter(map(index.__getitem__, cells.sources), dtype=np.int64), cells.runs)
    flat = sources * n + np.fromiter(map(index.__getitem__, cells.destinations), dtype=np.int64, count=count)
    codes = np.fromstring(cells.codes, dtype=np.int64, sep=" ") if count else np.zeros(0, np.int64)
    if len(codes) != count:
        raise UsageError(f"{len(codes)} cell codes for {count} measurements: not a run gpunet wrote")
    scaled = codes >> 8  # arithmetic: -1 (no expectation) stays -1
    percent = np.where(scaled < 0, np.nan, scaled / PERCENT_SCALE)
    rank = _rank_of_letter(np)[codes & 0xFF]
    keep = _worst_of_each_cell(np, flat, rank, percent)
    cell_pct, cell_rank = np.full(n * n, np.nan), np.full(n * n, UNMEASURED, dtype=np.int8)
    cell_pct[flat[keep]], cell_rank[flat[keep]] = percent[keep], rank[keep]
    cell_pct, cell_rank = cell_pct.reshape(n, n), cell_rank.reshape(n, n)
    one_way = (cell_rank == UNMEASURED) & (cell_rank.T != UNMEASURED)
    cell_pct, cell_rank = np.where(one_way, cell_pct.T, cell_pct), np.where(one_way, cell_rank.T, cell_rank)
    np.fill_diagonal(cell_pct, np.nan)
    np.fill_diagonal(cell_rank, UNMEASURED)
    return Grid(names=names, percent=cell_pct, rank=cell_rank)


def _rank_of_letter(np: Any) -> Any:
    """Rank by the status's first letter (ok, inconclusive, low, failed all differ there); a status
    gpunet does not know counts as failed."""
    table = np.full(256, FAILED, dtype=np.int8)
    for status, rank in STATUS_RANK.items():
        table[ord(status[0])] = rank
    return table


def _worst_of_each_cell(np: Any, flat: Any, rank: Any, percent: Any) -> Any:
    """Indices of the measurement shown in each cell: every one when no cell has two (all-pairs),
    else the worst of each cell (highest rank, then lowest %, NaN least bad)."""
    if len(flat) == 0 or np.bincount(flat).max() <= 1:
        return np.arange(len(flat))
    order = np.lexsort((np.where(np.isnan(percent), -np.inf, -percent), rank, flat))  # worst last in a cell
    ordered = flat[order]
    return order[np.append(ordered[1:] != ordered[:-1], True)]


def cell_colours(percent: Any, rank: Any) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """RGBA bytes of cells: the colour scale at the whole percent written in the cell (red 0 %,
    yellow at the flag, green 100 %, blue above), failed black, inconclusive violet, unmeasured
    grey. One colour a whole percent, looked up: a cell that reads 100 is always the same green."""
    np = _numpy()
    shown = np.round(np.asarray(percent, dtype=float))
    index = np.where(np.isnan(shown), NO_SCALE, np.clip(np.nan_to_num(shown), 0, ABOVE))
    status = np.asarray(rank)
    index = np.select([status == FAILED, status == INCONCLUSIVE, status == CONGESTED, status == UNMEASURED],
                      [FAILED_SLOT, INCONCLUSIVE_SLOT, CONGESTED_SLOT, NO_SCALE], index)
    return _palette(np)[index.astype(np.intp)]  # type: ignore[no-any-return]


# Slots of the palette: 0..100 the whole percents, then above 100, then the colours off the scale.
ABOVE, NO_SCALE, FAILED_SLOT, INCONCLUSIVE_SLOT, CONGESTED_SLOT = 101, 102, 103, 104, 105


def _palette(np: Any) -> Any:
    from matplotlib.colors import to_rgba_array  # noqa: PLC0415

    cmap, norm = _scale()
    scale = cmap(norm(np.arange(0, ABOVE, dtype=float)), bytes=True)
    off_scale = to_rgba_array([ABOVE_COLOUR, UNMEASURED_COLOUR, FAILED_COLOUR, INCONCLUSIVE_COLOUR, CONGESTED_COLOUR])
    return np.vstack([scale, (off_scale * 255).round().astype(np.uint8)])


def _scale() -> tuple[Colormap, Normalize]:
    from matplotlib import colormaps  # noqa: PLC0415
    from matplotlib.colors import TwoSlopeNorm  # noqa: PLC0415

    # Yellow at the flagging threshold: every flagged pair is orange to red, every passing one green.
    cmap = colormaps["RdYlGn"].with_extremes(over=ABOVE_COLOUR, bad=UNMEASURED_COLOUR)
    return cmap, TwoSlopeNorm(vmin=0, vcenter=100 * BELOW_EXPECTED, vmax=100)


def _numpy() -> Any:
    try:  # optional: only the heat map needs it (pip install 'gpunet[plot]')
        import matplotlib  # noqa: PLC0415, F401
        import numpy  # noqa: PLC0415
    except ImportError:
        raise UsageError("the heat map needs matplotlib: pip install 'gpunet[plot]'") from None
    return numpy


def figure_pixels(nodes: int) -> tuple[int, int]:
    """Width and height of the PNG: up to LABEL_UP_TO nodes, cells grow with the nodes up to a
    40-inch side, plus room on the right for the colour bar; past it, whole pixels a cell."""
    if nodes <= LABEL_UP_TO:
        side = min(40.0, max(5.0, 2 + 0.4 * nodes))
        return round((side + 1.5) * DPI), round(side * DPI)
    cells = max(1, BIG_AXES_PX // nodes) * nodes
    return cells + MARGINS["left"] + MARGINS["right"], cells + MARGINS["top"] + MARGINS["bottom"]


def write_png(cells: CellColumns, path: Path, title: str) -> None:
    """Draw a run's cells as a heat map (cell_colours), the legend naming the colours off the
    scale; names and numbers in the cells for small clusters, inconclusive cells hatched."""
    if not cells.count:
        raise UsageError("nothing to draw: the run has no pair measurements")
    _numpy()
    grid = grid_of(cells)
    colours = cell_colours(grid.percent, grid.rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    if len(grid.names) > LABEL_UP_TO:
        _write_large(grid, colours, title, path)
        return
    figure, axes = _figure(len(grid.names))
    axes.imshow(colours, interpolation="nearest")
    axes.set(title=title, xlabel="to", ylabel="from")
    _label_axes(axes, grid.names)
    _hatch_inconclusive(axes, grid)
    if len(grid.names) <= ANNOTATE_UP_TO:
        _annotate(axes, grid)
    _legend(figure, axes, fixed=False)
    figure.savefig(path, format="png", dpi=DPI)  # Agg, without pyplot's global state


def _write_large(grid: Grid, colours: Any, title: str, path: Path) -> None:
    """Past LABEL_UP_TO nodes: Agg draws the frame (title, colour bar, legend) around an empty box
    of whole pixels a cell, and the cells' colours are then copied into that box as they are:
    resampling 4 million cells through matplotlib's image pipeline took most of the time."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415  (matplotlib's own dependency)

    np, nodes = _numpy(), len(grid.names)
    figure, axes = _figure(nodes)
    axes.set(title=title, xlabel="to", ylabel="from", xticks=[], yticks=[])
    axes.set_frame_on(False)
    _legend(figure, axes, fixed=True)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()  # type: ignore[no-untyped-call]
    pixels = np.array(canvas.buffer_rgba())  # type: ignore[no-untyped-call]
    scale, top = max(1, BIG_AXES_PX // nodes), MARGINS["top"]
    side = scale * nodes
    pixels[top:top + side, MARGINS["left"]:MARGINS["left"] + side] = colours.repeat(scale, 0).repeat(scale, 1)
    # zlib's fastest level: cells vary a percent or two from one to the next, so a large map barely
    # compresses, and level 6 took 3 times as long.
    Image.fromarray(pixels).save(path, format="PNG", compress_level=1)


def _figure(nodes: int) -> tuple[Figure, Axes]:
    """Constrained layout where names need room; fixed margins past that (one layout pass less)."""
    from matplotlib.figure import Figure  # noqa: PLC0415

    width, height = figure_pixels(nodes)
    if nodes <= LABEL_UP_TO:
        figure = Figure(figsize=(width / DPI, height / DPI), dpi=DPI, layout="constrained")
        return figure, figure.add_subplot()
    figure = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    side = width - MARGINS["left"] - MARGINS["right"]
    return figure, figure.add_axes((MARGINS["left"] / width, MARGINS["bottom"] / height, side / width,
                                    side / height))


def _legend(figure: Figure, axes: Axes, fixed: bool) -> None:
    """The colour bar of the scale and a legend of the colours off it."""
    from matplotlib.cm import ScalarMappable  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    cmap, norm = _scale()
    mappable = ScalarMappable(norm=norm, cmap=cmap)
    handles = [Patch(facecolor=ABOVE_COLOUR, label="above 100 %"), Patch(facecolor=FAILED_COLOUR, label="failed"),
               Patch(facecolor=INCONCLUSIVE_COLOUR, hatch="//", label="inconclusive"),
               Patch(facecolor=CONGESTED_COLOUR, hatch="..", label="flow control / congestion"),
               Patch(facecolor=UNMEASURED_COLOUR, label="not measured")]
    if not fixed:
        figure.colorbar(mappable, ax=axes, extend="max", label="% of expected")
        figure.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8)
        return
    box = axes.get_position()
    bar = figure.add_axes((box.x1 + 0.01, box.y0 + box.height * 0.4, 0.012, box.height * 0.6))
    figure.colorbar(mappable, cax=bar, extend="max", label="% of expected")
    figure.legend(handles=handles, loc="lower left", bbox_to_anchor=(box.x1 + 0.005, box.y0), fontsize=9)


def _label_axes(axes: Axes, names: tuple[str, ...]) -> None:
    ticks = list(range(len(names))) if len(names) <= LABEL_UP_TO else []
    shown = list(names) if ticks else []
    axes.set_xticks(ticks, shown, rotation=90)
    axes.set_yticks(ticks, shown)


def _hatch_inconclusive(axes: Axes, grid: Grid) -> None:
    from matplotlib.patches import Rectangle  # noqa: PLC0415

    for rank, hatch in ((INCONCLUSIVE, "//"), (CONGESTED, "..")):
        for i, j in zip(*(grid.rank == rank).nonzero(), strict=True):
            axes.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch=hatch, edgecolor="white",
                                     linewidth=0))


def _annotate(axes: Axes, grid: Grid) -> None:
    """The number the cell's colour came from; white on the failed black."""
    for (i, j), pct in _enumerate(grid.percent):
        if not math.isnan(pct):
            colour = "white" if grid.rank[i, j] == FAILED else "black"
            axes.text(j, i, f"{shown_percent(pct):.0f}", ha="center", va="center", fontsize=8, color=colour)


def _enumerate(percent: Any) -> Iterable[tuple[tuple[int, int], float]]:
    return ((index, float(value)) for index, value in _numpy().ndenumerate(percent))
