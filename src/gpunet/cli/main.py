"""gpunet command line: parse, call one library function, print (Rich or --json)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import typer.main
from rich import box
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from typer import _click as click
from typer._click.exceptions import UsageError as ClickUsageError
from typer.core import TyperCommand, TyperGroup

from gpunet import __version__
from gpunet.cli.commands import LAZY
from gpunet.cli.console import cell, print_table, shown, stderr, stdout
from gpunet.cli.errors import EXIT_BAD_INPUT, error_body, handles_errors
from gpunet.cli.options import JsonOpt, OutOpt, RenderTargetsOpt, chosen_targets, modernize

if TYPE_CHECKING:  # the models' classes cost a tenth of a second to build: `--help` needs none of them
    from gpunet.errors import SpecProblem
    from gpunet.model.flows import Flow
    from gpunet.model.plan import Plan

LISTING = "gpunet_listing"  # ctx.meta: `gpunet --help` is listing the commands, not running one


ORDER = ("validate", "plan", "compare", "sim", "place", "render", "flows", "examples", "init", "lab", "ibsim", "fleet",
         "apply", "doctor", "probe", "switch", "bench", "cabling", "localize", "report", "exporter")


class LazyGroup(TyperGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        """The mission's order: design, emulate, check, measure, find, watch."""
        known = {*super().list_commands(ctx), *LAZY}
        return [n for n in ORDER if n in known] + sorted(known - set(ORDER))

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing of the commands takes each one's summary from LAZY, not from its module."""
        ctx.meta[LISTING] = True
        try:
            super().format_help(ctx, formatter)
        finally:
            del ctx.meta[LISTING]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in LAZY:
            return super().get_command(ctx, cmd_name)
        if ctx is not None and ctx.meta.get(LISTING):  # None: a caller walking the tree outside a run
            return TyperCommand(cmd_name, help=LAZY[cmd_name].summary)
        target = getattr(importlib.import_module(LAZY[cmd_name].module), LAZY[cmd_name].attribute)
        if isinstance(target, typer.Typer):
            command: click.Command = typer.main.get_group(target)
        else:
            single = typer.Typer(add_completion=False)
            single.command(name=cmd_name)(target)
            command = typer.main.get_command(single)
        command.name = cmd_name
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Old option spellings replaced (said on stderr), and whether the command wants JSON."""
        args = modernize(args)
        ctx.meta["gpunet_json"] = "--json" in args[:args.index("--")] if "--" in args else "--json" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> object:
        """A usage error (unknown option, bad value, missing argument) under --json is one JSON
        body too, with exit 2, as every other error of bad input."""
        try:
            return super().invoke(ctx)
        except ClickUsageError as exc:
            if not ctx.meta.get("gpunet_json"):
                raise
            print(error_body("UsageError", EXIT_BAD_INPUT, [{"message": exc.format_message()}]))
            raise typer.Exit(EXIT_BAD_INPUT) from None


app = typer.Typer(
    name="gpunet", no_args_is_help=True, add_completion=False, cls=LazyGroup,
    help="Design, render, emulate, check, benchmark and monitor a GPU cluster's network.",
)
SpecArg = Annotated[Path, typer.Argument(help="Cluster spec (YAML).", show_default=False)]


def _version(value: bool) -> None:
    if value:
        print(__version__)
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True)] = False,
) -> None:
    """gpunet: one Plan for the whole cluster network, every feature a view of it."""


@app.command()
@handles_errors
def validate(spec: SpecArg, as_json: JsonOpt = False) -> None:
    """Check a spec: exit 0, or exit 2 with file:line:col: message (hint) per problem."""
    from gpunet.api import specs  # not plans: the renderers and the catalog are not needed to validate

    plan, warnings = specs.validate_spec(spec)
    if as_json:
        print(json.dumps({"valid": True, "file": str(spec), "nodes": len(plan.nodes),
                          "warnings": [str(w) for w in warnings]}))
        return
    _warn(warnings)
    stdout.print(f"[green]ok[/green] {shown(spec)}: {len(plan.nodes)} nodes, {len(plan.planes)} planes")


def _warn(warnings: list[SpecProblem]) -> None:
    for warning in warnings:
        stderr.print(f"[yellow]warning[/yellow] {escape(str(warning))}", highlight=False)


@app.command()
@handles_errors
def plan(
    spec: Annotated[Path | None, typer.Argument(
        help="Cluster spec (YAML); the built-in scalable-unit example when omitted.")] = None,
    out: OutOpt = Path("gpunet-out"),
    fresh: Annotated[bool, typer.Option(
        "--fresh", help="Ignore OUT/plan.json: assign addresses, slots and ports from scratch (also to replace "
                        "another site's plan, or drop nodes; the old plan is kept as plan.json.1).")] = False,
    catalog: Annotated[Path | None, typer.Option(
        "--catalog", help="Parts catalog (YAML): price the bill of materials (bom.csv, summary.md) and total its "
                          "cost and power; 'example' for the shipped one of placeholder numbers.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Design the fabric, addresses, cabling and bill of materials; write them to OUT."""
    from gpunet.api import plans

    parts = plans.load_catalog(catalog) if catalog is not None else None  # a bad catalog exits 2 first
    with stderr.status("designing the plan…", spinner="dots"):
        result, changed, warnings, costing = plans.plan_into(spec, out, fresh=fresh, catalog=parts)
    if as_json:
        print(json.dumps(plans.summary(result, costing) | {"out": str(out), "changed": changed,
                                                     "warnings": [str(w) for w in warnings]}, indent=1))
        return
    from gpunet.cli.compare import print_decisions  # brings the simulator (numpy): only for this table

    _warn(warnings)
    _print_plan(result)
    print_decisions(result, costing)
    stdout.print(f"wrote {len(changed)} changed file(s) to {shown(out)}/: {shown(', '.join(changed) or 'none')}")


