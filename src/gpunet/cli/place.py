"""`gpunet place`: choose a job's nodes from the free ones by predicted collective time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from gpunet.api import sim as sims
from gpunet.api.sim import Placement, SimReport
from gpunet.cli.console import cell, stderr, stdout
from gpunet.cli.errors import handles_errors
from gpunet.cli.options import JsonOpt


@handles_errors
def place_job(
    count: Annotated[int, typer.Argument(help="Nodes the job needs.", show_default=False)],
    source: Annotated[Path | None, typer.Argument(help="plan.json or spec YAML; the built-in example when "
                                                       "omitted.")] = None,
    free: Annotated[str | None, typer.Option(help="The free nodes (NodeSet); default every GPU node of the "
                                                  "plane.")] = None,
    slurm: Annotated[Path | None, typer.Option(help="The free nodes from saved `sinfo` or `scontrol show nodes` "
                                                    "output ('-' for stdin).")] = None,
    collective: Annotated[str, typer.Option(help="The collective to predict (as gpunet sim).")] = "all_reduce",
    algorithm: Annotated[str, typer.Option(help="ring or tree.")] = "ring",
    size: Annotated[str, typer.Option(help="Message size the choice is judged at.")] = "8G",
    plane: Annotated[str | None, typer.Option(help="Plane (default compute, else the deepest).")] = None,
    seed: Annotated[int, typer.Option(min=0, max=2**32, help="Seed of the ECMP hashes and the random draw.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """The nodes to give the job (packed under leaves, whole scalable units, rail-aligned), its
    predicted busbw and spine share, against as many free nodes taken at random."""
    wanted = sims.options(collective=collective, algorithm=algorithm, sizes=size, plane=plane, seed=seed)
    with stderr.status("placing…", spinner="dots"):
        placed = sims.place_job(source, count, free=free, slurm=slurm, wanted=wanted, seed=seed)
    if as_json:
        print(json.dumps({"nodes": placed.folded, "rank_order": list(placed.nodes), "units": placed.units,
                          "pods": placed.pods, "chosen": placed.chosen.model_dump(mode="json"),
                          "random": placed.random.model_dump(mode="json")}, indent=1))
        return
    _print(placed)


def _line(label: str, report: SimReport) -> str:
    return (f"{label}: busbw {report.busbw:,.1f} GB/s at {report.rows[-1].bytes / 2**30:g} GiB, "
            f"{report.vs_nonblocking or 0:.0%} of non-blocking, spine share {report.spine_share:.1%}")


def _print(placed: Placement) -> None:
    spans = f" ({len(placed.nodes)}, {placed.units} unit(s), {placed.pods} pod(s))"
    stdout.print("nodes: ", cell(placed.folded), spans)
    stdout.print(_line("chosen", placed.chosen))
    stdout.print(_line("random", placed.random))
    if placed.chosen.bottlenecks:
        stdout.print("chosen bottleneck: ", cell(placed.chosen.bottlenecks[0].direction))
