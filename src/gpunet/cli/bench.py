"""`gpunet bench run | show | compare | history`: measured against the Plan, kept in SQLite,
compared with a baseline run, drawn as a heat map."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from gpunet.api import bench
from gpunet.api.bench import (
    FAILING,
    PATTERNS,
    TOOLS,
    BenchRun,
    Comparison,
    Measurement,
    cells_of,
    default_db,
    history,
    load_cells,
    load_run,
    percent_matrix,
    run_info,
    worst,
)
from gpunet.cli import bench_regular
from gpunet.cli.console import cell, print_table, shown, stderr, stdout
from gpunet.cli.errors import EXIT_FINDINGS, handles_errors
from gpunet.cli.options import (
    DbOpt,
    JsonOpt,
    LabExecOpt,
    OptionalNodesArg,
    PairsOpt,
    PlanOpt,
    RailOpt,
    SliceOpt,
    SliceSizeOpt,
)
from gpunet.errors import UsageError

app = typer.Typer(help="Measure the fabric against the Plan (iperf3, perftest, nccl-tests), keep the history.",
                  no_args_is_help=True)
PngOpt = Annotated[Path | None, typer.Option("--png", help="Also draw the matrix as a heat-map PNG here.")]
MATRIX_UP_TO = 16  # nodes: a wider matrix does not fit a terminal
WORST_SHOWN = 20
WHOLE_TABLE_UP_TO = 200  # pairs of a fabric run listed whole, each with its rail and path
WHOLE_RUN_UP_TO = 10_000  # measurements: `show` loads a run whole up to this, else only its worst
VERDICT_COLOURS = {"fail": "red", "missing": "red", "warn": "yellow", "inconclusive": "blue", "new": "cyan",
                   "ok": "green", "congested": "magenta"}
STATUS_COLOURS = {"ok": "green", "inconclusive": "blue", "congested": "magenta", "low": "red", "failed": "red"}
INCONCLUSIVE_MARK = "?"  # after a matrix cell's number: piped, without colours, it still differs from ok


@app.command(name="run")
@handles_errors
def run_(
    nodes: OptionalNodesArg = None,
    plan: PlanOpt = None,
    lab: LabExecOpt = None,
    pattern: Annotated[str, typer.Option(help=f"One of {', '.join(PATTERNS)}. fabric: every NIC with one under "
                                              "its own leaf, and every two leaves crossed once.")] = "fabric",
    rail: RailOpt = None,
    pairs: PairsOpt = None,
    slice_: SliceOpt = None,
    slice_size: SliceSizeOpt = "class",
    plane: Annotated[str, typer.Option(help="Plane to measure.")] = "compute",
    duration: Annotated[int, typer.Option(help="Seconds per measurement.", min=1)] = 3,
    tool: Annotated[str, typer.Option(help=f"One of {', '.join(TOOLS)}.")] = "iperf3",
    nccl_test: Annotated[str, typer.Option(help="nccl-tests binary, with --tool nccl.")] = "all_reduce_perf",
    congestion: Annotated[str, typer.Option(help="iperf3's TCP congestion control (-C): 'plan' for the plane's "
                                                 "choice in the Plan (what its nodes' sysctl holds), 'system' for "
                                                 "each host's default, or an algorithm (cubic, bbr, dctcp).")]
    = "plan",
    launcher: Annotated[str | None, typer.Option(help="srun or mpirun for --tool nccl (default: srun inside "
                                                      "a Slurm allocation, else mpirun).")] = None,
    retry_inconclusive: Annotated[int, typer.Option(
        help="Rounds of measuring again, one pair at a time, the pairs left inconclusive (an end's CPU "
             "saturated) after the scheduled rounds; 0: none.", min=0)] = 1,
    db: DbOpt = None,
    png: PngOpt = None,
    detach: Annotated[str | None, typer.Option(
        "--detach", metavar="NAME", help="Run this sweep detached on this machine (tmux, else setsid), so a "
                                         "closed laptop or a dropped SSH session does not end it; `gpunet fleet "
                                         "status|logs|attach NAME` come back to it. Rounds are stored as they end.")]
    = None,
    as_json: JsonOpt = False,
) -> None:
    """The tool over every pair of the pattern among NODES (default: all on the plane), round by
    round (the default, fabric: every NIC with one under its own leaf, every two leaves crossed once);
    flags pairs below 85 % of expected or with one slow equal-cost path, and calls inconclusive a pair
    short of that measured while an end's CPU was saturated. With --tool nccl, one nccl-tests job
    over the nodes (judged by its check; compare runs for speed). In a lab (--lab), iperf3 runs
    inside its servers' namespaces."""
    nodes, plan = _old_positional_plan(nodes, plan)
    db = db or default_db()
    if detach is not None:
        _detach(detach, db, as_json)
        return
    wanted = BenchRun(pattern=pattern, plane=plane, nodes=nodes, seconds=duration, tool=tool, nccl_test=nccl_test,
                      launcher=launcher, congestion=congestion, retry_inconclusive=retry_inconclusive,
                      rail=rail, pairs=pairs, slice=slice_, slice_size=slice_size)
    with _progress(pattern) as progress:
        outcome = bench.run(wanted, plan=plan, lab=lab, db=db, progress=progress)
    run_id, results = outcome.run_id, outcome.measurements
    retried = [m for m in results if m.attempts > 1]
    still = sum(m.status == "inconclusive" for m in retried)
    if as_json:
        print(json.dumps({"run": run_id, "db": str(db), "congestion": _congestion(tool, outcome.congestion),
                          "retried": len(retried), "still_inconclusive": still, "measurements": _rows(results)},
                         indent=1))
    else:
        if tool == "iperf3":
            source = " (the plane's choice in the Plan)" if congestion == "plan" else ""
            stdout.print(cell(f"TCP congestion control: {_congestion(tool, outcome.congestion)}{source}"),
                         soft_wrap=True)
        _print_results(results)
        if retried:
            stdout.print(f"{len(retried)} inconclusive pairs measured again one at a time: {still} still "
                         "inconclusive", soft_wrap=True)
        stdout.print(cell(f"run {run_id} saved in {db}"), soft_wrap=True)
    if png is not None and tool != "nccl":
        bench.heat_map(db, run_id, cells_of(results), png)
        stderr.print(f"heat map written to {shown(png)}")
    if any(m.status != "ok" for m in results):
        raise typer.Exit(EXIT_FINDINGS)


