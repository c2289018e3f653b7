"""`gpunet ibsim ...`: the Plan's InfiniBand fabric in the simulator, with opensm and the real
infiniband-diags tools against it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpunet.api import lab as labs
from gpunet.api.lab import IbsimState
from gpunet.cli.console import cell, stderr, stdout
from gpunet.cli.errors import handles_errors
from gpunet.cli.options import IbsimIdOpt, JsonOpt

app = typer.Typer(help="Simulate the plan's InfiniBand fabric (ibsim + opensm) for ibnetdiscover, perfquery, "
                       "ibtracert, and break it on purpose.", no_args_is_help=True)


@app.command()
@handles_errors
def up(
    sim_id: IbsimIdOpt,
    source: Annotated[Path | None, typer.Argument(help="plan.json or spec YAML; default: built-in example.")] = None,
    plane: Annotated[str | None, typer.Option(help="The InfiniBand plane (default: the first).")] = None,
    routing: Annotated[str, typer.Option(help="opensm routing engines, in order (-R).")] = "ftree,minhop",
    as_json: JsonOpt = False,
) -> None:
    """Start ibsim with the plan's fabric and opensm on it; returns once the subnet is up."""
    state = labs.ibsim_up(source, sim_id, plane=plane, routing=routing)
    _print(state, as_json)


@app.command()
@handles_errors
def status(sim_id: IbsimIdOpt, as_json: JsonOpt = False) -> None:
    """The simulator, its faults and which routing engine opensm used."""
    _print(labs.ibsim_status(sim_id), as_json)


@app.command()
@handles_errors
def fault(
    sim_id: IbsimIdOpt,
    end: Annotated[str, typer.Argument(help="A cable end, DEVICE:PORT as in cabling.csv (gpu001:ib0).")],
    unplug: Annotated[bool, typer.Option("--unplug", help="Pull the cable (ibsim Unlink).")] = False,
    swap: Annotated[str | None, typer.Option("--swap", help="Another cable's end: the far ends of the two "
                                                            "cables change places.")] = None,
    move: Annotated[str | None, typer.Option("--move", help="Plug END's cable into this free port instead.")] = None,
    counter: Annotated[str | None, typer.Option("--counter", help="Set a port counter, Attr.Field=N "
                                                                  "(PortCounters.SymbolErrorCounter=100).")] = None,
    rate: Annotated[str | None, typer.Option("--rate", help="The cable's lanes and speed, e.g. 2xHDR (restarts "
                                                            "the simulator).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Break the simulated fabric on purpose."""
    chosen = {"unplug": "" if unplug else None, "swap": swap, "move": move, "counter": counter, "rate": rate}
    _print(labs.ibsim_fault(sim_id, end, chosen), as_json)


@app.command()
@handles_errors
def heal(sim_id: IbsimIdOpt, as_json: JsonOpt = False) -> None:
    """Undo every fault (the simulator restarts from the plan's topology)."""
    _print(labs.ibsim_heal(sim_id), as_json)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@handles_errors
def run(
    sim_id: IbsimIdOpt,
    command: Annotated[list[str], typer.Argument(help="An infiniband-diags command and its arguments (after --).")],
    attach: Annotated[str | None, typer.Option(help="Attach at this simulator node id (H-gpu001-mlx5_0).")] = None,
) -> None:
    """Run ibnetdiscover, iblinkinfo, ibqueryerrors, perfquery, ibtracert ... against the simulator."""
    done = labs.ibsim_tool(sim_id, command, attach)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    raise typer.Exit(done.returncode)


@app.command()
@handles_errors
def down(sim_id: IbsimIdOpt, as_json: JsonOpt = False) -> None:
    """Stop ibsim and opensm and remove their files."""
    stopped = labs.ibsim_down(sim_id)
    if as_json:
        print(json.dumps({"ibsim": sim_id, "stopped": stopped}))
    else:
        stdout.print(f"ibsim {sim_id}: {'stopped' if stopped else 'was not up'}")


def _print(state: IbsimState, as_json: bool) -> None:
    routing = labs.routing_used(state)  # the engines asked for are in the state; the one used is in opensm's log
    if as_json:
        print(json.dumps(state.model_dump(mode="json") | {
            "routing_used": str(routing), "routing_engine": routing.engine,
            "ftree_refused": routing.ftree_refused}, indent=1))
        return
    stdout.print(cell(f"ibsim {state.sim_id}: {state.plane} plane, {state.servers} servers, opensm (-R "
                      f"{routing.asked}) routing {routing}"), soft_wrap=True)
    for f in state.faults:
        stdout.print(cell(f"  fault: {f.kind} {f.end} {f.other or f.value}"))
    for note in state.notes:
        stderr.print(cell(f"note: {note}"))
