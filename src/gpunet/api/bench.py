"""`gpunet bench`: iperf3, perftest and nccl-tests measured against what the Plan says each path
carries, stored in SQLite, compared with a baseline, drawn as a heat map."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gpunet.bench import PATTERNS, Fabric, Selection, bench_nodes, pattern_rounds
from gpunet.bench.aggregate import aggregate
from gpunet.bench.compare import FAILING, Comparison, compare_runs
from gpunet.bench.heatmap import cells_of, percent_matrix, write_png
from gpunet.bench.history import save_aggregates, set_expected
from gpunet.bench.launch import TOOLS, NcclJob, pick_launcher
from gpunet.bench.run import BenchSetup, run_nccl, run_rounds
from gpunet.bench.schedule import Round
from gpunet.bench.slices import (
    CLASS,
    Cover,
    SliceChoice,
    SliceSize,
    check_count,
    cover,
    expected_keys,
    measurement_groups,
)
from gpunet.bench.store import (
    CellColumns,
    Measurement,
    RunInfo,
    RunSummary,
    add_measurements,
    default_db,
    history,
    last_slice,
    load_cells,
    load_run,
    run_info,
    start_run,
    worst,
)
from gpunet.errors import CommandError, UsageError
from gpunet.fleet.detach import DetachedRun
from gpunet.fleet.runs import detach_here
from gpunet.model.io import plan_digest
from gpunet.model.plan import Plan
from gpunet.model.tuning import tcp_congestion
from gpunet.reach import Reach
from gpunet.spec.plan import plan_of

__all__ = ["FAILING", "PATTERNS", "TOOLS", "BenchOutcome", "BenchRun", "CellColumns", "Comparison", "Measurement",
           "Progress", "RunInfo", "RunSummary", "cells_of", "compare", "compare_runs", "congestion_for", "default_db",
           "detach", "heat_map", "history", "load_cells", "load_run", "percent_matrix", "run", "run_info", "worst"]

Progress = Callable[[int, int, str], None]  # rounds done, rounds in all, what is being measured
PLAN_CONGESTION, SYSTEM_CONGESTION = "plan", "system"  # --congestion: the plane's choice; the hosts' default
CONGESTION_NAME = re.compile(r"[a-z][a-z0-9_]{0,14}")  # a kernel algorithm name (TCP_CA_NAME_MAX 16 with its NUL)


@dataclass(frozen=True)
class BenchRun:
    """What to measure: the pattern of pairs on a plane, with which tool, for how long."""

    pattern: str = "fabric"
    plane: str = "compute"
    nodes: str | None = None
    seconds: int = 3
    tool: str = "iperf3"
    nccl_test: str = "all_reduce_perf"
    launcher: str | None = None
    # iperf3's -C: "plan" (the plane's choice in the Plan, what its nodes' sysctl holds), "system"
    # (no -C: whatever each host has), or an algorithm by name.
    congestion: str = PLAN_CONGESTION
    retry_inconclusive: int = 1  # rounds re-measuring, one pair at a time, pairs a saturated end left inconclusive
    rail: int | None = None  # only this rail's NICs (fabric and rail patterns)
    pairs: int | None = None  # at most this many pairs, still spanning rails and leaves (fabric pattern)
    slice: str | None = None  # K/N or next/N: one slice of the fabric's cover (bench schedule)
    slice_size: str = CLASS  # how the cover is cut: class, a number of pairs, a time


@dataclass(frozen=True)
class BenchOutcome:
    run_id: int
    measurements: list[Measurement]
    congestion: str | None  # the -C iperf3 was given; None: the hosts' own default, or not iperf3


def run(wanted: BenchRun, *, plan: Path | None, lab: str | None, db: Path,
        progress: Progress | None = None) -> BenchOutcome:
    """The tool over the pattern's pairs, each against the Plan's expectation, or one nccl-tests job
    over the nodes; stored in db as it goes (a round at a time), the congestion control used among
    the run's arguments."""
    if wanted.tool not in TOOLS:
        raise UsageError(f"unknown tool {wanted.tool!r}; known: {', '.join(TOOLS)}")
    if wanted.pattern not in PATTERNS:
        raise UsageError(f"unknown pattern {wanted.pattern!r}; known: {', '.join(PATTERNS)}")
    setup = _setup(wanted, plan, lab)
    chosen = bench_nodes(setup.plan, wanted.plane, wanted.nodes)
    selection = Selection(rail=wanted.rail, pairs=wanted.pairs)
    sliced = _slice(wanted, setup.plan, chosen, db) if wanted.slice is not None else None
    rounds = [] if wanted.tool == "nccl" else sliced.rounds if sliced else pattern_rounds(
        setup.plan, wanted.plane, wanted.pattern, chosen, selection)
    launch = (wanted.launcher or pick_launcher()) if wanted.tool == "nccl" else ""  # refused before a run starts
    nccl = wanted.tool == "nccl"
    run_id = start_run(db, plan_hash=plan_digest(setup.plan), tool=wanted.nccl_test if nccl else wanted.tool,
                       pattern="job" if nccl else wanted.pattern, arguments=_arguments(wanted, setup, sliced))
    if nccl:
        job = NcclJob(test=wanted.nccl_test, iterations=max(5, wanted.seconds * 10))
        results = [run_nccl(setup.plan, chosen, job, launch)]
        add_measurements(db, run_id, results)
        return BenchOutcome(run_id, results, None)
    measured = run_rounds(setup, rounds, progress or (lambda d, n, what: None),
                          on_round=lambda ms: add_measurements(db, run_id, ms))
    _aggregate(db, run_id, setup.plan, wanted.plane, measured, sliced=sliced)
    return BenchOutcome(run_id, measured, setup.congestion)