def _congestion(tool: str, used: str | None) -> str | None:
    """What iperf3 ran with: the algorithm it was given, 'system' (each host's default), None for other tools."""
    return None if tool != "iperf3" else used or "system"


def _old_positional_plan(nodes: str | None, plan: Path | None) -> tuple[str | None, Path | None]:
    """`bench run PLAN` (before NODES took that place): a plan or spec file named there is read as
    --plan for one more release, and said."""
    if nodes is None or plan is not None or not nodes.endswith((".json", ".yaml", ".yml")) or not Path(nodes).is_file():
        return nodes, plan
    print(f"gpunet: `bench run {nodes}` is deprecated, use `bench run --plan {nodes}` (the old spelling goes in 0.3)",
          file=sys.stderr)
    return None, Path(nodes)


def _detach(name: str, db: Path, as_json: bool) -> None:
    """This same command line, less --detach, started detached in this directory with the database
    named (so it is the one this user's later `bench history` reads)."""
    run = bench.detach(name, sys.argv[1:], db)
    if as_json:
        print(run.model_dump_json(indent=1))
        return
    stdout.print(cell(f"bench run detached as {name}: gpunet fleet status {name} · gpunet fleet logs {name} "
                      f"--follow · results in {db}"), soft_wrap=True)


@contextmanager
def _progress(pattern: str) -> Iterator[bench.Progress]:
    """A progress bar on a terminal; plain lines on stderr otherwise (a log shows how far it got)."""
    if not stderr.is_terminal:
        yield lambda done, total, what: print(what, file=sys.stderr, flush=True)
        return
    with Progress(console=stderr, transient=True) as bar:
        task = bar.add_task(f"{pattern} rounds", total=None)
        yield lambda done, total, what: bar.update(task, completed=done, total=total, description=escape(what))


def _print_results(results: list[Measurement]) -> None:
    """A job line for an nccl-tests run, the matrix for a few nodes, the worst pairs for many."""
    if any(m.metric == "busbw" for m in results):
        _print_job(results)
    elif any(m.path for m in results):
        _print_worst(results, rows_shown=WHOLE_TABLE_UP_TO)
    elif len({m.source for m in results} | {m.destination for m in results}) <= MATRIX_UP_TO:
        _print_matrix(results)
    else:
        _print_worst(results)


