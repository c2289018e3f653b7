"""`gpunet doctor` and `gpunet probe`: the troubleshooting checklist on this node."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from gpunet.checks import Finding
from gpunet.checks.doctor import doctor_node
from gpunet.cli.console import cell, print_table, stderr, stdout
from gpunet.cli.errors import EXIT_CHECKS_FAILED, handles_errors
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan
from gpunet.probe.node import probe_node

if TYPE_CHECKING:
    from gpunet.fleet.doctor import FleetDoctorReport

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON.")]
Interval = Annotated[float, typer.Option("--interval", help="Seconds between the two counter samples.", min=0)]
DEFAULT_REMOTE_PLAN = "/etc/gpunet/plan.json"
COLOURS = {"fail": "red", "warn": "yellow", "skip": "dim", "pass": "green"}


@handles_errors
def doctor(
    plan: Annotated[Path | None, typer.Option("--plan", help="plan.json or spec to compare with.")] = None,
    node: Annotated[str | None, typer.Option("--node", help="This node's name in the plan (default: hostname).")]
    = None,
    peers: Annotated[bool, typer.Option("--peers", help="Also ping and connect to every peer on every plane.")]
    = False,
    interval: Interval = 2.0,
    listen: Annotated[bool, typer.Option(
        "--listen", help="With --peers: listen on the ports of the flows this node accepts while probing, so "
                         "peers doing the same can tell a refusal (blocked) from an open port (doctor --fleet "
                         "--peers sets it on every node).")] = False,
    listening: Annotated[str, typer.Option(
        "--listening", help="With --peers: the nodes (NodeSet) listening in this same run (doctor --fleet sets "
                            "it): their refusals count as blocks.")] = "",
    skip_peers: Annotated[str, typer.Option(
        "--skip-peers", help="With --peers: do not probe these nodes (NodeSet); apply's verification leaves out "
                             "the nodes changing in the same batch.")] = "",
    show_pass: Annotated[bool, typer.Option("--all", help="List passing checks too.")] = False,
    fleet: Annotated[str | None, typer.Option("--fleet", help="Run the doctor on these nodes (NodeSet) and fold "
                                                             "their findings.")] = None,
    lab: Annotated[str | None, typer.Option("--lab", help="With --fleet: this lab's servers (ip netns exec).")]
    = None,
    ssh_lab: Annotated[str | None, typer.Option("--ssh-lab", help="With --fleet: this lab's servers over SSH.")]
    = None,
    remote_plan: Annotated[str | None, typer.Option(
        "--remote-plan", help="With --fleet: the plan's path on the nodes (default: the lab's plan in a lab, "
                              "else /etc/gpunet/plan.json).")] = None,
    user: Annotated[str | None, typer.Option("--user", help="With --fleet: SSH user.")] = None,
    key: Annotated[Path | None, typer.Option("--key", help="With --fleet: SSH private key.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Every applicable check on this node (or, with --fleet, on many): failures first, each with its
    fix. Exit 1 on a failure."""
    if fleet is not None:
        _fleet(fleet, FleetOptions(plan, lab, ssh_lab, remote_plan, user, key), peers, interval, show_pass, as_json)
        return
    with stderr.status("probing…", spinner="dots"):
        state, findings = doctor_node(_plan(plan), node, peers=peers, interval=interval, listen=listen,
                                      listening=_nodes(listening), skip_peers=_nodes(skip_peers))
    failed = any(f.verdict == "fail" for f in findings)
    if as_json:
        print(json.dumps({"node": findings[0].node if findings else state.hostname, "failed": failed,
                          "findings": [f.model_dump() for f in findings], "probe_problems": list(state.problems)},
                         indent=1))
    else:
        _print(findings, show_pass)
    if failed:
        raise typer.Exit(EXIT_CHECKS_FAILED)