def _print_plan(result: Plan) -> None:
    gpus = sum(n.gpus for n in result.nodes)  # not summary(): it also runs the failure analysis
    stdout.print(f"[bold]{shown(result.site.name)}[/bold]: {len(result.nodes)} nodes, {gpus} GPUs, "
                 f"{len(result.switches)} switches, {len(result.links)} cables")
    table = Table(caption="switches: leaf/spine/core · oversub: leaf/spine, down:up · bisection: Gb/s",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for title in ("plane", "style"):
        table.add_column(title, no_wrap=True)
    for title in ("NICs", "switches", "oversub", "bisection", "hops"):
        table.add_column(title, justify="right", no_wrap=True)
    for c in result.capacity:
        ratios = "/".join(f"{r:g}:1" for r in c.oversubscription.values()) or "-"
        table.add_row(c.plane, c.style, str(c.endpoints), f"{c.leaves}/{c.spines}/{c.cores}",
                      ratios, f"{c.bisection_gbps:,.0f}", str(c.max_hops))
    print_table(table)


@app.command()
@handles_errors
def render(
    source: Annotated[Path | None, typer.Argument(
        help="plan.json or spec YAML; the built-in example when omitted.")] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Output directory (beside gpunet-out/, which `gpunet "
                                                         "plan` keeps to its own files).")] = Path("gpunet-render"),
    node: Annotated[str | None, typer.Option("--node", help="Only these nodes (NodeSet: gpu[001-004]).")] = None,
    target: RenderTargetsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Render every node's configuration: OUT/nodes/<node>/etc/..., OUT/admin/{ssh_config,ansible,slurm}."""
    from gpunet.api import plans

    plans.refuse_non_directory(out)  # before designing the built-in example or reading a plan
    plan_ = plans.load_plan(source)
    targets = chosen_targets(target, plans.TARGETS) or None
    with stderr.status("rendering…", spinner="dots"):
        files, changed = plans.render_plan(plan_, out, node, targets)
    if as_json:
        print(json.dumps({"out": str(out), "files": len(files), "changed": changed}, indent=1))
        return
    nodes = {p.split("/")[1] for p in files if p.startswith("nodes/")}
    stdout.print(f"rendered {len(files)} file(s) for {len(nodes)} node(s) into {shown(out)}/; {len(changed)} changed")
    for path in changed[:20]:
        stdout.print(f"  {shown(path)}")
    if len(changed) > 20:
        stdout.print(f"  ... and {len(changed) - 20} more (--json lists them all)")


@app.command()
@handles_errors
def flows(
    source: Annotated[Path | None, typer.Argument(
        help="plan.json or spec YAML; the built-in example when omitted.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The traffic the cluster needs: every flow the firewalls admit, Slurm and NCCL use, doctor checks."""
    from gpunet.api import specs

    found = specs.flows(source)
    if as_json:
        print(json.dumps([f.model_dump(mode="json") for f in found], indent=1))
        return
    wide = stdout.width >= 150  # the reasons wrap into unreadable slivers on a narrow terminal
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False,
                  caption=None if wide else "reasons: a terminal of 150 columns, or --json")
    for name in ("service", "protocol/ports", "plane"):
        table.add_column(name, no_wrap=True)
    for name in ("from", "to"):  # room for a /32; fold, never an ellipsis: a cut address is a wrong one
        table.add_column(name, overflow="fold", min_width=15)
    if wide:
        table.add_column("why")
    for flow in found:
        row: list[str | Text] = [flow.service, f"{flow.protocol}{'/' + flow.ports if flow.ports else ''}", flow.plane,
               cell(_sources(flow)), cell("\n".join([*_terms(flow.to_nodes), *flow.to_hosts]))]
        table.add_row(*row, *[cell(flow.why)] * wide)
    print_table(table)


def _terms(nodes: str) -> list[str]:
    """A folded NodeSet a pattern a line: a table wraps between patterns, never inside one."""
    from gpunet.model.nodeset import spaced  # ClusterShell's NodeSet: only `flows` prints one

    return spaced(nodes).split(", ") if nodes else []


def _sources(flow: Flow) -> str:
    if flow.from_anywhere:
        return "anywhere"
    return "\n".join([*_terms(flow.from_nodes), *flow.from_subnets])


@app.command()
def examples(as_json: JsonOpt = False) -> None:
    """List the built-in example specs."""
    from gpunet.api import specs

    if as_json:
        print(json.dumps(specs.ALL_EXAMPLES, indent=1))
        return
    table = Table("name", "what it is")
    for name, text in specs.ALL_EXAMPLES.items():
        table.add_row(name, text)
    print_table(table)


@app.command()
@handles_errors
def init(
    example: Annotated[str, typer.Option("--example", "-e", help="Example name (see `gpunet examples`).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="File to write.")] = Path("cluster.yaml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a built-in example spec to start from."""
    from gpunet.api import specs

    specs.init_example(example, out, force=force)
    if as_json:
        print(json.dumps({"wrote": str(out), "example": example}))
        return
    stdout.print(f"wrote {shown(out)} (example {shown(example)})")