def _print_worst(results: list[Measurement], counts: Counter[str] | None = None, rows_shown: int = WORST_SHOWN) -> None:
    """The worst pairs (not ok first, then the lowest %), and how many of each status in all."""
    ranked = sorted(results, key=lambda m: (m.status == "ok", m.percent_of_expected or 0.0))
    counts = counts or Counter[str](m.status for m in results)
    caption = (f"the {rows_shown} worst of {counts.total()} pairs; --png or --json for all"
               if counts.total() > rows_shown else f"all {counts.total()} pairs, worst first")
    table = Table("from", "to", "rail", "path", "measured", "expected", "%", "status", box=box.SIMPLE_HEAD,
                  caption=caption)
    for m in ranked[:rows_shown]:
        colour = STATUS_COLOURS.get(m.status, "red")
        pct = m.percent_of_expected
        table.add_row(cell(m.source), cell(m.destination), _rails(m), cell(m.path or ""),
                      cell(f"{m.value:.2f} {m.unit}"), _text(m.expected), "-" if pct is None else f"{pct:.0f}",
                      f"[{colour}]{escape(m.status)}[/{colour}]")
    print_table(table)
    stdout.print(", ".join(f"{n} {status}" for status, n in sorted(counts.items())), soft_wrap=True)
    _print_reasons(ranked)  # the first of each status, and how many more: not only those in the table


def _rails(m: Measurement | Comparison) -> str:
    """A pair's rail, or its two rails (0>3) where it crosses rails."""
    return _text(m.rail) if m.to_rail is None else f"{_text(m.rail)}>{m.to_rail}"


def _print_reasons(results: list[Measurement]) -> None:
    """Why the inconclusive pairs could not judge their links, and what held the congested ones back
    (the first WORST_SHOWN of each)."""
    for status in ("inconclusive", "congested", "low"):
        told = [m for m in results if m.status == status and (m.reason or status != "low")]
        for m in told[:WORST_SHOWN]:
            stdout.print(cell(f"{status} {m.source} -> {m.destination}: {m.reason or 'an end was saturated'}"),
                         soft_wrap=True)
        if len(told) > WORST_SHOWN:
            stdout.print(f"... and {len(told) - WORST_SHOWN} more {status} (--json has every reason)")


def _print_job(results: list[Measurement]) -> None:
    for m in results:
        colour = "green" if m.status == "ok" else "red"
        stdout.print(f"{escape(m.destination)} over {escape(m.source)}: average bus bandwidth {m.value:g} "
                     f"{escape(m.unit)} [{colour}]{escape(m.status)}[/{colour}]", soft_wrap=True)


def _print_matrix(results: list[Measurement]) -> None:
    matrix = percent_matrix(results)
    table = Table("from \\ to", *matrix.names, box=box.SIMPLE_HEAD,
                  caption=f"% of the Plan's expected rate; {INCONCLUSIVE_MARK}: inconclusive (an end's CPU saturated)")
    for name, percents, statuses in zip(matrix.names, matrix.percent, matrix.status, strict=True):
        table.add_row(name, *(_cell(pct, status) for pct, status in zip(percents, statuses, strict=True)))
    print_table(table)
    _print_reasons(results)


def _cell(pct: float, status: str | None) -> str:
    if status is None:
        return ""
    colour = STATUS_COLOURS.get(status, "red")
    mark = INCONCLUSIVE_MARK if status == "inconclusive" else ""
    return "-" if math.isnan(pct) else f"[{colour}]{pct:.0f}{mark}[/{colour}]"


def _rows(results: list[Measurement]) -> list[dict[str, object]]:
    """Every field but the raw output (health, reason and attempts included), with the %."""
    return [m.model_dump(mode="json", exclude={"raw"}) | {"percent_of_expected": m.percent_of_expected}
            for m in results]


