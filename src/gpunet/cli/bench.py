"""`gpunet bench run | history`: measured against the Plan, kept in SQLite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.progress import Progress
from rich.table import Table

from gpunet import api
from gpunet.bench import PATTERNS
from gpunet.bench.store import Measurement, default_db, history
from gpunet.cli.console import stderr, stdout
from gpunet.cli.errors import EXIT_CHECKS_FAILED, handles_errors

app = typer.Typer(help="Measure the fabric against the Plan (iperf3), keep the history.", no_args_is_help=True)
DEFAULT_DB = default_db()
DbOpt = Annotated[Path, typer.Option("--db", help="SQLite file (default under ~/.local/share/gpunet).")]


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
    db: DbOpt = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """iperf3 over every pair of the pattern, round by round; flags pairs below 85 % of expected."""
    with Progress(console=stderr, transient=True) as bar:
        task = bar.add_task(f"{pattern} rounds", total=None)
        run_id, results = api.bench(plan_source=plan, lab=lab, pattern=pattern, plane=plane, nodes=nodes,
                                    seconds=duration, db=db,
                                    progress=lambda done, total: bar.update(task, completed=done, total=total))
    if as_json:
        rows = [m.model_dump(exclude={"raw"}) | {"percent_of_expected": m.percent_of_expected} for m in results]
        print(json.dumps({"run": run_id, "db": str(db), "measurements": rows}, indent=1))
    else:
        _matrix(results)
        stdout.print(f"run {run_id} saved in {db}")
    if any(m.status != "ok" for m in results):
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _matrix(results: list[Measurement]) -> None:
    names = sorted({m.source for m in results} | {m.destination for m in results})
    cells = {(m.source, m.destination): m for m in results}
    table = Table("from \\ to", *names, box=box.SIMPLE_HEAD, caption="% of the Plan's expected rate")
    for a in names:
        row = []
        for b in names:
            m = cells.get((a, b)) or cells.get((b, a))
            pct = m.percent_of_expected if m else None
            colour = "green" if m and m.status == "ok" else "red"
            row.append("" if m is None or a == b else f"[{colour}]{pct:.0f}[/{colour}]" if pct is not None else "-")
        table.add_row(a, *row)
    stdout.print(table)


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
        table.add_row(str(r.id), r.started, r.tool, r.pattern, str(r.measurements), str(r.flagged))
    stdout.print(table)