# The one-node doctor imports only what it uses: the rest of gpunet (design, lab, bench) would
# double its start-up, and doctor --peers is meant to cost little more than its interval.
def _plan(source: Path | None) -> Plan | None:
    if source is None:
        return None
    if source.suffix == ".json":
        return read_plan(source)
    from gpunet import api  # a spec is designed first

    return api.load_plan(source)


def _nodes(nodeset: str) -> frozenset[str]:
    if not nodeset:
        return frozenset()
    from gpunet import api

    return frozenset(api.fleet_nodes(nodeset))


def _print(findings: list[Finding], show_pass: bool) -> None:
    table = Table(box=box.SIMPLE_HEAD, show_lines=False)
    for column in ("", "check", "subject", "observed", "expected", "fix"):
        table.add_column(column, overflow="fold")
    for f in findings:
        if f.verdict == "pass" and not show_pass:
            continue
        colour = COLOURS[f.verdict]
        table.add_row(f"[{colour}]{f.verdict}[/{colour}]", f.check, cell(f.subject), cell(f.observed or f.evidence),
                      cell(f.expected), cell(f.fix))
    counts = {v: sum(f.verdict == v for f in findings) for v in COLOURS}
    print_table(table)
    stdout.print(" ".join(f"[{COLOURS[v]}]{n} {v}[/{COLOURS[v]}]" for v, n in counts.items()))


@dataclass(frozen=True)
class FleetOptions:
    plan: Path | None
    lab: str | None
    ssh_lab: str | None
    remote_plan: str | None
    user: str | None
    key: Path | None


def _fleet(nodes: str, options: FleetOptions, peers: bool, interval: float, show_pass: bool, as_json: bool) -> None:
    from gpunet import api
    from gpunet.lab.build import LAB_PLAN
    from gpunet.lab.state import lab_dir

    lab = options.lab or options.ssh_lab
    remote_plan = options.remote_plan or (str(lab_dir(lab) / LAB_PLAN) if lab else DEFAULT_REMOTE_PLAN)
    # In a lab the servers share this filesystem: run this very gpunet; real nodes have their own.
    gpunet = [sys.executable, "-m", "gpunet"] if lab else ["gpunet"]
    runner = api.fleet_runner(lab=options.lab, ssh_lab=options.ssh_lab, plan=options.plan, user=options.user,
                              key=options.key, timeout=120 + interval)
    wanted = api.fleet_nodes(nodes, plan=options.plan, lab=lab)
    with stderr.status(f"doctor on {wanted}…", spinner="dots"):
        report = api.fleet_doctor(runner, wanted, remote_plan=remote_plan, gpunet=gpunet, peers=peers,
                                  interval=interval)
    if as_json:
        print(report.model_dump_json(indent=1))
    else:
        _print_fleet(report, show_pass)
    if report.failed:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _print_fleet(report: FleetDoctorReport, show_pass: bool) -> None:
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
        stdout.print(f"[red]no findings[/red] {nodes}: {why}", markup=True)
    failing = [f for f in report.findings if f.verdict == "fail"]
    stdout.print(f"{report.nodes} nodes: {len(failing)} failing finding(s), "
                 f"{len(report.unreachable)} group(s) of nodes without findings")


@handles_errors
def probe(interval: Interval = 2.0, as_json: JsonFlag = False) -> None:
    """Read this node as it is: links, addresses, routes, bonds, InfiniBand, counters, settings."""
    state = probe_node(interval=interval)
    if as_json:
        print(state.model_dump_json(indent=1))
        return
    table = Table("interface", "state", "carrier", "mtu", "speed", "addresses", box=box.SIMPLE_HEAD)
    for i in state.interfaces:
        table.add_row(cell(i.name), cell(i.operstate), str(i.carrier), str(i.mtu), f"{i.speed_mbps or '-'}",
                      " ".join(state.addresses.get(i.name, ())))
    stdout.print(f"[bold]{state.hostname}[/bold]")
    print_table(table)
    for problem in state.problems:
        stdout.print(f"[yellow]could not read[/yellow] {problem}")
