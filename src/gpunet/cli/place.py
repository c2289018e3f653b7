"""`gpunet place`: choose a job's nodes from the free ones by predicted collective time."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from gpunet import api
from gpunet.cli.console import cell, stderr, stdout
from gpunet.cli.errors import handles_errors
from gpunet.errors import ParseError, UsageError
from gpunet.model.nodeset import NodeSetError, parse_nodeset
from gpunet.place import Placement, parse_free_nodes, place
from gpunet.sim import SimOptions, SimReport
from gpunet.sim.whatif import parse_sizes

MAX_SLURM_BYTES = 64 * 2**20


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
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: the nodes and both predictions.")] = False,
) -> None:
    """The nodes to give the job (packed under leaves, whole scalable units, rail-aligned), its
    predicted busbw and spine share, against as many free nodes taken at random."""
    if free is not None and slurm is not None:
        raise UsageError("give the free nodes once: --free or --slurm")
    plan = api.load_plan(source)
    pool = _from_slurm(slurm) if slurm is not None else _nodes(free) if free is not None else None
    options = SimOptions(collective=collective, algorithm=algorithm, sizes=parse_sizes(size), plane=plane, seed=seed)
    with stderr.status("placing…", spinner="dots"):
        placed = place(plan, count, pool, options, seed=seed)
    if as_json:
        print(json.dumps({"nodes": placed.folded, "rank_order": list(placed.nodes), "units": placed.units,
                          "pods": placed.pods, "chosen": placed.chosen.model_dump(mode="json"),
                          "random": placed.random.model_dump(mode="json")}, indent=1))
        return
    _print(placed)


def _nodes(text: str) -> list[str]:
    try:
        return list(parse_nodeset(text))
    except NodeSetError as exc:
        raise UsageError(str(exc)) from None


def _from_slurm(path: Path) -> list[str]:
    try:
        if str(path) == "-":
            data = sys.stdin.buffer.read(MAX_SLURM_BYTES + 1)
        else:
            with path.open("rb") as handle:
                data = handle.read(MAX_SLURM_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_SLURM_BYTES:
        raise UsageError(f"{path} is over {MAX_SLURM_BYTES // 2**20} MiB")
    try:
        nodes = parse_free_nodes(data.decode("utf-8", errors="replace"))
    except ParseError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not nodes.free:
        raise UsageError(f"{path}: no node is free ({len(nodes.states)} listed)")
    return list(nodes.free)


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
