"""`gpunet switch check`: the Plan's switches read and judged as doctor judges nodes."""

from __future__ import annotations

from typing import Annotated

import typer

from gpunet.api.switches import SwitchReport, switch_check
from gpunet.cli.console import cell, stdout
from gpunet.cli.doctor import print_findings
from gpunet.cli.errors import handles_errors, outcome_code
from gpunet.cli.options import JsonOpt, KeyOpt, LabExecOpt, PlanOpt, UserOpt

app = typer.Typer(help="Check the switches against the Plan: BGP sessions and ECMP, port MTU and state, LLDP.",
                  no_args_is_help=True)
SwitchesArg = Annotated[str | None, typer.Argument(
    metavar="[SWITCHES]", show_default=False,
    help="NodeSet of switch names as in the plan (comp-leaf[001-004]); default: every switch reached.")]


@app.command()
@handles_errors
def check(
    switches: SwitchesArg = None,
    plan: PlanOpt = None,
    lab: LabExecOpt = None,
    user: UserOpt = None,
    key: KeyOpt = None,
    show_pass: Annotated[bool, typer.Option("--all", help="List passing checks too.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Each switch's BGP sessions per planned cable, ASNs, ECMP width per leaf (GN-BGP-01..05), port
    MTU and state, LLDP neighbour per port (GN-SW-01..03), each finding with the cable and the fix:
    a lab's switches in their namespaces (--lab), real switches over SSH at the Plan's switch
    management addresses (--plan). Exit 1 on a failure, 2 on bad input, 3 when a switch could not be read."""
    report = switch_check(switches, lab=lab, plan=plan, user=user, key=key)
    if as_json:
        print(report.model_dump_json(indent=1))
    else:
        _print(report, show_pass)
    code = outcome_code(findings=report.failing, unjudged=bool(report.unreachable))
    if code:
        raise typer.Exit(code)


def _print(report: SwitchReport, show_pass: bool) -> None:
    print_findings(report.findings, show_pass, title=f"{len(report.switches)} switches, {report.source}",
                   per_device=True)
    for name, why in report.unreachable.items():
        stdout.print(cell(f"unreachable: {name}: {why}"))
