"""`gpunet fleet run --detach NAME` and `fleet status|logs|attach|stop NAME`: long runs that
outlive the connection. The admin side keeps a small record of each run (its nodes and how they
were reached), so coming back needs only the name."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from gpunet.api import fleet
from gpunet.api.fleet import DetachedRun, NodeSet, Reach, RunAccess
from gpunet.cli.console import cell, shown, stderr, stdout
from gpunet.cli.errors import EXIT_FINDINGS, handles_errors
from gpunet.cli.options import FanoutOpt, JsonOpt, KeyOpt, LabSshOpt, PlanOpt, UserOpt

NameArg = Annotated[str, typer.Argument(help="The run's name, as given to `fleet run --detach`.")]
NodesOpt = Annotated[str | None, typer.Option("--nodes", help="NodeSet (default: the nodes the run started on).")]
StateDirOpt = Annotated[str | None, typer.Option(
    "--state-dir", help="Where runs live on the nodes (default ~/.local/state/gpunet/runs).")]


def start(reached: Reach, nodes: NodeSet, name: str, command: Sequence[str], *, via: str, state_dir: str | None,
          follow: bool, as_json: bool) -> None:
    """`fleet run --detach`: start, remember, and with --follow stream the output until it ends."""
    started, where = fleet.start_detached(reached, nodes, name, command, via=via, state_dir=state_dir)
    if follow and not started.failed_to_start:
        access = fleet.access_started(reached, started, where)
        _follow(access, name)
        _report(fleet.status(access, name, lines=0), as_json)
        return
    _print(started, as_json)
    if started.failed_to_start:
        raise typer.Exit(EXIT_FINDINGS)


@handles_errors
def status(
    name: NameArg, nodes: NodesOpt = None, lab: LabSshOpt = None, plan: PlanOpt = None,
    user: UserOpt = None, key: KeyOpt = None, fanout: FanoutOpt = 64, state_dir: StateDirOpt = None,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for running nodes to finish.")] = 0,
    lines: Annotated[int, typer.Option("--lines", help="Lines of output per node.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Each node's detached run: running, done (exit status), stopped or lost.

    With the last lines of output; exit 0 when every node is running or ended with 0 (with
    --wait: ended with 0), 1 otherwise."""
    access = fleet.resolve_run(name, nodes, lab=lab, plan=plan, user=user, key=key, fanout=fanout, state_dir=state_dir)
    _report(fleet.status(access, name, wait=wait, lines=lines), as_json, finished=wait > 0)


@handles_errors
def logs(
    name: NameArg, nodes: NodesOpt = None, lab: LabSshOpt = None, plan: PlanOpt = None,
    user: UserOpt = None, key: KeyOpt = None, fanout: FanoutOpt = 64, state_dir: StateDirOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream the output until the run ends.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """A detached run's whole output on every node, identical outputs folded.

    --follow streams it line by line until the run ends."""
    access = fleet.resolve_run(name, nodes, lab=lab, plan=plan, user=user, key=key, fanout=fanout, state_dir=state_dir)
    if follow:
        _follow(access, name)
    _report(fleet.status(access, name, lines=-1), as_json)


@handles_errors
def attach(
    name: NameArg, node: Annotated[str | None, typer.Argument(help="The node (default: the run's only node).")] = None,
    lab: LabSshOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
    state_dir: StateDirOpt = None,
) -> None:
    """This terminal on NODE's detached run.

    Its tmux session (detach again with C-b d), else its output followed until it ends."""
    access = fleet.resolve_run(name, node, lab=lab, plan=plan, user=user, key=key, fanout=1, state_dir=state_dir)
    argv = fleet.attach(access, name)
    sys.stdout.flush()
    os.execvp(argv[0], argv)


@handles_errors
def stop(
    name: NameArg, nodes: NodesOpt = None, lab: LabSshOpt = None, plan: PlanOpt = None,
    user: UserOpt = None, key: KeyOpt = None, fanout: FanoutOpt = 64, state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """End a detached run on every node (TERM to its process group, KILL after 5 s)."""
    access = fleet.resolve_run(name, nodes, lab=lab, plan=plan, user=user, key=key, fanout=fanout, state_dir=state_dir)
    result = fleet.stop(access, name)
    _print(result, as_json)
    if any(s.state in ("running", "unreachable", "error") for s in result.states.values()):
        raise typer.Exit(EXIT_FINDINGS)


def _follow(access: RunAccess, name: str) -> None:
    stderr.print(f"following run {shown(name)} on {shown(access.nodes)} (Ctrl-C stops following; the run goes on)",
                 highlight=False)
    try:
        fleet.follow(access, name, lambda node, line: stdout.print(cell(f"{node}: {line}")))
    except KeyboardInterrupt:
        stderr.print(f"stopped following; `gpunet fleet status {name}` comes back to it", highlight=False)
        raise typer.Exit(0) from None


def _report(run: DetachedRun, as_json: bool, finished: bool = False) -> None:
    _print(run, as_json)
    ended_badly = [n for n in run.failed if run.states[n].state != "running" or finished]
    if ended_badly:
        raise typer.Exit(EXIT_FINDINGS)


def _print(run: DetachedRun, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"name": run.name, "groups": [
            {"nodes": nodes, **s.model_dump(exclude={"node"})} for nodes, s in run.groups()]}, indent=1))
        return
    for nodes, s in run.groups():
        colour = "green" if s.state in ("running", "done") and not s.rc else "red"
        what = s.state + (f", exit {s.rc}" if s.rc is not None else "") + (f" ({s.via})" if s.via else "")
        stdout.print(f"---------------\n[bold]{shown(nodes)}[/bold] ([{colour}]{shown(what)}[/{colour}])\n"
                     "---------------")
        text = (s.output or s.error or "").rstrip()
        if text:
            stdout.print(cell(text))
