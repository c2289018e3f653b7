"""`gpunet cabling check`: every planned cable against what LLDP or ibnetdiscover reports."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from gpunet.api.fabric import CablingReport, CablingSource, cabling_check
from gpunet.cli.console import cell, print_table, stderr
from gpunet.cli.errors import EXIT_FINDINGS, handles_errors
from gpunet.cli.options import IbsimOpt, JsonOpt, KeyOpt, LabExecOpt, OptionalNodesArg, PlanOpt, UserOpt
from gpunet.model.nodeset import describe

app = typer.Typer(help="Check every cable against the plan with what the fabric reports (LLDP, ibnetdiscover).",
                  no_args_is_help=True)
COLOURS = {"ok": "green", "unchecked": "dim", "unknown": "yellow"}


@app.command()
@handles_errors
def check(
    nodes: OptionalNodesArg = None,
    plan: PlanOpt = None,
    lab: LabExecOpt = None,
    lldp_dir: Annotated[Path | None, typer.Option("--lldp-dir", help="Saved `lldpcli -f json show neighbors` "
                                                                     "outputs, one file per device (gpu001.json).")]
    = None,
    ibnetdiscover: Annotated[Path | None, typer.Option("--ibnetdiscover", help="A saved ibnetdiscover output.")]
    = None,
    ibsim: IbsimOpt = None,
    ib_here: Annotated[bool, typer.Option("--ib-here", help="Run ibnetdiscover on this host.")] = False,
    planes: Annotated[list[str] | None, typer.Option("--plane", help="Check this plane (repeat); default: every "
                                                                    "plane the source can see, oob left out.")]
    = None,
    user: UserOpt = None,
    key: KeyOpt = None,
    show_all: Annotated[bool, typer.Option("--all", help="List every cable, not only findings.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Each planned cable: ok, missing, miswired, swapped, wrong speed or width; links nobody planned.
    One source: a lab (--lab), NODES' lldpd over SSH (with --plan), saved outputs, an ibsim, or
    ibnetdiscover here. Exit 1 on any finding, 2 on bad input."""
    source = CablingSource(lab=lab, nodes=nodes, lldp_dir=lldp_dir, ibnetdiscover=ibnetdiscover, ibsim=ibsim,
                           ib_here=ib_here)
    report = cabling_check(source, plan, planes or [], user=user, key=key)
    if as_json:
        print(report.model_dump_json(indent=1))
    else:
        _print(report, show_all)
    if report.findings:
        raise typer.Exit(EXIT_FINDINGS)


def _print(report: CablingReport, show_all: bool) -> None:
    counts = Counter((c.plane, c.verdict) for c in report.cables)
    summary = Table("plane", "cables", "ok", "findings", "unchecked", "unknown", box=box.SIMPLE_HEAD,
                    title=f"cabling from {report.source}")
    for plane in report.planes:
        total = sum(n for (p, _), n in counts.items() if p == plane)
        bad = total - sum(counts[plane, v] for v in ("ok", "unchecked", "unknown"))
        summary.add_row(plane, str(total), str(counts[plane, "ok"]), f"[red]{bad}[/red]" if bad else "0",
                        str(counts[plane, "unchecked"]), str(counts[plane, "unknown"]))
    print_table(summary)
    if report.findings:
        findings = Table(box=box.SIMPLE_HEAD)
        findings.add_column("finding", no_wrap=True)
        for name in ("cables", "seen", "fix"):  # folded, never cut: a port name with an ellipsis is no use
            findings.add_column(name, overflow="fold")
        for f in report.findings:
            findings.add_row(f"[red]{f.kind}[/red]", cell("\n".join(f.cables) or "-"),
                             cell(f.observed.replace(" and ", "\n").replace("; ", "\n")), cell(f.fix))
        print_table(findings)
    if show_all:
        _print_cables(report)
    for note in report.notes:
        stderr.print(cell(f"note: {note}"))
    unjudged = [c.a for c in report.cables if c.verdict in ("unchecked", "unknown")]
    if unjudged:
        devices = list(dict.fromkeys(u.split(':')[0] for u in unjudged))
        stderr.print(cell(f"not judged ({len(unjudged)} cables): {describe(devices, most=8)}"))


def _print_cables(report: CablingReport) -> None:
    table = Table("plane", "a", "b", "verdict", "seen", box=box.SIMPLE_HEAD)
    for c in report.cables:
        colour = COLOURS.get(c.verdict, "red")
        table.add_row(c.plane, cell(c.a), cell(c.b), f"[{colour}]{c.verdict}[/{colour}]", cell(c.observed))
    print_table(table)
