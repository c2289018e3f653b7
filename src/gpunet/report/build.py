"""`gpunet report` as one library call: read each result file given (bounded), refuse one made for
another plan, render the page, write it atomically."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from gpunet.decide.catalog import load_catalog
from gpunet.decide.cost import price_plan
from gpunet.errors import UsageError
from gpunet.files.write import OutputTree
from gpunet.model.base import bulk_objects
from gpunet.model.plan import Plan
from gpunet.report.bench import load_bench
from gpunet.report.load import load_cabling, load_compare, load_doctor, load_localize, load_sim, load_switch
from gpunet.report.model import PlanIndex
from gpunet.report.page import Report, render_report


@dataclass(frozen=True)
class ReportFiles:
    """What the user has: each family's file (or the bench database and run), None where not given."""

    doctor: Sequence[Path] = ()
    cabling: Path | None = None
    localize: Path | None = None
    bench_db: Path | None = None
    run: int | None = None
    switch: Path | None = None
    sim: Path | None = None
    compare: Path | None = None
    catalog: Path | None = None
    sources: dict[str, str] = field(default_factory=dict)


def read_results(plan: Plan, files: ReportFiles, index: PlanIndex | None = None) -> tuple[dict[str, object],
                                                                                        dict[str, str]]:
    """Each given file as its family's result, held against the plan (UsageError naming the file)."""
    if files.run is not None and files.bench_db is None:
        raise UsageError("--run names a run of a bench database: give --bench-db too")
    index = index or PlanIndex.of(plan)
    results: dict[str, object] = {}
    sources: dict[str, str] = {}
    if files.doctor:
        results["doctor"] = load_doctor(files.doctor, plan)
        sources["doctor"] = ", ".join(str(p) for p in files.doctor)
    one_file: dict[str, tuple[Path | None, Callable[[Path], object]]] = {
        "cabling": (files.cabling, lambda p: load_cabling(p, plan, index)),
        "localize": (files.localize, lambda p: load_localize(p, plan, index)),
        "switch": (files.switch, lambda p: load_switch(p, plan, index)),
        "sim": (files.sim, lambda p: load_sim(p, plan)),
        "compare": (files.compare, lambda p: load_compare(p, plan))}
    for key, (path, load) in one_file.items():
        if path is not None:
            results[key], sources[key] = load(path), str(path)
    if files.bench_db is not None:
        results["bench"] = load_bench(files.bench_db, plan, index.digest, files.run)
        sources["bench"] = f"{files.bench_db}" + (f" run {files.run}" if files.run is not None else " (latest run)")
    return results, sources


def build_report(plan: Plan, files: ReportFiles, generated: datetime | None = None) -> Report:
    with bulk_objects():  # 370 000 cable verdicts at 12 500 nodes: no cyclic GC passes over them while built
        index = PlanIndex.of(plan)
        results, sources = read_results(plan, files, index)
        costing = price_plan(plan, load_catalog(files.catalog)) if files.catalog is not None else None
        return render_report(plan, results, generated=generated or datetime.now(UTC), costing=costing,
                             sources=sources, index=index)


def write_report(report: Report, output: Path) -> None:
    """The page, replaced atomically (never half a file), never through a symlink inside the tree."""
    if output.is_dir():
        raise UsageError(f"{output} is a directory: name the report's file (-o report.html)")
    with OutputTree(output.parent if str(output.parent) else Path(".")) as tree:
        tree.write(output.name, report.html)
