"""The bench database as Prometheus series, as the exporter serves them with --bench-db: the latest
of every pair class, rail and leaf–spine group with its age as of the scrape, baselines and
variance, keys the rotation should cross and no run measured (age +Inf), inconclusive streaks."""

from __future__ import annotations

import math
import sqlite3
from datetime import datetime
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpunet.api.bench_regular import set_baseline
from gpunet.bench.aggregate import CLASS_KIND, GROUP_KIND, AggregateKey, aggregate
from gpunet.bench.history import save_aggregates, set_expected
from gpunet.bench.metrics import bench_collector
from gpunet.bench.store import Measurement, save_run
from gpunet.monitor import ExporterOptions, build_registry

STARTED = "2026-12-01T01:00:00+00:00"


def m(source: str, value: float, *, rail: int = 0, status: str = "ok") -> Measurement:
    return Measurement(source=source, destination="z", plane="compute", metric="throughput", value=value,
                       unit="Gb/s", expected=100.0, status=status, rail=rail, to_rail=rail + 1, path="cross-leaf")


def run(db: Path, *ms: Measurement, started: str = STARTED) -> int:
    run_id = save_run(db, plan_hash="h", tool="iperf3", pattern="fabric", arguments="plane=compute",
                      measurements=list(ms))
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE runs SET started = ? WHERE id = ?", (started, run_id))
    save_aggregates(db, run_id, aggregate(ms, lambda x: [("leaf1", "spine1")] if x.rail == 0 else []))
    return run_id


def series(db: Path, now: float) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry, _ = build_registry(ExporterOptions(root=Path("/nonexistent"),
                                                 extra={"bench": bench_collector(db, 604800, lambda: now)}))
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name.startswith("gpunet_bench")}


def test_latest_class_rail_and_group_with_age_baseline_and_never_measured(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    set_baseline(db, [run(db, m("a", 90), m("b", 92))])
    run(db, m("a", 70), m("b", 72), m("c", 5, status="inconclusive"), started="2026-12-02T01:00:00+00:00")
    set_expected(db, "compute", [AggregateKey(CLASS_KIND, "compute", "throughput", "cross-leaf", 0),
                                 AggregateKey(CLASS_KIND, "compute", "throughput", "same-leaf", 4),
                                 AggregateKey(GROUP_KIND, "compute", "throughput", leaf="leaf1", spine="spine1")])
    now = datetime.fromisoformat("2026-12-02T02:00:00+00:00").timestamp()
    found = series(db, now)
    cls = (("path", "cross-leaf"), ("plane", "compute"), ("rail", "0"))
    assert found["gpunet_bench_class_age_seconds", cls] == 3600
    assert found["gpunet_bench_class_throughput_bytes_per_second", cls] == 71e9 / 8
    assert found["gpunet_bench_class_baseline_bytes_per_second", cls] == 91e9 / 8
    assert math.isclose(found["gpunet_bench_class_variance_ratio", cls], -20 / 91)
    assert (found["gpunet_bench_class_pairs", cls], found["gpunet_bench_class_inconclusive_pairs", cls]) == (3, 1)
    assert found["gpunet_bench_class_expected_ratio", cls] == 0.71
    never = (("path", "same-leaf"), ("plane", "compute"), ("rail", "4"))
    assert found["gpunet_bench_class_age_seconds", never] == math.inf
    assert found["gpunet_bench_group_age_seconds", (("leaf", "leaf1"), ("plane", "compute"), ("spine", "spine1"))] \
        == 3600
    assert found["gpunet_bench_rail_age_seconds", (("plane", "compute"), ("rail", "1"))] == 3600  # the far end's
    assert found["gpunet_bench_period_seconds", ()] == 604800
    assert found["gpunet_bench_inconclusive_runs_in_a_row", (("plane", "compute"),)] == 1


def test_inconclusive_runs_in_a_row_count_back_from_the_latest(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    for status in ("inconclusive", "ok", "inconclusive", "inconclusive"):
        run(db, m("a", 50, status=status))
    assert series(db, 0)["gpunet_bench_inconclusive_runs_in_a_row", (("plane", "compute"),)] == 2


def test_a_missing_database_fails_the_collector_not_the_scrape(tmp_path: Path) -> None:
    registry, _ = build_registry(ExporterOptions(root=Path("/nonexistent"),
                                                 extra={"bench": bench_collector(tmp_path / "none.sqlite", 86400)}))
    text = generate_latest(registry).decode()
    assert 'gpunet_collector_success{collector="bench"} 0.0' in text
