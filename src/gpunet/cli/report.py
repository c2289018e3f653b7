"""`gpunet report`: one self-contained HTML page of the Plan, its fabric drawn, and whatever results
the user has."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gpunet.cli.console import stdout
from gpunet.cli.errors import handles_errors
from gpunet.cli.options import JsonOpt, PlanOpt

PlanArg = Annotated[Path, PlanOpt.__metadata__[0]]  # required here: the results are judged against it

COLOURS = {"pass": "green", "warn": "yellow", "fail": "red", "info": "dim", "not given": "dim"}


@handles_errors
def report(
    plan: PlanArg,
    output: Annotated[Path, typer.Option("-o", "--output", help="The HTML file to write.", show_default=False)],
    doctor: Annotated[list[Path] | None, typer.Option("--doctor", help="`doctor --json` output, one node's or a "
                                                                       "fleet's (repeat).", show_default=False)]
    = None,
    cabling: Annotated[Path | None, typer.Option("--cabling", help="`cabling check --json` output.",
                                                 show_default=False)] = None,
    localize: Annotated[Path | None, typer.Option("--localize", help="`localize --json` output.",
                                                  show_default=False)] = None,
    bench_db: Annotated[Path | None, typer.Option("--bench-db", help="Bench database: its latest run, or --run.",
                                                  show_default=False)] = None,
    run: Annotated[int | None, typer.Option("--run", help="With --bench-db: this run.", min=1,
                                            show_default=False)] = None,
    switch: Annotated[Path | None, typer.Option("--switch", help="Switch checks' findings (JSON).",
                                                show_default=False)] = None,
    sim: Annotated[Path | None, typer.Option("--sim", help="Simulated (and measured) job times (JSON).",
                                             show_default=False)] = None,
    compare: Annotated[Path | None, typer.Option("--compare", help="`compare --json` output.",
                                                 show_default=False)] = None,
    catalog: Annotated[Path | None, typer.Option("--catalog", help="Parts catalog: the bill of materials priced, "
                                                                   "and its power ('example': placeholder numbers).",
                                                 show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one HTML page: the fabric drawn with every cable in its latest state, the findings linked
    to their place in the drawing, bill of materials, flows, and each result given (a result not
    given is said to be missing, never shown as clean). Exit 0 when written, 2 on bad input (a
    result of another plan included)."""
    from gpunet.api.report import ReportFiles
    from gpunet.api.report import report as write_page

    files = ReportFiles(doctor=tuple(doctor or ()), cabling=cabling, localize=localize, bench_db=bench_db, run=run,
                        switch=switch, sim=sim, compare=compare, catalog=catalog)
    page = write_page(plan, files, output)
    verdicts: dict[str, dict[str, str]] = page.data["verdicts"]  # type: ignore[assignment]
    if as_json:
        print(json.dumps({"report": str(output), "verdicts": verdicts, "findings": page.data["findings"]}, indent=1))
        return
    for family, judged in verdicts.items():
        colour = COLOURS.get(judged["verdict"], "dim")
        summary = escape(judged.get("summary", ""))
        stdout.print(f"[{colour}]{judged['verdict']:>9}[/{colour}] {family}: {summary}", highlight=False)
    stdout.print(f"{len(page.issues)} finding(s); wrote {escape(str(output))}", highlight=False)