def _arguments(wanted: BenchRun, setup: BenchSetup, sliced: ChosenSlice | None) -> str:
    """What the run records of how it was asked for (history shows it; last_slice reads it back)."""
    arguments = f"plane={wanted.plane} seconds={wanted.seconds} nodes={wanted.nodes or 'all'}"
    if wanted.tool == "iperf3":
        arguments += f" congestion={setup.congestion or SYSTEM_CONGESTION}"
    arguments += "".join(f" {k}={v}" for k, v in (("rail", wanted.rail), ("pairs", wanted.pairs)) if v is not None)
    if sliced is not None:  # the rotation's next run follows on from this one
        arguments += f" slice={sliced.index}/{sliced.count} slice_size={SliceSize.parse(wanted.slice_size).text}"
    return arguments


def _aggregate(db: Path, run_id: int, plan: Plan, plane: str, measured: list[Measurement], *,
               sliced: ChosenSlice | None) -> None:
    """The run folded per pair class, rail and leaf–spine group; with a slice, what the rotation's
    cover should cross (a key never measured is then known)."""
    save_aggregates(db, run_id, aggregate(measured, measurement_groups(Fabric.of(plan, plane))))
    if sliced is not None:
        set_expected(db, plane, expected_keys(sliced.cover))


@dataclass(frozen=True)
class ChosenSlice:
    index: int
    count: int
    rounds: list[Round]
    cover: Cover


def _slice(wanted: BenchRun, plan: Plan, chosen: list[str], db: Path) -> ChosenSlice:
    """The slice `--slice` names of the fabric's cover of every node on the plane."""
    if wanted.pattern != "fabric" or wanted.tool == "nccl" or wanted.nodes or wanted.rail is not None \
            or wanted.pairs is not None:
        raise UsageError("--slice cuts the fabric pattern's cover of every node on the plane: no NODES, --rail, "
                         "--pairs, other pattern or nccl with it")
    choice = SliceChoice.parse(wanted.slice or "")
    size = SliceSize.parse(wanted.slice_size)
    found = cover(Fabric.of(plan, wanted.plane), wanted.plane, chosen, size, wanted.seconds)
    check_count(found, choice)
    index = choice.resolve(last_slice(db, wanted.plane, choice.count, size.text) if choice.index is None else None)
    picked = found.slices[index - 1]
    return ChosenSlice(index, choice.count, picked.rounds, found)


