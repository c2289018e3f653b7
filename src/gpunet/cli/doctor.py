"""`gpunet doctor` and `gpunet probe`: the troubleshooting checklist on this node, or on many."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from gpunet.api import doctor as doctors
from gpunet.api.doctor import Finding
from gpunet.cli.console import cell, print_table, shown, stderr, stdout
from gpunet.cli.errors import EXIT_FINDINGS, handles_errors, outcome_code
from gpunet.cli.options import JsonOpt, KeyOpt, LabSshOpt, OptionalNodesArg, PlanOpt, UserOpt

if TYPE_CHECKING:
    from gpunet.api.doctor import FleetDoctorReport

Interval = Annotated[float, typer.Option("--interval", help="Seconds between the two counter samples.", min=0)]
COLOURS = {"fail": "red", "warn": "yellow", "skip": "dim", "pass": "green"}


@handles_errors
def doctor(
    nodes: OptionalNodesArg = None,
    plan: PlanOpt = None,
    node: Annotated[str | None, typer.Option("--node", help="This node's name in the plan (default: hostname).")]
    = None,
    peers: Annotated[bool, typer.Option("--peers", help="Also ping and connect to every peer on every plane.")]
    = False,
    interval: Interval = 2.0,
    listen: Annotated[bool, typer.Option(
        "--listen", help="With --peers: listen on the ports of the flows this node accepts while probing, and "
                         "until every --listening node has probed them (at most 60 s beyond --interval), so "
                         "peers doing the same can tell a refusal (blocked) from an open port (doctor NODES "
                         "--peers sets it on every node).")] = False,
    listening: Annotated[str, typer.Option(
        "--listening", help="With --peers: the nodes (NodeSet) listening in this same run (doctor NODES sets "
                            "it): their refusals count as blocks, and --listen waits for their probes.")] = "",
    skip_peers: Annotated[str, typer.Option(
        "--skip-peers", help="With --peers: do not probe these nodes (NodeSet); apply's verification leaves out "
                             "the nodes changing in the same batch.")] = "",
    show_pass: Annotated[bool, typer.Option("--all", help="List passing checks too.")] = False,
    nccl_log: Annotated[Path | None, typer.Option(
        "--nccl-log", help="A job's NCCL_DEBUG=INFO log on this node: judge what NCCL used (GPUDirect RDMA, "
                           "SHARP/CollNet, its HCAs) against the Plan.")] = None,
    lab: LabSshOpt = None,
    remote_plan: Annotated[str | None, typer.Option(
        "--remote-plan", help="With NODES: the plan's path on the nodes (default: the lab's plan in a lab, "
                              "else /etc/gpunet/plan.json).")] = None,
    prefix: Annotated[str | None, typer.Option(
        "--prefix", help="With NODES: where `fleet install` put gpunet on the nodes (default /opt/gpunet; else "
                         "each node's python3 runs it).")] = None,
    user: UserOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every applicable check on this node, or with NODES on each of them (their findings folded):
    failures first, each with its fix. Exit 1 on a failure, 3 when a node could not be judged."""
    if nodes is not None:
        with stderr.status(f"doctor on {nodes}…", spinner="dots"):
            report = doctors.fleet_doctor(nodes, lab=lab, plan=plan, user=user, key=key, remote_plan=remote_plan,
                                          peers=peers, interval=interval, prefix=prefix)
        _print_fleet(report, show_pass, as_json)
        raise typer.Exit(outcome_code(findings=report.failing, unjudged=bool(report.unreachable)))
    with stderr.status("probing…", spinner="dots"):
        state, findings = doctors.doctor(plan, node, peers=peers, interval=interval, listen=listen,
                                         listening=listening, skip_peers=skip_peers, nccl_log=nccl_log)
    failed = any(f.verdict == "fail" for f in findings)
    if as_json:
        print(json.dumps({"node": findings[0].node if findings else state.hostname, "failed": failed,
                          "findings": [f.model_dump() for f in findings], "probe_problems": list(state.problems)},
                         indent=1))
    else:
        _print(findings, show_pass)
    if failed:
        raise typer.Exit(EXIT_FINDINGS)


def _print(findings: list[Finding], show_pass: bool) -> None:
    print_findings(findings, show_pass)


def print_findings(findings: Sequence[Finding], show_pass: bool, *, title: str | None = None,
                   per_device: bool = False) -> None:
    """The findings as doctor shows them, failures as they come, passes only with --all, then the
    count per verdict; `per_device` adds the column naming the device (the switch checks)."""
    table = Table(box=box.SIMPLE_HEAD, show_lines=False, title=title)
    for column in ("", "check", *(["switch"] if per_device else []), "subject", "observed", "expected", "fix"):
        table.add_column(column, overflow="fold")
    for f in findings:
        if f.verdict == "pass" and not show_pass:
            continue
        colour = COLOURS[f.verdict]
        table.add_row(f"[{colour}]{f.verdict}[/{colour}]", f.check, *([f.node] if per_device else []),
                      cell(f.subject), cell(f.observed or f.evidence), cell(f.expected), cell(f.fix))
    counts = {v: sum(f.verdict == v for f in findings) for v in COLOURS}
    print_table(table)
    stdout.print(" ".join(f"[{COLOURS[v]}]{n} {v}[/{COLOURS[v]}]" for v, n in counts.items()))


def _print_fleet(report: FleetDoctorReport, show_pass: bool, as_json: bool) -> None:
    if as_json:
        print(report.model_dump_json(indent=1))
        return
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("", "check", "subject", "nodes", "observed", "fix"):
        table.add_column(column, overflow="fold")
    for f in report.findings:
        if f.verdict == "pass" and not show_pass:
            continue
        colour = COLOURS[f.verdict]
        more = f" (+{f.variants - 1} other values)" if f.variants > 1 else ""
        table.add_row(f"[{colour}]{f.verdict}[/{colour}]", f.check, cell(f.subject), f.nodes, cell(f.observed + more),
                      cell(f.fix))
    print_table(table)
    for nodes, why in report.unreachable.items():
        stdout.print(f"[red]no findings[/red] {shown(nodes)}: {shown(why)}", markup=True)
    stdout.print(_fleet_summary(report), highlight=False)


def _fleet_summary(report: FleetDoctorReport) -> str:
    """How many nodes were judged, of how many asked: a node that sent no findings is no pass."""
    failing = sum(f.verdict == "fail" for f in report.findings)
    verdict = f"{failing} failing finding(s)" if failing else "no failing finding"
    if not report.unreachable:
        return f"{report.nodes} node(s) judged: {verdict}"
    return (f"{report.nodes - report.unjudged} of {report.nodes} node(s) judged: {verdict}; "
            f"not judged ({report.unjudged}): {shown(', '.join(report.unreachable))}")


@handles_errors
def probe(interval: Interval = 2.0, as_json: JsonOpt = False) -> None:
    """Read this node as it is: links, addresses, routes, bonds, InfiniBand, counters, settings."""
    state = doctors.probe(interval)
    if as_json:
        print(state.model_dump_json(indent=1))
        return
    table = Table("interface", "state", "carrier", "mtu", "speed", "addresses", box=box.SIMPLE_HEAD)
    for i in state.interfaces:
        table.add_row(cell(i.name), cell(i.operstate), str(i.carrier), str(i.mtu), f"{i.speed_mbps or '-'}",
                      cell(" ".join(state.addresses.get(i.name, ()))))
    stdout.print(f"[bold]{shown(state.hostname)}[/bold]")
    print_table(table)
    for problem in state.problems:
        stdout.print(f"[yellow]could not read[/yellow] {shown(problem)}")
