"""`gpunet lab ...`: the Plan built in network namespaces (root needed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.progress import Progress
from rich.table import Table

from gpunet.api import lab as labs
from gpunet.api.lab import LabState, Readiness
from gpunet.cli.console import cell, print_table, stderr, stdout
from gpunet.cli.errors import handles_errors
from gpunet.cli.options import JsonOpt, LabExecOpt, LabIdOpt

app = typer.Typer(help="Build the Plan in Linux network namespaces, break it on purpose, tear it down.",
                  no_args_is_help=True)


@app.command()
@handles_errors
def up(
    lab_id: LabIdOpt,
    source: Annotated[Path | None, typer.Argument(help="plan.json or spec YAML; default: built-in example.")] = None,
    max_nodes: Annotated[int, typer.Option(help="Slice larger plans to this many servers.", min=2)] = 16,
    scale: Annotated[float, typer.Option(help="Lab Mbit/s per plan Gbit/s on shaped links.")] = 1.0,
    ready_timeout: Annotated[float, typer.Option(
        "--ready-timeout", metavar="SECONDS",
        help="How long to wait, once built, for the lab to be ready to judge (exit 3 naming what is not).")
    ] = labs.DEFAULT_DEADLINE_S,
    routing: Annotated[labs.Routing | None, typer.Option(
        "--routing", show_default=False,
        help="frr: every switch of an eBGP plane runs FRR (zebra + bgpd) from its rendered frr.conf; static: "
             "static ECMP routes. Default: frr where FRR is installed, else static (`lab status` says which).")
    ] = None,
    lldp: Annotated[bool, typer.Option(
        "--lldp", help="Start lldpd in every server and switch now and wait until every cable end has heard its "
                       "neighbour. Without it the first `cabling check --lab` or `switch check --lab` does.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build (or find, if already up) the lab and return once it is ready to be judged: addresses
    settled, sshd listening, every BGP session Established with every leaf's planned ECMP width
    (FRR), every server answered across each plane, and with --lldp LLDP heard on every cable.
    Idempotent."""
    with Progress(console=stderr, transient=True) as bar:
        task = bar.add_task("lab up", total=None)
        state = labs.lab_up(source, lab_id, max_nodes=max_nodes, scale=scale, ready_timeout_s=ready_timeout,
                            routing=routing, lldp=lldp,
                            progress=lambda step, done, total: bar.update(task, completed=done, total=total,
                                                                          description=step))
    _print_state(state, as_json)


