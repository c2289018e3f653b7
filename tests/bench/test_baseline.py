"""Baselines per pair class, the latest result of each class judged against them, aggregates, raw
outputs stored compressed and pruned past a retention (the database stays bounded)."""

from __future__ import annotations

import json
import sqlite3
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.api.bench_regular import check_baseline, prune, set_baseline
from gpunet.bench import Fabric, bench_nodes
from gpunet.bench.aggregate import aggregate
from gpunet.bench.compare import load_rules
from gpunet.bench.history import baselines, latest, run_aggregates, save_aggregates, set_expected
from gpunet.bench.slices import SliceSize, cover, expected_keys
from gpunet.bench.store import MAX_RAW, Measurement, load_run, save_run
from gpunet.cli.main import app
from gpunet.errors import UsageError
from gpunet.render import prometheus
from tests.render.rendered import example_plan

RAW = json.dumps({"end": {"streams": [{"bits_per_second": 1e9 + i} for i in range(32)]}})


def m(source: str, value: float, *, path: str = "cross-leaf", rail: int = 0, status: str = "ok",
      expected: float = 100.0) -> Measurement:
    return Measurement(source=source, destination="z" + source, plane="compute", metric="throughput", value=value,
                       unit="Gb/s", expected=expected, status=status, raw=RAW, rail=rail, path=path,
                       reason="client cpu 100 %" if status == "inconclusive" else None)


def run(db: Path, *ms: Measurement) -> int:
    run_id = save_run(db, plan_hash="h", tool="iperf3", pattern="fabric", arguments="plane=compute",
                      measurements=list(ms))
    save_aggregates(db, run_id, aggregate(ms))
    return run_id


def test_aggregates_leave_saturated_ends_out_of_the_medians() -> None:
    found = {a.key.label: a for a in aggregate([m("a", 90), m("b", 94), m("c", 5, status="inconclusive"),
                                                m("d", 40, rail=1, status="low")])}
    rail0 = found["compute/cross-leaf/rail0"]
    assert (rail0.pairs, rail0.judged, rail0.inconclusive, rail0.flagged, rail0.median_value) == (3, 2, 1, 0, 92)
    assert found["compute/cross-leaf/rail1"].flagged == 1
    assert found["compute/rail0"].pairs == 3  # a pair counts in its rail too


