"""`gpunet fleet run`: one command on many nodes, identical outputs folded (like clush -b)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from gpunet import api
from gpunet.cli.console import stdout
from gpunet.cli.errors import EXIT_CHECKS_FAILED, handles_errors
from gpunet.fleet import FleetResult

app = typer.Typer(help="Run commands on many nodes through ClusterShell.", no_args_is_help=True)


@app.command(name="run")
@handles_errors
def run_(
    nodes: Annotated[str, typer.Argument(help="NodeSet: gpu[001-032],login01; with a plan or lab also "
                                                "@role:gpu, @leaf:NAME, @rail:N, @plane:NAME, @GROUP.")],
    command: Annotated[list[str], typer.Argument(help="Command and arguments (after --).")],
    lab: Annotated[str | None, typer.Option("--lab", help="Run in this lab's servers (ip netns exec).")] = None,
    ssh_lab: Annotated[str | None, typer.Option(
        "--ssh-lab", help="SSH to this lab's servers with the lab key (the real SSH path).")] = None,
    plan: Annotated[Path | None, typer.Option("--plan", help="Connect to each node's management address.")] = None,
    user: Annotated[str | None, typer.Option("--user", help="SSH user.")] = None,
    key: Annotated[Path | None, typer.Option("--key", help="SSH private key.")] = None,
    fanout: Annotated[int, typer.Option(help="Connections at once.")] = 64,
    timeout: Annotated[float, typer.Option(help="Seconds per command.")] = 600,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Run CMD on NODESET; prints each distinct outcome once with the folded node names."""
    wanted = api.fleet_nodes(nodes, plan=plan, lab=lab or ssh_lab)
    runner = api.fleet_runner(lab=lab, ssh_lab=ssh_lab, plan=plan, user=user, key=key, fanout=fanout,
                              timeout=timeout)
    result = runner.run(command, wanted)
    _print(result, as_json)
    if result.failed:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _print(result: FleetResult, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"command": result.command, "groups": [
            {"nodes": nodes, **outcome.model_dump(exclude={"node", "duration_s"})} for nodes, outcome in result.groups()
        ]}, indent=1))
        return
    for nodes, outcome in result.groups():
        status = "ok" if outcome.rc == 0 else outcome.error or f"exit {outcome.rc}"
        colour = "green" if outcome.rc == 0 else "red"
        stdout.print(f"---------------\n[bold]{nodes}[/bold] ([{colour}]{status}[/{colour}])\n---------------")
        text = (outcome.stdout + ("\n" + outcome.stderr if outcome.stderr else "")).rstrip()
        if text:
            stdout.print(text, markup=False, highlight=False)
