"""`gpunet fleet run --detach NAME` and `fleet status|logs|attach|stop NAME`: long runs that
outlive the connection. The admin side keeps a small record of each run (its nodes and how they
were reached), so coming back needs only the name."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from ClusterShell.NodeSet import NodeSet

from gpunet.cli.console import cell, stderr, stdout
from gpunet.cli.errors import EXIT_CHECKS_FAILED, handles_errors
from gpunet.cli.fleet_options import FanoutOpt, JsonOpt, KeyOpt, LabOpt, PlanOpt, SshLabOpt, UserOpt, reach
from gpunet.errors import UsageError
from gpunet.fleet import ClusterShellRunner, local_runner
from gpunet.fleet.detach import DetachedRun

NameArg = Annotated[str, typer.Argument(help="The run's name, as given to `fleet run --detach`.")]
NodesOpt = Annotated[str | None, typer.Option("--nodes", help="NodeSet (default: the nodes the run started on).")]
StateDirOpt = Annotated[str | None, typer.Option(
    "--state-dir", help="Where runs live on the nodes (default ~/.local/state/gpunet/runs).")]


def start(nodes: NodeSet, runner: ClusterShellRunner, name: str, command: Sequence[str], *, via: str,
          state_dir: str | None, transport: dict[str, str | None], follow: bool, as_json: bool) -> None:
    """`fleet run --detach`: start, remember, and with --follow stream the output until it ends."""
    from gpunet.fleet.detach import STATE_DIR
    from gpunet.fleet.runs import start_recorded

    where = state_dir or STATE_DIR
    started = start_recorded(runner, nodes, name, command, transport=transport, state_dir=where, via=via)
    if follow and not started.failed_to_start:
        _follow(runner, NodeSet.fromlist(started.running), name, where)
        _report(_status(runner, nodes, name, where, 0, 0), as_json)
        return
    _print(started, as_json)
    if started.failed_to_start:
        raise typer.Exit(EXIT_CHECKS_FAILED)


@handles_errors
def status(
    name: NameArg, nodes: NodesOpt = None, lab: LabOpt = None, ssh_lab: SshLabOpt = None, plan: PlanOpt = None,
    user: UserOpt = None, key: KeyOpt = None, fanout: FanoutOpt = 64, state_dir: StateDirOpt = None,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for running nodes to finish.")] = 0,
    lines: Annotated[int, typer.Option("--lines", help="Lines of output per node.")] = 5,
    as_json: JsonOpt = False,
) -> None:
    """Each node's detached run: running, done (exit status), stopped or lost.

    With the last lines of output; exit 0 when every node is running or ended with 0 (with
    --wait: ended with 0), 1 otherwise."""
    wanted, runner, where = _resolve(name, nodes, lab, ssh_lab, plan, user, key, fanout, state_dir)
    _report(_status(runner, wanted, name, where, wait, lines), as_json, finished=wait > 0)


@handles_errors
def logs(
    name: NameArg, nodes: NodesOpt = None, lab: LabOpt = None, ssh_lab: SshLabOpt = None, plan: PlanOpt = None,
    user: UserOpt = None, key: KeyOpt = None, fanout: FanoutOpt = 64, state_dir: StateDirOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream the output until the run ends.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """A detached run's whole output on every node, identical outputs folded.

    --follow streams it line by line until the run ends."""
    wanted, runner, where = _resolve(name, nodes, lab, ssh_lab, plan, user, key, fanout, state_dir)
    if follow:
        _follow(runner, wanted, name, where)
    _report(_status(runner, wanted, name, where, 0, -1), as_json)


@handles_errors
def attach(
    name: NameArg, node: Annotated[str | None, typer.Argument(help="The node (default: the run's only node).")] = None,
    lab: LabOpt = None, ssh_lab: SshLabOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
    state_dir: StateDirOpt = None,
) -> None:
    """This terminal on NODE's detached run.

    Its tmux session (detach again with C-b d), else its output followed until it ends."""
    from gpunet.fleet.detach import attach_argv

    wanted, runner, where = _resolve(name, node, lab, ssh_lab, plan, user, key, 1, state_dir)
    if len(wanted) != 1:
        raise UsageError(f"run {name} is on {wanted}: name one node to attach to")
    argv = attach_argv(runner, str(wanted), name, state_dir=where)
    sys.stdout.flush()
    os.execvp(argv[0], argv)


@handles_errors
def stop(
    name: NameArg, nodes: NodesOpt = None, lab: LabOpt = None, ssh_lab: SshLabOpt = None, plan: PlanOpt = None,
    user: UserOpt = None, key: KeyOpt = None, fanout: FanoutOpt = 64, state_dir: StateDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """End a detached run on every node (TERM to its process group, KILL after 5 s)."""
    from gpunet.fleet.detach import stop_run

    wanted, runner, where = _resolve(name, nodes, lab, ssh_lab, plan, user, key, fanout, state_dir)
    result = stop_run(runner, wanted, name, state_dir=where)
    _print(result, as_json)
    if any(s.state in ("running", "unreachable", "error") for s in result.states.values()):
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _resolve(name: str, nodes: str | None, lab: str | None, ssh_lab: str | None, plan: Path | None,
             user: str | None, key: Path | None, fanout: int,
             state_dir: str | None) -> tuple[NodeSet, ClusterShellRunner, str]:
    """Nodes, runner and state directory: the options given, else the run's record."""
    from gpunet.fleet.detach import STATE_DIR, check_run
    from gpunet.fleet.runs import load_record

    check_run(name, state_dir or STATE_DIR)
    record = load_record(name)
    if nodes is None and record is None:
        raise UsageError(f"no record of run {name!r} on this machine: name --nodes and how to reach them")
    if record and record.local and not (nodes or lab or ssh_lab or plan):
        return NodeSet(record.nodes), local_runner(), state_dir or record.state_dir
    if record and not (lab or ssh_lab or plan):
        lab, ssh_lab, plan = record.lab, record.ssh_lab, Path(record.plan) if record.plan else None
        user, key = user or record.user, key or (Path(record.key) if record.key else None)
    wanted, runner = reach(nodes or (record.nodes if record else ""), lab=lab, ssh_lab=ssh_lab, plan=plan, user=user,
                           key=key, fanout=fanout)
    return wanted, runner, state_dir or (record.state_dir if record else STATE_DIR)


