"""`gpunet fleet install`: this gpunet on the nodes, from wheels only (no index, here or there)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpunet.api import fleet
from gpunet.api.fleet import DEFAULT_PREFIX, WHEELHOUSE, InstallResult
from gpunet.cli.console import cell, shown, stderr, stdout
from gpunet.cli.errors import handles_errors, outcome_code
from gpunet.cli.options import ConnectTimeoutOpt, FanoutOpt, JsonOpt, KeyOpt, LabSshOpt, NodesArg, PlanOpt, UserOpt

PrefixOpt = Annotated[str, typer.Option(
    "--prefix", help="Where gpunet lives on the nodes: PREFIX/venv and the wheels it came from, PREFIX/wheels "
                     "(in a lab, under each server's own tree).")]


@handles_errors
def install(
    nodes: NodesArg,
    wheelhouse: Annotated[Path, typer.Option(
        "--wheelhouse", metavar="DIR", help="The dependencies' wheels (and gpunet's, if it does not run from its "
                                            "source tree), fetched on a machine with the internet.")] = WHEELHOUSE,
    prefix: PrefixOpt = DEFAULT_PREFIX,
    lab: LabSshOpt = None, plan: PlanOpt = None, user: UserOpt = None, key: KeyOpt = None,
    fanout: FanoutOpt = 64, connect_timeout: ConnectTimeoutOpt = 10,
    timeout: Annotated[float, typer.Option(help="Seconds per node and step.")] = 600,
    as_json: JsonOpt = False,
) -> None:
    """Install this gpunet into a venv on NODES, from wheels only, for `doctor NODES` and apply.

    gpunet's wheel is built here from its source tree (or taken from the wheelhouse), its
    dependencies' wheels come from --wheelhouse; they are copied to each node, which makes
    PREFIX/venv with its own `python3 -m venv` and installs with `pip --no-index`. Exit 3 when a
    wheel is missing (each named, with the command that fetches it) or a node could not install."""
    wanted, reached = fleet.reach(nodes, lab=lab, plan=plan, user=user, key=key, fanout=fanout,
                                  connect_timeout=connect_timeout, timeout=timeout)
    with stderr.status(f"installing gpunet on {wanted}…", spinner="dots"):
        result = fleet.install(reached, wanted, wheelhouse=wheelhouse, prefix=prefix, timeout=timeout)
    _print(result, as_json)
    raise typer.Exit(outcome_code(findings=False, unjudged=bool(result.failed)))


def _print(result: InstallResult, as_json: bool) -> None:
    if as_json:
        print(result.model_dump_json(indent=1))
        return
    ok = len(result.outcomes) - len(result.failed)
    stdout.print(cell(f"gpunet {result.version} under {result.prefix} ({len(result.wheels)} wheels): "
                      f"{ok}/{len(result.outcomes)} node(s) ok in {result.seconds:.1f} s"), soft_wrap=True)
    for nodes, outcome in result.groups():
        text = f"ok: {outcome.python.replace(f'/{outcome.node}/', '/<node>/')}" if outcome.ok else \
            f"failed: {outcome.error}"
        stdout.print(f"[{'green' if outcome.ok else 'red'}]{shown(nodes)}[/]", cell(text), soft_wrap=True)
