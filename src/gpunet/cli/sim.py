"""`gpunet sim`: a collective of a job over the Plan's cables, as nccl-tests would report it, and
what-ifs side by side (an element down, another placement, another oversubscription or spec)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from gpunet.api import sim as sims
from gpunet.api.sim import SimReport, WhatIf
from gpunet.cli.console import cell, print_table, shown, stderr
from gpunet.cli.errors import handles_errors
from gpunet.cli.options import JsonOpt


@handles_errors
def sim(
    source: Annotated[Path | None, typer.Argument(help="plan.json or spec YAML; the built-in example when "
                                                       "omitted.")] = None,
    collective: Annotated[str, typer.Option(help="all_reduce, all_gather, reduce_scatter, alltoall, or sendrecv "
                                                 "(with --pattern).")] = "all_reduce",
    algorithm: Annotated[str, typer.Option(help="ring, or tree (NCCL's double binary tree; all_reduce).")] = "ring",
    sizes: Annotated[str, typer.Option(help="Message sizes as nccl-tests writes them (K, M, G: powers of 1024).")]
    = "1M,16M,256M,1G,8G",
    nodes: Annotated[str | None, typer.Option(help="The job's nodes in rank order (NodeSet); default every GPU "
                                                   "node of the plane.")] = None,
    plane: Annotated[str | None, typer.Option(help="Plane (default compute, else the deepest).")] = None,
    routing: Annotated[str, typer.Option(help="hash: static ECMP, a next hop per connection from its 5-tuple; "
                                              "spray: ideal adaptive routing.")] = "hash",
    seed: Annotated[int, typer.Option(min=0, max=2**32, help="Seed of the ECMP hashes.")] = 0,
    connections: Annotated[int, typer.Option(min=1, max=64, help="Connections (QPs) per peer and rail.")] = 2,
    nvlink: Annotated[float | None, typer.Option(min=1, help="NVLink Gb/s per GPU each way (default by GPU "
                                                             "model).")] = None,
    pcie: Annotated[float | None, typer.Option(min=1, help="PCIe Gb/s per NIC each way (default by GPU model).")]
    = None,
    pattern: Annotated[Path | None, typer.Option(help="Point-to-point pattern for sendrecv: SOURCE DESTINATION "
                                                      "[RAIL] a line.")] = None,
    fail: Annotated[list[str] | None, typer.Option(help="What-if: this switch or cable down (repeat: a column "
                                                        "each), named as compare and localize name them.")] = None,
    place: Annotated[list[str] | None, typer.Option(help="What-if: the job on these nodes instead (NodeSet, repeat)."
                                                    )] = None,
    oversubscription: Annotated[list[float] | None, typer.Option(help="What-if: the plane's leaves at this down:up "
                                                                      "ratio (needs a spec; repeat).")] = None,
    spec: Annotated[list[Path] | None, typer.Option(help="What-if: the same job on another spec or plan.json "
                                                         "(repeat).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Simulated algbw and busbw per message size (nccl-tests' formulas), the cables that set the
    pace, and the job on a non-blocking fabric of the same NICs; what-ifs side by side."""
    wanted = sims.options(collective=collective, algorithm=algorithm, sizes=sizes, routing=routing, seed=seed,
                          connections=connections, plane=plane, nvlink=nvlink, pcie=pcie, pattern=pattern)
    whatif = WhatIf(fail=fail or [], place=place or [], oversubscription=oversubscription or [], spec=spec or [])
    with stderr.status("simulating…", spinner="dots"):
        reports = sims.simulate(source, nodes, wanted, whatif)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in reports], indent=1))
        return
    _print(reports)


def _print(reports: list[SimReport]) -> None:
    first = reports[0]
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, caption=(
        f"{first.collective} ({first.algorithm}) · {first.nodes} nodes x {first.gpus_per_node} GPUs · "
        f"{first.rails} rails · {first.routing} routing · busbw GB/s (nccl-tests)"))
    table.add_column("", no_wrap=True)
    for r in reports:
        table.add_column(cell(r.scenario), justify="right", overflow="fold")
    for i, row in enumerate(first.rows):
        table.add_row(_size(row.bytes), *(f"{r.rows[i].busbw:,.1f}" for r in reports))
    table.add_row("peak (S -> inf)", *(f"{r.peak_busbw:,.1f}" for r in reports))
    table.add_row("vs non-blocking", *(f"{r.vs_nonblocking:.0%}" if r.vs_nonblocking is not None else "-"
                                       for r in reports))
    table.add_row("spine share", *(f"{r.spine_share:.1%}" for r in reports))
    table.add_row("limited by", *(r.limited_by for r in reports))
    table.add_row("bottleneck", *(cell(r.bottlenecks[0].direction) if r.bottlenecks else "-" for r in reports))
    print_table(table)
    for r in reports:
        for note in r.notes:
            stderr.print(f"[yellow]note[/yellow] {shown(r.scenario)}: {shown(note)}", highlight=False)
        if r.disconnected:
            stderr.print(f"[red]{shown(r.scenario)}[/red]: {r.disconnected} transfer(s) have no path", highlight=False)


def _size(size: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)