def test_the_baseline_is_the_median_of_the_runs_class_medians(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    runs = [run(db, m("a", v), m("b", v + 2, path="same-leaf")) for v in (80, 90, 100)]
    set_baseline(db, runs)
    assert {(b.path, b.value, b.runs) for b in baselines(db)} == {("cross-leaf", 90, "1,2,3"),
                                                                  ("same-leaf", 92, "1,2,3")}


def test_a_regressed_class_fails_and_only_it(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    set_baseline(db, [run(db, m("a", 90), m("b", 90, path="same-leaf"), m("c", 90, rail=1))])
    run(db, m("a", 70), m("b", 89, path="same-leaf"))  # rail 1's class not measured again: its last result stands
    verdicts = {v.label: v for v in check_baseline(db)}
    assert verdicts["compute/cross-leaf/rail0"].verdict == "fail"
    assert verdicts["compute/cross-leaf/rail0"].variance == pytest.approx(-20 / 90)
    assert verdicts["compute/same-leaf/rail0"].verdict == "ok"
    assert verdicts["compute/cross-leaf/rail1"].verdict == "ok" and verdicts["compute/cross-leaf/rail1"].run_id == 1


def test_a_class_whose_latest_pairs_all_had_a_saturated_end_is_inconclusive_not_a_regression(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    set_baseline(db, [run(db, m("a", 90))])
    run(db, m("a", 10, status="inconclusive"), m("b", 12, status="inconclusive"))
    [verdict] = check_baseline(db)
    assert verdict.verdict == "inconclusive" and "saturated" in (verdict.reason or "")


def test_baseline_refuses_runs_that_judged_nothing_and_unknown_runs(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    only_saturated = run(db, m("a", 10, status="inconclusive"))
    with pytest.raises(UsageError, match="judged no pair"):
        set_baseline(db, [only_saturated])
    with pytest.raises(UsageError, match="no bench run 99"):
        set_baseline(db, [99])


def test_runs_from_before_aggregates_are_aggregated_when_a_baseline_is_set(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    old = save_run(db, plan_hash="h", tool="iperf3", pattern="fabric", arguments="plane=compute",
                   measurements=[m("a", 50), m("b", 70)])
    assert [b.value for b in set_baseline(db, [old])] == [60]
    assert run_aggregates(db, [old])


def test_never_measured_expected_keys_are_listed(tmp_path: Path) -> None:
    plan = example_plan("scalable-unit")
    found = cover(Fabric.of(plan, "compute"), "compute", bench_nodes(plan, "compute", None), SliceSize("class"), 3)
    db = tmp_path / "b.sqlite"
    run(db, m("a", 90))
    set_expected(db, "compute", expected_keys(found))
    measured, never = latest(db)
    assert {x.aggregate.key.label for x in measured} == {"compute/cross-leaf/rail0", "compute/rail0"}
    assert len(never) == 16 + 8 + 32 - 2  # classes, rails, leaf–spine groups, less the two measured


def test_raw_outputs_are_stored_compressed_and_read_back_whole(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    run_id = run(db, m("a", 90))
    with sqlite3.connect(db) as raw_db:
        stored = raw_db.execute("SELECT raw FROM measurements").fetchone()[0]
    assert isinstance(stored, bytes) and len(stored) < len(RAW) / 3
    assert load_run(db, run_id)[1][0].raw == RAW


def test_a_crafted_compressed_raw_inflates_no_further_than_the_bound(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    run_id = run(db, m("a", 90))
    bomb = zlib.compress(b"x" * (64 * MAX_RAW), 9)  # 64 MiB from a few tens of kB
    with sqlite3.connect(db) as raw_db:
        raw_db.execute("UPDATE measurements SET raw = ?", (bomb,))
    assert len(load_run(db, run_id)[1][0].raw) == MAX_RAW


def test_prune_empties_old_raw_outputs_and_keeps_values_and_aggregates(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    old = run(db, *(m(f"n{i}", 90) for i in range(200)))
    new = run(db, m("a", 80))
    long_ago = (datetime.now(UTC) - timedelta(days=40)).isoformat(timespec="seconds")
    with sqlite3.connect(db) as raw_db:
        raw_db.execute("UPDATE runs SET started = ? WHERE id = ?", (long_ago, old))
    before = db.stat().st_size
    assert prune(db, 30) == (1, 200)
    assert db.stat().st_size < before
    kept = load_run(db, old)[1]
    assert len(kept) == 200 and all(x.raw == "" and x.value == 90 for x in kept)
    assert load_run(db, new)[1][0].raw == RAW
    assert run_aggregates(db, [old]) and prune(db, 30) == (0, 0)


def test_cli_baseline_set_check_and_prune(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    first = run(db, m("a", 90))
    runner = CliRunner()
    assert runner.invoke(app, ["bench", "baseline", str(first), "--db", str(db)]).exit_code == 0
    assert runner.invoke(app, ["bench", "check", "--db", str(db)]).exit_code == 0
    run(db, m("a", 50))
    checked = runner.invoke(app, ["bench", "check", "--db", str(db), "--json"])
    assert checked.exit_code == 1 and json.loads(checked.stdout)[0]["verdict"] == "fail"
    shown = runner.invoke(app, ["bench", "baseline", "--db", str(db), "--json"])
    assert json.loads(shown.stdout)[0]["value"] == 90
    pruned = runner.invoke(app, ["bench", "prune", "--keep-days", "0", "--db", str(db), "--json"])
    assert pruned.exit_code == 0 and json.loads(pruned.stdout)["rows"] == 2
    assert runner.invoke(app, ["bench", "prune", "--keep-days", "-1", "--db", str(db)]).exit_code == 2


def test_the_regression_alert_fails_where_bench_compare_fails() -> None:
    assert load_rules(None).rules[-1].fail_below == prometheus.BENCH_REGRESSION


def test_a_flagged_pair_fails_its_class_though_the_median_holds(tmp_path: Path) -> None:
    """A slow equal-cost path: the pair's other streams fill its NIC, so the class median holds."""
    db = tmp_path / "b.sqlite"
    set_baseline(db, [run(db, m("a", 90), m("b", 90), m("c", 90))])
    run(db, m("a", 90), m("b", 89, status="low"), m("c", 91))
    [verdict] = check_baseline(db)
    assert verdict.verdict == "fail" and verdict.variance == 0 and "1 of 3 pairs of run 2" in (verdict.reason or "")
