"""`gpunet bench run | show | compare | history`: measured against the Plan, kept in SQLite,
compared with a baseline run, drawn as a heat map."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from gpunet import api
from gpunet.bench import PATTERNS
from gpunet.bench.compare import Comparison, compare_runs
from gpunet.bench.heatmap import percent_matrix, write_png
from gpunet.bench.launch import TOOLS
from gpunet.bench.store import Measurement, default_db, history, load_run, run_info
from gpunet.cli.console import cell, stderr, stdout
from gpunet.cli.errors import EXIT_CHECKS_FAILED, handles_errors
from gpunet.errors import UsageError

app = typer.Typer(help="Measure the fabric against the Plan (iperf3, perftest, nccl-tests), keep the history.",
                  no_args_is_help=True)
DEFAULT_DB = default_db()
DbOpt = Annotated[Path, typer.Option("--db", help="SQLite file (default under ~/.local/share/gpunet).")]
PngOpt = Annotated[Path | None, typer.Option("--png", help="Also draw the matrix as a heat-map PNG here.")]
MATRIX_UP_TO = 16  # nodes: a wider matrix does not fit a terminal
WORST_SHOWN = 20
VERDICT_COLOURS = {"fail": "red", "warn": "yellow", "missing": "magenta", "new": "cyan", "ok": "green"}


@app.command(name="run")
@handles_errors
def run_(
    plan: Annotated[Path | None, typer.Argument(help="plan.json or spec (not with --lab).")] = None,
    pattern: Annotated[str, typer.Option(help=f"One of {', '.join(PATTERNS)}.")] = "all-pairs",
    lab: Annotated[str | None, typer.Option("--lab", help="Measure this lab (its own plan and shaping).")] = None,
    nodes: Annotated[str | None, typer.Option("--nodes", help="NodeSet to include (default: all on the plane).")]
    = None,
    plane: Annotated[str, typer.Option(help="Plane to measure.")] = "compute",
    duration: Annotated[int, typer.Option(help="Seconds per measurement.", min=1)] = 3,
    tool: Annotated[str, typer.Option(help=f"One of {', '.join(TOOLS)}.")] = "iperf3",
    nccl_test: Annotated[str, typer.Option(help="nccl-tests binary, with --tool nccl.")] = "all_reduce_perf",
    congestion: Annotated[str, typer.Option(help="iperf3's TCP congestion control (-C); 'system' for the hosts' "
                                                 "default. Cubic shares a link evenly between streams.")] = "cubic",
    launcher: Annotated[str | None, typer.Option(help="srun or mpirun for --tool nccl (default: srun inside "
                                                      "a Slurm allocation, else mpirun).")] = None,
    db: DbOpt = DEFAULT_DB,
    png: PngOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The tool over every pair of the pattern, round by round; flags pairs below 85 % of expected.
    With --tool nccl, one nccl-tests job over the nodes (judged by its check; compare runs for speed)."""
    with Progress(console=stderr, transient=True) as bar:
        task = bar.add_task(f"{pattern} rounds", total=None)
        run_id, results = api.bench(plan_source=plan, lab=lab, pattern=pattern, plane=plane, nodes=nodes,
                                    seconds=duration, db=db, tool=tool, nccl_test=nccl_test, launcher=launcher,
                                    congestion=None if congestion == "system" else congestion,
                                    progress=lambda done, total: bar.update(task, completed=done, total=total))
    if as_json:
        print(json.dumps({"run": run_id, "db": str(db), "measurements": _rows(results)}, indent=1))
    else:
        _print_results(results)
        stdout.print(f"run {run_id} saved in {db}")
    if png is not None and tool != "nccl":
        _heat_map(db, run_id, results, png)
    if any(m.status != "ok" for m in results):
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _print_results(results: list[Measurement]) -> None:
    """A job line for an nccl-tests run, the matrix for a few nodes, the worst pairs for many."""
    if any(m.metric == "busbw" for m in results):
        _print_job(results)
    elif len({m.source for m in results} | {m.destination for m in results}) <= MATRIX_UP_TO:
        _print_matrix(results)
    else:
        _print_worst(results)


def _print_worst(results: list[Measurement]) -> None:
    ranked = sorted(results, key=lambda m: (m.status == "ok", m.percent_of_expected or 0.0))
    table = Table("from", "to", "rail", "measured", "expected", "%", "status", box=box.SIMPLE_HEAD,
                  caption=f"the {WORST_SHOWN} worst of {len(results)} pairs; --png or --json for all")
    for m in ranked[:WORST_SHOWN]:
        colour = "green" if m.status == "ok" else "red"
        pct = m.percent_of_expected
        table.add_row(cell(m.source), cell(m.destination), _text(m.rail), cell(f"{m.value:.2f} {m.unit}"),
                      _text(m.expected), "-" if pct is None else f"{pct:.0f}",
                      f"[{colour}]{escape(m.status)}[/{colour}]")
    stdout.print(table)
    counts = Counter[str](m.status for m in results)
    stdout.print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())))


