"""A bench run read for the report: its matrix of cells (from the store's cells index, so a large
run is not read row by row), the count of each status and its worst measurements with reasons.

Up to MAX_SIDE nodes each cell is one pair; past it, nodes are taken in blocks and a cell shows the
worst pair between two blocks, so the drawing stays MAX_SIDE² cells whatever the run's size."""

from __future__ import annotations

import math
from pathlib import Path

from gpunet.bench.heatmap import STATUS_RANK, natural_key
from gpunet.bench.store import PERCENT_SCALE, CellColumns, history, load_cells, run_info, worst
from gpunet.errors import UsageError
from gpunet.model.nodeset import fold
from gpunet.model.plan import Plan
from gpunet.report.inputs import BenchResult, HeatCell
from gpunet.report.load import refuse_unknown

MAX_SIDE = 64  # cells a side: a pair a cell up to 64 nodes (as the PNG labels them), blocks past it
LISTED = 60  # measurements listed below the map: the worst first
STATUS_OF_LETTER = {ord(s[0]): s for s in STATUS_RANK}
Cell = tuple[int, float]  # (rank, percent or NaN): the worse is the larger rank, then the lower percent


def load_bench(db: Path, plan: Plan, plan_hash: str, run_id: int | None = None) -> BenchResult:
    """Run `run_id` of the database, or its latest run; refused when it measured other nodes."""
    chosen = run_id if run_id is not None else _latest(db)
    info = run_info(db, chosen)
    if info is None:
        raise UsageError(f"{db}: no bench run {chosen}; `gpunet bench history --db {db}` lists the runs")
    cells = load_cells(db, chosen)
    names = sorted(set(cells.sources) | set(cells.destinations), key=natural_key)
    refuse_unknown(db, plan, f"nodes (run {chosen})", (n for n in names if plan.node(n) is None))
    listed, counts = worst(db, chosen, LISTED)
    block = max(1, math.ceil(len(names) / MAX_SIDE))
    return BenchResult(run=info, counts=counts, names=_labels(names, block), block=block,
                       cells=tuple(_matrix(cells, names, block)),
                       worst=tuple(m for m in listed if m.status != "ok"), plan_matches=info.plan_hash == plan_hash)


def _latest(db: Path) -> int:
    if not db.is_file():
        raise UsageError(f"{db}: no such bench database")
    runs = history(db, limit=1)
    if not runs:
        raise UsageError(f"{db}: holds no bench run")
    return runs[0].id


def _labels(names: list[str], block: int) -> tuple[str, ...]:
    return tuple(names) if block == 1 else tuple(fold(names[i:i + block]) for i in range(0, len(names), block))


def _decoded(cells: CellColumns) -> list[tuple[str, str, Cell]]:
    """(source, destination, (rank, percent)) of every measurement, from the packed codes."""
    sources = [name for name, count in zip(cells.sources, cells.runs, strict=True) for _ in range(count)]
    result = []
    for source, destination, text in zip(sources, cells.destinations, cells.codes.split(), strict=True):
        code = int(text)
        status = STATUS_OF_LETTER.get(code & 0xFF, "failed")
        scaled = code >> 8
        result.append((source, destination, (STATUS_RANK[status], math.nan if scaled < 0 else scaled / PERCENT_SCALE)))
    return result


def _worse(a: Cell | None, b: Cell) -> Cell:
    if a is None or b[0] > a[0]:
        return b
    if b[0] == a[0] and not math.isnan(b[1]) and (math.isnan(a[1]) or b[1] < a[1]):
        return b
    return a


def _matrix(cells: CellColumns, names: list[str], block: int) -> list[HeatCell]:
    """Each measurement in its cell, the worst of several; a pair measured one way shows in both
    cells (all-pairs measures each pair once)."""
    position = {name: i // block for i, name in enumerate(names)}
    measured: dict[tuple[int, int], Cell] = {}
    for source, destination, cell in _decoded(cells):
        key = (position[source], position[destination])
        measured[key] = _worse(measured.get(key), cell)
    shown = dict(measured)
    for (row, column), cell in measured.items():
        if row != column or block > 1:
            shown[column, row] = _worse(shown.get((column, row)), cell) if block > 1 else shown.get((column, row), cell)
    status = {rank: name for name, rank in STATUS_RANK.items()}
    return [HeatCell(row=r, column=c, status=status[rank], percent=None if math.isnan(pct) else round(pct, 2))
            for (r, c), (rank, pct) in sorted(shown.items())]
