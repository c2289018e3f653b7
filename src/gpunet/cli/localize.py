"""`gpunet localize`: from "the job got slow" to the cable to replace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from gpunet.api.fabric import LocalizeReport, LocalizeSource, ProbeSettings
from gpunet.api.fabric import localize as locate
from gpunet.cli.console import cell, print_table, stderr, stdout
from gpunet.cli.errors import EXIT_FINDINGS, handles_errors
from gpunet.cli.options import IbsimOpt, JsonOpt, KeyOpt, LabExecOpt, PlanOpt, UserOpt


@handles_errors
def localize(
    lab: LabExecOpt = None,
    ibsim: IbsimOpt = None,
    ibqueryerrors: Annotated[Path | None, typer.Option("--ibqueryerrors", help="A saved ibqueryerrors output (the "
                                                                                "later sample); needs --plan.")]
    = None,
    prometheus: Annotated[str | None, typer.Option("--prometheus", help="A Prometheus server's URL: switch port "
                                                                       "errors from snmp_exporter's IF-MIB series; "
                                                                       "needs --plan.")] = None,
    switches: Annotated[bool, typer.Option("--switches", help="Switch port counters read from the switches "
                                                               "themselves over SSH at the plan's management "
                                                               "addresses (SONiC's portstat -j, else ip -s -s "
                                                               "-j link); needs --plan, or --lab for a lab's "
                                                               "switches (their sshd, the lab's key).")] = False,
    probe: Annotated[bool, typer.Option("--probe", help="Probe a real fabric: every equal-cost path of its routed "
                                                         "Ethernet/RoCE planes from the plan's nodes over SSH "
                                                         "(--user, --key; python3 on the nodes is enough); needs "
                                                         "--plan.")] = False,
    user: UserOpt = None,
    key: KeyOpt = None,
    switch_label: Annotated[str, typer.Option("--switch-label", help="With --prometheus: the label that names a "
                                                                     "switch (its planned name, management address "
                                                                     "or address:port); series without it are "
                                                                     "named by instance.")] = "instance",
    before: Annotated[Path | None, typer.Option("--before", help="A saved ibqueryerrors output taken earlier: "
                                                                 "counts are what grew since.")] = None,
    window: Annotated[float, typer.Option("--window", min=0, max=86400, help="With --ibsim, --prometheus or "
                                                                              "--switches: "
                                                                              "seconds between two samples (0: one "
                                                                              "sample, totals).")] = 0.0,
    plan: PlanOpt = None,
    planes: Annotated[list[str] | None, typer.Option("--plane", help="Probe this plane (repeat); default: every "
                                                                    "plane with more than one switch tier.")]
    = None,
    flows_per_pair: Annotated[int, typer.Option(min=1, max=256, help="Probe flows (source ports) per node pair.")]
    = ProbeSettings.flows_per_pair,
    packets: Annotated[int, typer.Option(min=10, max=100_000, help="Packets per probe flow.")] = ProbeSettings.packets,
    as_json: JsonOpt = False,
) -> None:
    """Ranked suspect cables, each with its evidence, a confidence and the fix: probing every
    equal-cost path of a lab's routed planes (--lab) or a real fabric's (--probe with --plan),
    InfiniBand port counters (--ibsim, or a saved --ibqueryerrors with --plan), switch port counters
    from Prometheus (--prometheus with --plan) or from the switches over SSH (--switches with --plan,
    or with --lab).
    Exit 1 when one is named, 0 when the fabric looks clean, 2 on bad input, 3 when it cannot judge."""
    source = LocalizeSource(lab=lab, ibsim=ibsim, ibqueryerrors=ibqueryerrors, prometheus=prometheus,
                            switches=switches, probe=probe, switch_label=switch_label, user=user, key=key)
    with stderr.status("localizing…", spinner="dots"):
        report = locate(source, plan=plan, planes=planes, before=before, window=window,
                        settings=ProbeSettings(flows_per_pair=flows_per_pair, packets=packets))
    if as_json:
        print(report.model_dump_json(indent=1))
    else:
        _print(report)
    if report.named:
        raise typer.Exit(EXIT_FINDINGS)


def _print(report: LocalizeReport) -> None:
    if report.planes:
        probed = Table("plane", "flows", "paths learned", "packets", "lost", "cables covered", "hops rate-limited",
                       box=box.SIMPLE_HEAD, title="probes")
        for p in report.planes:
            probed.add_row(p.plane, str(p.flows), str(p.learned), str(p.packets), str(p.lost),
                           f"{p.covered}/{p.cables}", str(p.rate_limited))
        print_table(probed)
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