def _print_job(results: list[Measurement]) -> None:
    for m in results:
        colour = "green" if m.status == "ok" else "red"
        stdout.print(f"{escape(m.destination)} over {escape(m.source)}: average bus bandwidth {m.value:g} "
                     f"{escape(m.unit)} [{colour}]{escape(m.status)}[/{colour}]")


def _print_matrix(results: list[Measurement]) -> None:
    matrix = percent_matrix(results)
    table = Table("from \\ to", *matrix.names, box=box.SIMPLE_HEAD, caption="% of the Plan's expected rate")
    for name, percents, statuses in zip(matrix.names, matrix.percent, matrix.status, strict=True):
        table.add_row(name, *(_cell(pct, status) for pct, status in zip(percents, statuses, strict=True)))
    stdout.print(table)


def _cell(pct: float, status: str | None) -> str:
    if status is None:
        return ""
    colour = "green" if status == "ok" else "red"
    return "-" if math.isnan(pct) else f"[{colour}]{pct:.0f}[/{colour}]"


def _rows(results: list[Measurement]) -> list[dict[str, object]]:
    return [m.model_dump(exclude={"raw"}) | {"percent_of_expected": m.percent_of_expected} for m in results]


def _heat_map(db: Path, run_id: int, results: list[Measurement], png: Path) -> None:
    info = run_info(db, run_id)
    title = f"run {run_id}" + (f" · {info.tool} · {info.pattern}" if info else "")
    write_png(percent_matrix(results), png, title)
    stderr.print(f"heat map written to {png}")


@app.command(name="show")
@handles_errors
def show(
    run: Annotated[int, typer.Argument(help="Run id (see `gpunet bench history`).")],
    db: DbOpt = DEFAULT_DB,
    png: PngOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """A stored run's matrix again (% of expected per pair), optionally as a heat-map PNG."""
    info, results = load_run(db, run)
    if png is not None and any(m.metric == "busbw" for m in results):
        raise UsageError(f"run {run} is one nccl-tests job, not pairs: there is no matrix to draw")
    if png is not None:
        _heat_map(db, run, results, png)
    if as_json:
        print(json.dumps({"run": info.model_dump(), "measurements": _rows(results)}, indent=1))
        return
    stdout.print(cell(f"run {info.id}: {info.tool} {info.pattern}, {info.arguments}, started {info.started}"))
    _print_results(results)


@app.command(name="compare")
@handles_errors
def compare(
    baseline: Annotated[int, typer.Argument(help="Baseline run id.")],
    current: Annotated[int, typer.Argument(help="Run id to judge against the baseline.")],
    db: DbOpt = DEFAULT_DB,
    rules: Annotated[Path | None, typer.Option("--rules", help="YAML rules (default: warn 5 % below the "
                                               "baseline, fail 10 % below; latency 10 % / 20 % above).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Each pair's variance, (current − baseline) / baseline, and its verdict; exits 1 on any fail."""
    rows = compare_runs(db, baseline, current, rules)
    if as_json:
        print(json.dumps([r.model_dump() for r in rows], indent=1))
    else:
        _print_comparison(rows)
    if any(r.verdict == "fail" for r in rows):
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _print_comparison(rows: list[Comparison]) -> None:
    rails = any(r.rail is not None for r in rows)
    table = Table("from", "to", *(["rail"] if rails else []), "plane", "metric", "unit", "baseline", "current",
                  "variance", "verdict", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for r in rows:
        colour = VERDICT_COLOURS[r.verdict]
        table.add_row(cell(r.source), cell(r.destination), *([_text(r.rail)] if rails else []), cell(r.plane),
                      cell(r.metric), cell(r.unit),
                      _text(r.baseline), _text(r.current), "" if r.variance is None else f"{100 * r.variance:+.1f} %",
                      f"[{colour}]{r.verdict}[/{colour}]")
    stdout.print(table)
    counts = Counter[str](r.verdict for r in rows)
    stdout.print(", ".join(f"{counts[v]} {v}" for v in VERDICT_COLOURS if counts[v]) or "nothing to compare")


def _text(value: float | None) -> str:
    return "" if value is None else str(value) if isinstance(value, int) else f"{value:.2f}"


@app.command(name="history")
@handles_errors
def history_(db: DbOpt = DEFAULT_DB, limit: int = 20,
             as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Earlier runs, newest first, with how many pairs were flagged."""
    runs = history(db, limit)
    if as_json:
        print(json.dumps([r.model_dump() for r in runs], indent=1))
        return
    table = Table("run", "started", "tool", "pattern", "pairs", "flagged", box=box.SIMPLE_HEAD)
    for r in runs:
        table.add_row(str(r.id), cell(r.started), cell(r.tool), cell(r.pattern), str(r.measurements), str(r.flagged))
    stdout.print(table)
