"""`gpunet compare`: designs side by side, and the design-decision lines of `gpunet plan`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpunet.api.compare import (
    Comparison,
    Costing,
    bom_units,
    compare_designs,
    example_catalog_text,
    failures,
    headroom,
    money,
    per_gpu,
    power,
    reference_job,
    render_markdown,
)
from gpunet.cli.console import cell, print_table, shown, stderr, stdout
from gpunet.cli.errors import handles_errors
from gpunet.cli.options import JsonOpt
from gpunet.model.plan import Plan

CatalogOption = Annotated[Path | None, typer.Option(
    "--catalog", help="Parts catalog (YAML): part numbers, prices and watts; 'example' for the shipped one of "
                      "placeholder numbers.", show_default=False)]


def _example_catalog(value: bool) -> None:
    if value:
        print(example_catalog_text(), end="")
        raise typer.Exit()


@handles_errors
def compare(
    designs: Annotated[list[Path], typer.Argument(help="Two or more specs (YAML) or plan.json files.",
                                                  show_default=False)],
    catalog: CatalogOption = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print a Markdown table for a design review.")] = False,
    example_catalog: Annotated[bool, typer.Option(
        "--example-catalog", callback=_example_catalog, is_eager=True,
        help="Print the shipped catalog (placeholder numbers, not prices) to start one from, and exit.")] = False,
    reference_collective: Annotated[str, typer.Option(help="The reference job whose simulated busbw each design "
                                                           "shows (as gpunet sim).")] = "all_reduce",
    reference_size: Annotated[str, typer.Option(help="The reference job's message size.")] = "8G",
    reference_nodes: Annotated[int, typer.Option(min=2, max=100_000, help="The reference job's nodes: the "
                                                                          "plane's first GPU nodes by name.")] = 256,
    no_reference: Annotated[bool, typer.Option("--no-reference", help="Leave the reference job out.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Designs side by side per plane: what they are built of, cost and draw, carry, how far they grow
    and what one failure takes away; the rows that differ highlighted."""
    del example_catalog
    job = None if no_reference else reference_job(reference_collective, reference_size, reference_nodes)
    with stderr.status("designing, simulating and comparing…" if job else "designing and comparing…",
                       spinner="dots"):
        result = compare_designs(designs, catalog, job)
    if as_json:
        print(json.dumps(result.model_dump(mode="json"), indent=1))
    elif markdown:
        print(render_markdown(result), end="")
    else:
        _print(result)


def _print(result: Comparison) -> None:
    notes = ["highlighted: differs between the designs"]
    if result.placeholder:
        notes.append("costs and power from placeholder numbers, not prices")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, caption=" · ".join(notes))
    table.add_column("", no_wrap=True)
    for design in result.designs:
        table.add_column(cell(design.name), overflow="fold")
    section = ""
    for row in result.rows:
        if row.section != section:
            section = row.section
            table.add_row(Text(section, style="bold"), end_section=False)
        style = "bold yellow" if row.differs else ""
        table.add_row(Text(f"  {row.metric}", style=style), *(Text(v, style=style) for v in row.values))
    print_table(table)


def print_decisions(plan: Plan, costing: Costing | None) -> None:
    """`gpunet plan`'s lines below the capacity table: the bill of materials in brief, growth
    headroom, what one failure costs per plane, and with a catalog the cost and power."""
    units = bom_units(plan)
    stdout.print(f"bill of materials (bom.csv): {units['switch']:,} switches · {units['nic']:,} NICs · "
                 f"{units['cable']:,} cables and fibers · {units['transceiver']:,} transceivers")
    stdout.print("growth headroom (nodes before a cable moves): " + ", ".join(
        f"{plane} {'unknown' if n is None else f'{n:,}'}" for plane, n in headroom(plan).items()))
    table = Table(caption="one element lost, the worst of its kind · pairs: node pairs losing paths (left "
                          "with none)", box=box.SIMPLE_HEAD, pad_edge=False)
    for title in ("plane", "lost", "worst"):
        table.add_column(title, no_wrap=title != "worst", overflow="fold")
    for title in ("cut off", "bisection", "rail", "pairs"):
        table.add_column(title, justify="right", no_wrap=True)
    for plane_failures in failures(plan):
        for i in plane_failures.impacts:
            rail = "-" if i.rail_lost_pct is None else f"−{i.rail_lost_pct:.3g}%"
            table.add_row(plane_failures.plane, i.element, cell(i.name), f"{i.nodes_cut_off:,}",
                          f"−{i.bisection_lost_pct:.3g}%", rail, f"{i.pairs_losing_paths:,} ({i.pairs_disconnected:,})")
    print_table(table)
    if costing is not None:
        _print_cost(costing)


def _print_cost(costing: Costing) -> None:
    label = f"{costing.currency}{', placeholder numbers, not prices' if costing.placeholder else ''}"
    stdout.print(f"cost ({label}): {money(costing.total)} · per GPU {per_gpu(costing.total, costing.gpus)} · "
                 f"power {power(costing.total)}")
    for plane, totals in costing.planes.items():
        stdout.print(f"  {shown(plane)}: {money(totals)} · {power(totals)}")
    for line in costing.unpriced:
        stderr.print(f"[yellow]unpriced[/yellow] {line.item} {escape(line.model)} x{line.count} ({line.plane}): "
                     "not in the catalog", highlight=False)