def _status(runner: ClusterShellRunner, nodes: NodeSet, name: str, where: str, wait: float,
            lines: int) -> DetachedRun:
    from gpunet.fleet.detach import run_status

    return run_status(runner, nodes, name, state_dir=where, wait=wait, lines=lines)


def _follow(runner: ClusterShellRunner, nodes: NodeSet, name: str, where: str) -> None:
    from gpunet.fleet.detach import follow_output

    stderr.print(f"following run {name} on {nodes} (Ctrl-C stops following; the run goes on)", highlight=False)
    try:
        follow_output(runner, nodes, name, lambda node, line: stdout.print(cell(f"{node}: {line}")),
                      state_dir=where)
    except KeyboardInterrupt:
        stderr.print(f"stopped following; `gpunet fleet status {name}` comes back to it", highlight=False)
        raise typer.Exit(0) from None


def _report(run: DetachedRun, as_json: bool, finished: bool = False) -> None:
    _print(run, as_json)
    ended_badly = [n for n in run.failed if run.states[n].state != "running" or finished]
    if ended_badly:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _print(run: DetachedRun, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"name": run.name, "groups": [
            {"nodes": nodes, **s.model_dump(exclude={"node"})} for nodes, s in run.groups()]}, indent=1))
        return
    for nodes, s in run.groups():
        colour = "green" if s.state in ("running", "done") and not s.rc else "red"
        what = s.state + (f", exit {s.rc}" if s.rc is not None else "") + (f" ({s.via})" if s.via else "")
        stdout.print(f"---------------\n[bold]{cell(nodes)}[/bold] ([{colour}]{cell(what)}[/{colour}])\n"
                     "---------------")
        text = (s.output or s.error or "").rstrip()
        if text:
            stdout.print(cell(text))