def _setup(wanted: BenchRun, plan: Path | None, lab: str | None) -> BenchSetup:
    if lab is not None and wanted.tool != "iperf3":
        raise UsageError(f"a lab emulates cables, not RDMA devices or GPUs: {wanted.tool} cannot run there (iperf3 "
                         "can)")
    reached = Reach.of_lab(lab) if lab is not None else Reach.of_nodes(plan)
    setup = BenchSetup(plan=reached.plan() or plan_of(None), on_node=reached.node_argv, plane=wanted.plane,
                       seconds=wanted.seconds, tool=wanted.tool, scale=reached.lab_scale(),
                       counter_root=reached.counter_root)
    retries = 0 if wanted.pattern == "incast" else wanted.retry_inconclusive  # one pair alone is no incast
    return replace(setup, congestion=congestion_for(wanted, setup.plan), retries=retries)


def congestion_for(wanted: BenchRun, plan: Plan) -> str | None:
    """iperf3's -C: the plane's choice in the Plan (the value its nodes' sysctl holds), the one
    named, or None for the hosts' own default; None for tools that do not run TCP."""
    if wanted.tool != "iperf3" or wanted.congestion == SYSTEM_CONGESTION:
        return None
    if wanted.congestion != PLAN_CONGESTION:
        if not CONGESTION_NAME.fullmatch(wanted.congestion):
            raise UsageError(f"--congestion {wanted.congestion[:40]!r}: 'plan', 'system' or a TCP congestion control "
                             "name (cubic, bbr, dctcp; `sysctl net.ipv4.tcp_available_congestion_control`)")
        return wanted.congestion
    plane = next((p for p in plan.planes if p.name == wanted.plane), None)
    if plane is None:
        raise UsageError(f"no plane {wanted.plane!r} in the plan; it has {', '.join(p.name for p in plan.planes)}")
    return tcp_congestion(plane).value


def detach(name: str, argv: Sequence[str], db: Path) -> DetachedRun:
    """This same `bench run` command line, less --detach and --json, started detached on this
    machine in this directory with the database named (so this user's `bench history` reads it)."""
    kept = _without_detach(list(argv))
    # The script is constant; the directory and the command line are its arguments, never parsed as shell.
    command = ["sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", str(Path.cwd()), sys.executable, "-m", "gpunet",
               *kept, "--db", str(db.resolve())]
    run_ = detach_here(name, command)
    if run_.failed_to_start:
        state = run_.states[run_.failed_to_start[0]]
        raise CommandError("bench run --detach", 1, state.error or state.output or state.state)
    return run_


def _without_detach(argv: list[str]) -> list[str]:
    """argv less `--detach NAME` / `--detach=NAME` and `--json` (the detached run's output is its log)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--detach":
            skip = True
        elif not arg.startswith("--detach=") and arg != "--json":
            kept.append(arg)
    return kept


def compare(db: Path, baseline: int, current: int | None, *, rules: Path | None = None, simulated: bool = False,
            plan: Path | None = None) -> list[Comparison]:
    """Each pair of `current` against `baseline`, or with `simulated` one run against the simulation
    of its own pairs (the plan it measured given)."""
    if simulated:
        if current is not None or plan is None:
            raise UsageError("--simulated compares one run with its simulation: give one run id and --plan")
        # The simulator brings numpy (0.15 s of start-up): only the command that simulates pays for it.
        from gpunet.bench.simulated import compare_simulated  # noqa: PLC0415
        return compare_simulated(db, baseline, plan_of(plan), rules)
    if current is None:
        raise UsageError("give two run ids (baseline, current), or one with --simulated --plan")
    return compare_runs(db, baseline, current, rules)


def heat_map(db: Path, run_id: int, cells: CellColumns, png: Path) -> None:
    """The run's matrix drawn as a PNG (matplotlib, the `plot` extra)."""
    info = run_info(db, run_id)
    write_png(cells, png, f"run {run_id}" + (f" · {info.tool} · {info.pattern}" if info else ""))