@app.command(name="show")
@handles_errors
def show(
    run: Annotated[int, typer.Argument(help="Run id (see `gpunet bench history`).")],
    db: DbOpt = None,
    png: PngOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A stored run's matrix again (% of expected per pair), optionally as a heat-map PNG."""
    db = db or default_db()
    info = run_info(db, run)
    if info is None:
        load_run(db, run)  # the error that says which run or file is missing
        return
    if png is not None and info.pattern == "job":
        raise UsageError(f"run {run} is one nccl-tests job, not pairs: there is no matrix to draw")
    if png is not None:
        bench.heat_map(db, run, load_cells(db, run), png)
        stderr.print(f"heat map written to {shown(png)}")
    if as_json:
        print(json.dumps({"run": info.model_dump(), "measurements": _rows(load_run(db, run)[1])}, indent=1))
        return
    stdout.print(cell(f"run {info.id}: {info.tool} {info.pattern}, {info.arguments}, started {info.started}"),
                 soft_wrap=True)
    worst_rows, counts = worst(db, run, WORST_SHOWN)
    if sum(counts.values()) <= WHOLE_RUN_UP_TO:
        _print_results(load_run(db, run)[1])
    else:
        _print_worst(worst_rows, Counter(counts))


@app.command(name="compare")
@handles_errors
def compare(
    baseline: Annotated[int, typer.Argument(help="Baseline run id (with --simulated: the measured run).")],
    current: Annotated[int | None, typer.Argument(help="Run id to judge against the baseline.")] = None,
    simulated: Annotated[bool, typer.Option("--simulated", help="Judge the run against the simulation of its own "
                                                                "pairs, round by round (needs --plan: the plan the "
                                                                "run measured, a lab's own for a lab run).")] = False,
    plan: PlanOpt = None,
    db: DbOpt = None,
    rules: Annotated[Path | None, typer.Option("--rules", help="YAML rules (default: warn 5 % below the "
                                               "baseline, fail 10 % below; latency 10 % / 20 % above).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Each pair's variance, (current − baseline) / baseline, and its verdict; exits 1 on any fail
    or missing pair. A pair measured with a saturated end is inconclusive: shown, not judged."""
    rows = bench.compare(db or default_db(), baseline, current, rules=rules, simulated=simulated, plan=plan)
    if as_json:
        print(json.dumps([r.model_dump() for r in rows], indent=1))
    else:
        _print_comparison(rows)
    if any(r.verdict in FAILING for r in rows):
        raise typer.Exit(EXIT_FINDINGS)


def _print_comparison(rows: list[Comparison]) -> None:
    rails = any(r.rail is not None for r in rows)
    table = Table("from", "to", *(["rail"] if rails else []), "plane", "metric", "unit", "baseline", "current",
                  "variance", "verdict", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for r in rows:
        colour = VERDICT_COLOURS[r.verdict]
        table.add_row(cell(r.source), cell(r.destination), *([_rails(r)] if rails else []), cell(r.plane),
                      cell(r.metric), cell(r.unit),
                      _text(r.baseline), _text(r.current), "" if r.variance is None else f"{100 * r.variance:+.1f} %",
                      f"[{colour}]{r.verdict}[/{colour}]")
    print_table(table)
    counts = Counter[str](r.verdict for r in rows)
    stdout.print(", ".join(f"{counts[v]} {v}" for v in VERDICT_COLOURS if counts[v]) or "nothing to compare",
                 soft_wrap=True)
    for r in rows[:WORST_SHOWN] if counts["inconclusive"] else []:
        if r.reason:
            stdout.print(cell(f"inconclusive {r.source} -> {r.destination}: {r.reason}"), soft_wrap=True)


def _text(value: float | None) -> str:
    return "" if value is None else str(value) if isinstance(value, int) else f"{value:.2f}"


@app.command(name="history")
@handles_errors
def history_(db: DbOpt = None, limit: int = 20,
             as_json: JsonOpt = False) -> None:
    """Earlier runs, newest first, with how many pairs were flagged (low or failed), congested (low, paused
    by the fabric) or inconclusive."""
    runs = history(db or default_db(), limit)
    if as_json:
        print(json.dumps([r.model_dump() for r in runs], indent=1))
        return
    table = Table("run", "started", "tool", "pattern", "plane", "pairs", "flagged", "congested", "inconclusive",
                  box=box.SIMPLE_HEAD)
    for r in runs:
        table.add_row(str(r.id), cell(r.started), cell(r.tool), cell(r.pattern), cell(r.plane), str(r.measurements),
                      str(r.flagged), str(r.congested), str(r.inconclusive))
    print_table(table)


app.command(name="schedule")(bench_regular.schedule_)
app.command(name="baseline")(bench_regular.baseline_)
app.command(name="check")(bench_regular.check_)
app.command(name="prune")(bench_regular.prune_)
