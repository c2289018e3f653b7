"""`gpunet localize`: from "the job got slow" to the cable to replace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from gpunet import api
from gpunet.cli.console import cell, print_table, stderr, stdout
from gpunet.cli.errors import EXIT_CHECKS_FAILED, handles_errors
from gpunet.errors import ParseError, UsageError
from gpunet.fabric.counters import parse_ibqueryerrors
from gpunet.inputs import read_text
from gpunet.localize.probing import ProbeSettings
from gpunet.localize.report import LocalizeReport
from gpunet.localize.run import localize_counters, localize_ibsim, localize_lab, localize_prometheus

MAX_FILE_BYTES = 64 * 2**20


@handles_errors
def localize(
    lab: Annotated[str | None, typer.Option("--lab", help="Probe every equal-cost path of this lab's routed "
                                                          "planes.")] = None,
    ibsim: Annotated[str | None, typer.Option("--ibsim", help="InfiniBand port counters (ibqueryerrors) of this "
                                                              "simulated fabric.")] = None,
    ibqueryerrors: Annotated[Path | None, typer.Option("--ibqueryerrors", help="A saved ibqueryerrors output (the "
                                                                                "later sample); needs --plan.")]
    = None,
    prometheus: Annotated[str | None, typer.Option("--prometheus", help="A Prometheus server's URL: switch port "
                                                                       "errors from snmp_exporter's IF-MIB series; "
                                                                       "needs --plan.")] = None,
    before: Annotated[Path | None, typer.Option("--before", help="A saved ibqueryerrors output taken earlier: "
                                                                 "counts are what grew since.")] = None,
    window: Annotated[float, typer.Option("--window", min=0, max=86400, help="With --ibsim or --prometheus: "
                                                                              "seconds between two samples (0: one "
                                                                              "sample, totals).")] = 0.0,
    plan: Annotated[Path | None, typer.Option("--plan", help="plan.json or spec the ports are named from.")] = None,
    planes: Annotated[list[str] | None, typer.Option("--plane", help="Probe this plane (repeat); default: every "
                                                                    "plane with more than one switch tier.")]
    = None,
    flows_per_pair: Annotated[int, typer.Option(min=1, max=256, help="Probe flows (source ports) per node pair.")]
    = ProbeSettings.flows_per_pair,
    packets: Annotated[int, typer.Option(min=10, max=100_000, help="Packets per probe flow.")] = ProbeSettings.packets,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Ranked suspect cables, each with its evidence, a confidence and the fix. Exit 1 when one
    is named, 0 when the fabric looks clean, 2 on bad input."""
    given = [name for name, value in (("--lab", lab), ("--ibsim", ibsim), ("--ibqueryerrors", ibqueryerrors),
                                      ("--prometheus", prometheus)) if value is not None]
    if len(given) != 1:
        raise UsageError("give exactly one of --lab, --ibsim, --ibqueryerrors, --prometheus (got "
                         f"{', '.join(given) or 'none'})")
    if (ibqueryerrors or prometheus) and plan is None:
        raise UsageError(f"{given[0]} needs --plan: the plan.json (or spec) the ports are named from")
    with stderr.status("localizing…", spinner="dots"):
        if lab is not None:
            report = localize_lab(lab, planes or [], ProbeSettings(flows_per_pair=flows_per_pair, packets=packets))
        elif ibsim is not None:
            _check(before)
            report = localize_ibsim(ibsim, _read(before) if before else None, window)
        elif prometheus is not None and plan is not None:
            report = _from_prometheus(plan, prometheus, window)
        else:
            assert ibqueryerrors is not None and plan is not None
            _check(ibqueryerrors, before)
            report = localize_counters(api.load_plan(plan), _read(ibqueryerrors), _read(before) if before else None)
    if as_json:
        print(report.model_dump_json(indent=1))
    else:
        _print(report)
    if report.named:
        raise typer.Exit(EXIT_CHECKS_FAILED)


def _from_prometheus(plan: Path, url: str, window: float) -> LocalizeReport:
    try:
        return localize_prometheus(api.load_plan(plan), url, window)
    except ParseError as exc:
        raise UsageError(f"--prometheus {url}: {exc}") from None


def _check(*paths: Path | None) -> None:
    """A saved output that does not parse is bad input, named by file and line."""
    for path in paths:
        if path is not None:
            try:
                parse_ibqueryerrors(_read(path))
            except ParseError as exc:
                raise UsageError(f"{path}: line {exc.line}: {str(exc).split(': ', 2)[-1]}") from None


def _read(path: Path) -> str:
    return read_text(path, MAX_FILE_BYTES, "saved ibqueryerrors output")


def _print(report: LocalizeReport) -> None:
    if report.planes:
        probed = Table("plane", "flows", "paths learned", "packets", "lost", "cables covered", box=box.SIMPLE_HEAD,
                       title="probes")
        for p in report.planes:
            probed.add_row(p.plane, str(p.flows), str(p.learned), str(p.packets), str(p.lost),
                           f"{p.covered}/{p.cables}")
        stdout.print(probed)
    if report.suspects:
        table = Table(box=box.SIMPLE_HEAD, title="suspects, most likely first")
        table.add_column("#", no_wrap=True)
        for name in ("cable", "confidence", "evidence", "fix"):
            table.add_column(name, overflow="fold")
        for rank, s in enumerate(report.suspects, 1):
            mark = f"[red]{rank}[/red]" if s.named else f"[dim]{rank}?[/dim]"
            table.add_row(mark, cell(s.cable.replace(" ", " <-> ")), f"{s.confidence:.0%} ({s.source})",
                          cell("\n".join(s.evidence)), cell(s.fix))
        print_table(table)
    else:
        stdout.print("[green]no suspect: no cable explains any loss or error[/green]")
    for note in report.notes:
        stderr.print(cell(f"note: {note}"))
    stderr.print(f"took {report.seconds:.1f} s")
