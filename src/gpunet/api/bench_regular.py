"""`gpunet bench schedule | baseline | prune`: regular fabric tests. A rotation of slices of the
fabric's cover run by a systemd timer (or as Slurm jobs), the coverage it reaches within a period,
baselines per pair class to judge regressions by, and a database that stays bounded."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpunet.bench import Fabric, bench_nodes
from gpunet.bench.aggregate import Aggregate, aggregate
from gpunet.bench.baseline import ClassVerdict, baselines_from, judge
from gpunet.bench.compare import load_rules
from gpunet.bench.history import (
    Baseline,
    latest,
    run_aggregates,
    runs_without_aggregates,
    save_aggregates,
    save_baselines,
)
from gpunet.bench.history import baselines as stored_baselines
from gpunet.bench.history import prune as prune_raw
from gpunet.bench.slices import (
    Cover,
    SliceChoice,
    SliceSize,
    check_count,
    cover,
    coverage_report,
    parse_hours,
)
from gpunet.bench.store import last_slice, load_run
from gpunet.errors import UsageError
from gpunet.files.write import write_files
from gpunet.model.nodeset import fold
from gpunet.model.plan import Plan
from gpunet.reach import Reach
from gpunet.render.bench_schedule import ScheduleUnits, render_schedule
from gpunet.spec.plan import plan_of

__all__ = ["PERIODS", "Baseline", "ClassVerdict", "Schedule", "ScheduleRequest", "baselines", "check_baseline",
           "next_slice", "prune", "schedule", "set_baseline"]

PERIODS = ("day", "week")


@dataclass(frozen=True)
class ScheduleRequest:
    """The rotation asked for, and where the units find things on the admin host."""

    plane: str = "compute"
    seconds: int = 3
    slice_size: str = "class"
    hours: str = "1"
    period: str = "week"
    partition: str | None = None
    time_limit: str = "02:00:00"
    gpunet: str = "/usr/local/bin/gpunet"
    plan_path: str = "/etc/gpunet/plan.json"
    db_path: str = "/var/lib/gpunet/bench.sqlite"
    install_dir: str = "/etc/gpunet"


@dataclass(frozen=True)
class Schedule:
    files: dict[str, str]  # relative path -> text
    report: dict[str, object]  # coverage_report
    written: list[str]  # the files that changed under out (none without out)


def _plan(plan: Path | None, lab: str | None) -> Plan:
    return (Reach.of_lab(lab).plan() if lab is not None else None) or plan_of(plan)


def _cover(plan: Plan, plane: str, seconds: int, size: str) -> Cover:
    if seconds < 1:
        raise UsageError("--duration: at least 1 second")
    if plane not in {p.name for p in plan.planes}:
        raise UsageError(f"no plane {plane[:20]!r} in the plan; it has {', '.join(p.name for p in plan.planes)}")
    return cover(Fabric.of(plan, plane), plane, bench_nodes(plan, plane, None), SliceSize.parse(size), seconds)


def schedule(request: ScheduleRequest, *, plan: Path | None, lab: str | None, out: Path | None) -> Schedule:
    """The units (written under `out` when given) and the coverage report of their rotation."""
    if request.period not in PERIODS:
        raise UsageError(f"--period {request.period[:20]!r}: one of {', '.join(PERIODS)}")
    loaded = _plan(plan, lab)
    hours = parse_hours(request.hours)
    found = _cover(loaded, request.plane, request.seconds, request.slice_size)
    report = coverage_report(found, hours, request.period)
    units = ScheduleUnits(gpunet=request.gpunet, plan=request.plan_path, db=request.db_path, plane=request.plane,
                          seconds=request.seconds, slice_size=found.size.text, slices=len(found.slices),
                          hours=tuple(hours), period=request.period, longest_s=max(s.seconds for s in found.slices),
                          site=loaded.site.name, partition=request.partition, time_limit=request.time_limit,
                          install_dir=request.install_dir, lab=lab)
    files = render_schedule(units)
    written = write_files(out, files, lambda name: 0o755 if name.endswith(".sh") else 0o644) if out else []
    return Schedule(files, report, written)


def next_slice(request: ScheduleRequest, slices: int, *, plan: Path | None, lab: str | None,
               db: Path) -> tuple[str, str]:
    """The rotation's next slice (`K/N`) and its nodes folded (the Slurm submitter's --nodelist)."""
    found = _cover(_plan(plan, lab), request.plane, request.seconds, request.slice_size)
    choice = SliceChoice(None, slices)
    check_count(found, choice)
    index = choice.resolve(last_slice(db, request.plane, slices, found.size.text))
    nodes = sorted({n for p in found.slices[index - 1].pairs for n in p[:2]})
    return f"{index}/{slices}", fold(nodes)


def _aggregated(db: Path, run_ids: list[int]) -> list[tuple[int, Aggregate]]:
    """The runs' aggregates, made now from their measurements for a run that has none (a run from
    before aggregates, or one interrupted before its end): classes and rails, no groups without a Plan."""
    missing = set(runs_without_aggregates(db)) & set(run_ids)
    for run_id in sorted(missing):
        save_aggregates(db, run_id, aggregate(load_run(db, run_id)[1]))
    return run_aggregates(db, run_ids)


def set_baseline(db: Path, run_ids: list[int]) -> list[Baseline]:
    """Each pair class's baseline from these runs (the median of their class medians); classes the
    runs did not judge keep the baseline they had."""
    if not run_ids:
        raise UsageError("give the run(s) to set the baseline from (`gpunet bench history` lists them)")
    for run_id in run_ids:
        load_run(db, run_id)  # an unknown run is bad input, said by id
    found = baselines_from(_aggregated(db, run_ids))
    if not found:
        raise UsageError(f"run(s) {', '.join(map(str, run_ids))} judged no pair (every one inconclusive or none "
                         "measured): no baseline to set")
    save_baselines(db, found)
    return found


def check_baseline(db: Path, rules: Path | None = None) -> list[ClassVerdict]:
    """The latest result of every pair class against its baseline."""
    newest, _ = latest(db)
    return judge(newest, stored_baselines(db), load_rules(rules))


def baselines(db: Path) -> list[Baseline]:
    return stored_baselines(db)


def prune(db: Path, keep_days: int) -> tuple[int, int]:
    """Raw outputs of runs older than keep_days emptied, every run aggregated first."""
    if keep_days < 0:
        raise UsageError("--keep-days: 0 or more")
    if not db.exists():
        raise UsageError(f"no bench database at {db}")
    _aggregated(db, runs_without_aggregates(db))
    return prune_raw(db, keep_days)
