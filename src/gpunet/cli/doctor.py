"""`gpunet doctor` and `gpunet probe`: the troubleshooting checklist on this node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from gpunet import api
from gpunet.checks import Finding
from gpunet.cli.console import stderr, stdout
from gpunet.cli.errors import EXIT_CHECKS_FAILED, handles_errors

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Interval = Annotated[float, typer.Option("--interval", help="Seconds between the two counter samples.", min=0)]
COLOURS = {"fail": "red", "warn": "yellow", "skip": "dim", "pass": "green"}


@handles_errors
def doctor(
    plan: Annotated[Path | None, typer.Option("--plan", help="plan.json or spec to compare with.")] = None,
    node: Annotated[str | None, typer.Option("--node", help="This node's name in the plan (default: hostname).")]
    = None,
    peers: Annotated[bool, typer.Option("--peers", help="Also ping and connect to every peer on every plane.")]
    = False,
    interval: Interval = 2.0,
    show_pass: Annotated[bool, typer.Option("--all", help="List passing checks too.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Every applicable check on this node: failures first, each with its fix. Exit 1 on a failure."""
    with stderr.status("probing…", spinner="dots"):
        state, findings = api.doctor(plan, node, peers=peers, interval=interval)
    failed = any(f.verdict == "fail" for f in findings)
    if as_json:
        print(json.dumps({"node": findings[0].node if findings else state.hostname, "failed": failed,
                          "findings": [f.model_dump() for f in findings], "probe_problems": list(state.problems)},
                         indent=1))
    else:
        _print(findings, show_pass)
    if failed:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _print(findings: list[Finding], show_pass: bool) -> None:
    table = Table(box=box.SIMPLE_HEAD, show_lines=False)
    for column in ("", "check", "subject", "observed", "expected", "fix"):
        table.add_column(column, overflow="fold")
    for f in findings:
        if f.verdict == "pass" and not show_pass:
            continue
        colour = COLOURS[f.verdict]
        table.add_row(f"[{colour}]{f.verdict}[/{colour}]", f.check, f.subject, f.observed or f.evidence,
                      f.expected, f.fix)
    counts = {v: sum(f.verdict == v for f in findings) for v in COLOURS}
    stdout.print(table)
    stdout.print(" ".join(f"[{COLOURS[v]}]{n} {v}[/{COLOURS[v]}]" for v, n in counts.items()))


@handles_errors
def probe(interval: Interval = 2.0, as_json: JsonFlag = False) -> None:
    """Read this node as it is: links, addresses, routes, bonds, InfiniBand, counters, settings."""
    state = api.probe(interval)
    if as_json:
        print(state.model_dump_json(indent=1))
        return
    table = Table("interface", "state", "carrier", "mtu", "speed", "addresses", box=box.SIMPLE_HEAD)
    for i in state.interfaces:
        table.add_row(i.name, i.operstate, str(i.carrier), str(i.mtu), f"{i.speed_mbps or '-'}",
                      " ".join(state.addresses.get(i.name, ())))
    stdout.print(f"[bold]{state.hostname}[/bold]")
    stdout.print(table)
    for problem in state.problems:
        stdout.print(f"[yellow]could not read[/yellow] {problem}")