@app.command()
@handles_errors
def status(
    lab_id: LabExecOpt = None,
    addresses: Annotated[bool, typer.Option("--addresses", help="Show the plan ↔ lab address map.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """What is up: servers, management addresses, plan ↔ lab address map, faults, notes (every lab,
    or with --lab the one: --json then prints that one object)."""
    states = labs.status(lab_id)
    if as_json:
        found = [s.model_dump(mode="json") for s in states]
        print(json.dumps(found[0] if lab_id else found, indent=1))
        return
    if not states:
        stderr.print("no lab is up")
    for state in states:
        _print_state(state, False)
        if addresses:
            _print_addresses(state)


def _print_addresses(state: LabState) -> None:
    table = Table("server/interface", "plan", "lab", box=box.SIMPLE_HEAD)
    for where, pair in state.address_map.items():
        table.add_row(where, pair.plan, pair.lab)
    print_table(table)


def _print_state(state: LabState, as_json: bool) -> None:
    if as_json:
        print(json.dumps(state.model_dump(mode="json"), indent=1))
        return
    stdout.print(f"[bold]lab {state.lab_id}[/bold]: {state.status}, block {state.block}, "
                 f"host {state.host_address} on {state.host_if}, routing {state.routing}")
    table = Table(box=box.SIMPLE_HEAD)
    for column in ("server", "namespace", "management"):
        table.add_column(column, no_wrap=True)
    for node, ns in sorted(state.servers.items()):
        table.add_row(node, ns, state.mgmt_addresses.get(node, "-"))
    print_table(table)
    _print_switches(state)
    if state.readiness is not None:
        stdout.print(cell(readiness_line(state.readiness)))
    for fault in state.faults:
        stdout.print(cell(f"fault: {fault.cable}: {fault.kind} {fault.value}"))
    for note in state.notes:
        stdout.print(cell(f"note: {note}"))


def _print_switches(state: LabState) -> None:
    """Each switch's management address: its sshd (its eth0), reached with the lab's key."""
    if state.switch_mgmt:
        switches = Table("switch", "management", box=box.SIMPLE_HEAD)
        for switch, address in state.switch_mgmt.items():
            switches.add_row(switch, address)
        print_table(switches)


UNITS = {"addresses": "namespaces", "sshd": "servers and switches", "lldp": "ports", "bgp": "switches",
         "routes": "pings"}


def readiness_line(readiness: Readiness) -> str:
    """"ready 2.41 s after building (3.02 s): addresses 0.00 s (21 namespaces), sshd 0.00 s (8 servers), ..."."""
    parts = [f"{name} {timing.ready_s:.2f} s ({timing.checked} {UNITS.get(name, '')})".replace(" )", ")")
             for name, timing in readiness.conditions.items()]
    return (f"ready {readiness.ready_s:.2f} s after building ({readiness.built_s:.2f} s): "
            f"{', '.join(parts)}")


@app.command(name="exec")
@handles_errors
def exec_(
    lab_id: LabIdOpt,
    node: Annotated[str, typer.Argument(help="Server name as in the plan.")],
    command: Annotated[list[str], typer.Argument(help="Command and arguments (after --).")],
) -> None:
    """Run a command inside a lab server (its network, hostname and /etc/hosts)."""
    code = subprocess.run(labs.exec_argv(lab_id, node, command), check=False).returncode
    raise typer.Exit(code)


@app.command(name="ssh-config")
@handles_errors
def ssh_config(
    lab_id: LabIdOpt,
    bastion: Annotated[str | None, typer.Option(
        "--bastion", help="A lab server to jump through (default: the plan's bastion if it is a lab server).")] = None,
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Where to write it (default: in the lab's "
                                                                  "directory).")] = None,
) -> None:
    """Write the admin ssh_config for the lab's servers (lab key, lab addresses); prints its path,
    so `ssh -F "$(gpunet lab ssh-config --id a)" gpu1` works."""
    print(labs.ssh_config(lab_id, bastion, out))


@app.command()
@handles_errors
def fault(
    lab_id: LabIdOpt,
    target: Annotated[str, typer.Argument(help="One end of a cable, DEVICE:PORT (gpu001:ib0, comp-leaf001:33).")],
    loss: Annotated[float | None, typer.Option(help="Drop this percentage of packets (nftables numgen).")] = None,
    down: Annotated[bool, typer.Option("--down", help="Take the link down.")] = False,
    mtu: Annotated[int | None, typer.Option(help="Set this MTU on both ends.")] = None,
    rate: Annotated[str | None, typer.Option(help="Shape to this rate, tc units (100mbit).")] = None,
    delay: Annotated[str | None, typer.Option(help="Add delay (needs netem, e.g. 5ms).")] = None,
    miswire: Annotated[str | None, typer.Option(
        help="Another cable's end: the far ends of the two cables change places (the veths move).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Break one cable on purpose (or two, with --miswire)."""
    wanted = {"loss": None if loss is None else str(loss), "down": "yes" if down else None,
              "mtu": None if mtu is None else str(mtu), "rate": rate, "delay": delay, "miswire": miswire}
    result = labs.fault(lab_id, target, wanted)
    if as_json:
        print(result.model_dump_json())
    else:
        stdout.print(cell(f"{result.cable}: {result.kind} {result.value or result.other or ''}"))


@app.command()
@handles_errors
def heal(
    lab_id: LabIdOpt,
    target: Annotated[str | None, typer.Argument(help="One end of a faulted cable; all when omitted.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Undo faults."""
    healed = labs.heal(lab_id, target)
    if as_json:
        print(json.dumps([f.model_dump() for f in healed]))
    else:
        stdout.print(f"healed {len(healed)} fault(s)")


@app.command(name="down")
@handles_errors
def down_(lab_id: LabIdOpt, as_json: JsonOpt = False) -> None:
    """Remove everything the lab made (also after a crash); safe to repeat."""
    removed = labs.lab_down(lab_id)
    if as_json:
        print(json.dumps({"lab": lab_id, "namespaces_removed": len(removed)}))
    else:
        stdout.print(f"lab {lab_id}: removed {len(removed)} namespace(s)")
