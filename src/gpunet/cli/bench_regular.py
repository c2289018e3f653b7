"""`gpunet bench schedule | baseline | check | prune`: regular fabric tests (registered on the bench group by
cli/bench.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from gpunet.api.bench import default_db
from gpunet.api.bench_regular import (
    ScheduleRequest,
    baselines,
    check_baseline,
    next_slice,
    prune,
    schedule,
    set_baseline,
)
from gpunet.cli.console import cell, print_table, stdout
from gpunet.cli.errors import EXIT_FINDINGS, handles_errors
from gpunet.cli.options import DbOpt, JsonOpt, LabExecOpt, PlanOpt, SliceSizeOpt

PeriodOpt = Annotated[str, typer.Option("--period", help="day or week: every rail, leaf pair and leaf–spine group "
                                                         "must be crossed within it.")]
HoursOpt = Annotated[str, typer.Option("--hours", help="Hours of the day the runs start at, comma-separated (1,3).")]


@handles_errors
def schedule_(
    plan: PlanOpt = None,
    lab: LabExecOpt = None,
    plane: Annotated[str, typer.Option(help="Plane to measure.")] = "compute",
    duration: Annotated[int, typer.Option(help="Seconds per measurement.", min=1)] = 3,
    slice_size: SliceSizeOpt = "class",
    hours: HoursOpt = "1",
    period: PeriodOpt = "week",
    partition: Annotated[str | None, typer.Option(
        help="Also render a Slurm job script and its submitter: each slice a job in this partition on the slice's "
             "nodes, started once they are idle (the service then submits it).")] = None,
    time_limit: Annotated[str, typer.Option("--time", help="The Slurm job's time limit.")] = "02:00:00",
    gpunet: Annotated[str, typer.Option("--gpunet", help="The gpunet executable on the admin host.")]
    = "/usr/local/bin/gpunet",
    plan_path: Annotated[str, typer.Option(help="plan.json on the admin host.")] = "/etc/gpunet/plan.json",
    db_path: Annotated[str, typer.Option(help="The bench database on the admin host.")]
    = "/var/lib/gpunet/bench.sqlite",
    install_dir: Annotated[str, typer.Option(help="Where the Slurm scripts go on the admin host.")] = "/etc/gpunet",
    out: Annotated[Path | None, typer.Option("-o", "--out", help="Write the units (systemd/, slurm/) here.")] = None,
    next_: Annotated[bool, typer.Option("--next", help="Print only the rotation's next slice and its nodes "
                                                       "(K/N NODESET), as the Slurm submitter reads it.")] = False,
    slices: Annotated[int | None, typer.Option(help="With --next: the N the units were rendered for.", min=1)]
    = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A systemd timer and service (and with --partition a Slurm job script) that run `bench run` on
    the next slice of the fabric's cover at the hours given, and the coverage report of that
    rotation: which slice runs when, what each crosses, whether every rail, leaf pair, leaf–spine
    group and pair class is crossed within the period. Exit 1 when it is not."""
    request = ScheduleRequest(plane=plane, seconds=duration, slice_size=slice_size, hours=hours, period=period,
                              partition=partition, time_limit=time_limit, gpunet=gpunet, plan_path=plan_path,
                              db_path=db_path, install_dir=install_dir)
    if next_:
        _print_next(request, slices, plan, lab, db or default_db())
        return
    found = schedule(request, plan=plan, lab=lab, out=out)
    if as_json:
        print(json.dumps(found.report | {"files": sorted(found.files), "written": found.written}, indent=1))
    else:
        _print_report(found.report, sorted(found.files), out)
    if not found.report["covered_within_period"]:
        raise typer.Exit(EXIT_FINDINGS)


def _print_next(request: ScheduleRequest, slices: int | None, plan: Path | None, lab: str | None, db: Path) -> None:
    if slices is None:
        raise typer.BadParameter("--next needs --slices N (the number the units were rendered for)")
    index, nodes = next_slice(request, slices, plan=plan, lab=lab, db=db)
    print(f"{index} {nodes}")


