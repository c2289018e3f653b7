"""`gpunet fleet`: one command on many nodes (identical outputs folded, like clush -b), detached
runs that outlive the connection, files to and from the nodes, packet captures."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from gpunet.api import fleet
from gpunet.api.fleet import FleetResult
from gpunet.cli import fleet_files, fleet_install, fleet_runs
from gpunet.cli.console import shown, stdout
from gpunet.cli.errors import handles_errors, outcome_code
from gpunet.cli.options import ConnectTimeoutOpt, FanoutOpt, JsonOpt, KeyOpt, LabSshOpt, NodesArg, PlanOpt, UserOpt

app = typer.Typer(help="Run commands on many nodes through ClusterShell; copy files, capture packets, install gpunet.",
                  no_args_is_help=True)


@app.command(name="run")
@handles_errors
def run_(
    nodes: NodesArg,
    command: Annotated[list[str], typer.Argument(help="Command and arguments (after --).")],
    lab: LabSshOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
    fanout: FanoutOpt = 64, connect_timeout: ConnectTimeoutOpt = 10,
    timeout: Annotated[float, typer.Option(help="Seconds per command.")] = 600,
    detach: Annotated[str | None, typer.Option(
        "--detach", metavar="NAME", help="Start it detached on each node (tmux, a systemd unit, or setsid) and "
                                         "return; `fleet status|logs|attach|stop NAME` come back to it.")] = None,
    via: Annotated[str, typer.Option("--via", help="With --detach: auto, tmux, systemd or setsid.")] = "auto",
    state_dir: fleet_runs.StateDirOpt = None,
    follow: Annotated[bool, typer.Option("--follow", help="With --detach: stream the output until it ends.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run CMD on NODES; prints each distinct outcome once with the folded node names.

    Exit 1 when the command failed on a node, 3 when a node could not be reached (and none failed)."""
    wanted, reached = fleet.reach(nodes, lab=lab, plan=plan, user=user, key=key, fanout=fanout, timeout=timeout,
                                  connect_timeout=connect_timeout)
    if detach is not None:
        fleet_runs.start(reached, wanted, detach, command, via=via, state_dir=state_dir, follow=follow,
                         as_json=as_json)
        return
    result = fleet.run(reached, wanted, command)
    _print(result, as_json)
    unreached = [n for n in result.failed if result.outcomes[n].rc in (None, 255)]
    raise typer.Exit(outcome_code(findings=len(unreached) < len(result.failed), unjudged=bool(unreached)))


def _print(result: FleetResult, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"command": result.command, "groups": [
            {"nodes": nodes, **outcome.model_dump(exclude={"node", "duration_s"})} for nodes, outcome in result.groups()
        ]}, indent=1))
        return
    for nodes, outcome in result.groups():
        status = "ok" if outcome.rc == 0 else outcome.error or f"exit {outcome.rc}"
        colour = "green" if outcome.rc == 0 else "red"
        stdout.print(f"---------------\n[bold]{shown(nodes)}[/bold] ([{colour}]{shown(status)}[/{colour}])\n"
                     "---------------")
        text = (outcome.stdout + ("\n" + outcome.stderr if outcome.stderr else "")).rstrip()
        if text:
            stdout.print(text, markup=False, highlight=False)


for _name, _command in (("copy", fleet_files.copy), ("gather", fleet_files.gather), ("capture", fleet_files.capture),
                        ("status", fleet_runs.status), ("logs", fleet_runs.logs), ("attach", fleet_runs.attach),
                        ("stop", fleet_runs.stop), ("install", fleet_install.install)):
    app.command(name=_name)(_command)