def _print_report(report: dict[str, Any], files: list[str], out: Path | None) -> None:
    table = Table("slice", "when", "pairs", "rounds", "~min", "classes", "rails", "new leaf pairs", "new groups",
                  box=box.SIMPLE_HEAD)
    for row in report["rotation"]:
        classes = row["classes"]
        table.add_row(row["slice"], cell(row["when"] or "next period"), str(row["pairs"]), str(row["rounds"]),
                      f"{row['estimated_seconds'] / 60:.1f}",
                      cell(classes[0] if len(classes) == 1 else f"{len(classes)} classes"),
                      cell(",".join(map(str, row["rails"]))), str(row["new"]["leaf_pairs"]),
                      str(row["new"]["leaf_spine_groups"]))
    print_table(table)
    whole = report["whole"]
    verdict = "within" if report["covered_within_period"] else "NOT within"
    stdout.print(cell(f"{report['slices']} slices of {report['slice_size']}, {report['runs_per_period']} runs a "
                      f"{report['period']}: the whole cover ({whole['rails']} rails, {whole['leaf_pairs']} leaf pairs, "
                      f"{whole['leaf_spine_groups']} leaf–spine groups, {whole['pair_classes']} pair classes) is "
                      f"crossed in {report['runs_to_cover']} runs, {verdict} a {report['period']}"), soft_wrap=True)
    where = f"written under {out}" if out else "not written (-o DIR writes them)"
    stdout.print(cell(f"units: {', '.join(files)}, {where}"), soft_wrap=True)


VERDICT_COLOURS = {"fail": "red", "missing": "red", "warn": "yellow", "inconclusive": "blue", "new": "cyan",
                   "ok": "green"}


@handles_errors
def baseline_(
    runs: Annotated[list[int] | None, typer.Argument(
        help="Run id(s): the median of their class medians becomes each class's baseline (none: show the stored "
             "baselines).", show_default=False)] = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Mark a run, or the median of several, as the baseline of each pair class (plane, path
    class, rail) they judged, pairs with a saturated end left out (other classes keep theirs);
    without runs, the stored baselines. `bench check` judges the latest results against them."""
    path = db or default_db()
    found = set_baseline(path, runs) if runs else baselines(path)
    _print_baselines([b.model_dump() for b in found], as_json)


def _print_baselines(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table("plane", "path", "rail", "metric", "baseline Gb/s", "% of expected", "runs", "set",
                  box=box.SIMPLE_HEAD)
    for b in rows:
        table.add_row(cell(b["plane"]), cell(b["path"] or "-"), "-" if b["rail"] < 0 else str(b["rail"]),
                      cell(b["metric"]), f"{b['value']:.2f}", "" if b["percent"] is None else f"{b['percent']:.0f}",
                      cell(b["runs"]), cell(b["set_at"]))
    print_table(table)


@handles_errors
def check_(
    db: DbOpt = None,
    rules: Annotated[Path | None, typer.Option("--rules", help="YAML rules, as bench compare reads them (default: "
                                                               "warn 5 % below the baseline, fail 10 % below).")]
    = None,
    as_json: JsonOpt = False,
) -> None:
    """The latest result of each pair class against its baseline (`bench baseline`); exit 1 on a
    fail (a regression, or a pair of the latest run flagged) or a baseline class no run measured."""
    verdicts = check_baseline(db or default_db(), rules)
    if as_json:
        print(json.dumps([v.model_dump() for v in verdicts], indent=1))
    else:
        table = Table("class", "baseline", "current", "variance", "verdict", "run", box=box.SIMPLE_HEAD)
        for v in verdicts:
            colour = VERDICT_COLOURS.get(v.verdict, "red")
            table.add_row(cell(v.label), _gbps(v.baseline), _gbps(v.current),
                          "" if v.variance is None else f"{100 * v.variance:+.1f} %",
                          f"[{colour}]{v.verdict}[/{colour}]", "" if v.run_id is None else str(v.run_id))
        print_table(table)
    if any(v.verdict in ("fail", "missing") for v in verdicts):
        raise typer.Exit(EXIT_FINDINGS)


def _gbps(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


@handles_errors
def prune_(
    keep_days: Annotated[int, typer.Option("--keep-days", help="Keep raw outputs of the runs of this many days.",
                                           min=0)] = 14,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Empty the raw tool outputs (and each end's health and counter detail) of runs older than
    --keep-days, then compact the file: values, statuses, reasons and each run's aggregates per
    pair class, rail and leaf–spine group are kept."""
    path = db or default_db()
    runs, rows = prune(path, keep_days)
    if as_json:
        print(json.dumps({"db": str(path), "runs": runs, "rows": rows, "bytes": path.stat().st_size}))
        return
    stdout.print(cell(f"{rows} raw outputs of {runs} runs older than {keep_days} days emptied; {path} is now "
                      f"{path.stat().st_size / 1e6:.1f} MB"), soft_wrap=True)
