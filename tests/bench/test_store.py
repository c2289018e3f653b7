"""The SQLite store's run look-ups and its upgrade of a database from before rails."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gpunet.bench.store import Measurement, load_run, measurements, run_info, save_run
from gpunet.errors import UsageError

ROW = Measurement(source="a", destination="b", plane="compute", metric="throughput", value=9.0, unit="Gb/s",
                  expected=10.0, status="ok", raw="{}", rail=2)


def test_run_info_and_load_run(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    run = save_run(db, plan_hash="abc", tool="iperf3", pattern="rail", arguments="plane=compute", measurements=[ROW])
    info, rows = load_run(db, run)
    assert (info.id, info.plan_hash, info.tool, info.pattern, info.arguments) == (run, "abc", "iperf3", "rail",
                                                                               "plane=compute")
    assert rows == [ROW] and rows[0].rail == 2
    assert run_info(db, run + 1) is None
    with pytest.raises(UsageError, match=rf"no bench run {run + 1} in .*b.sqlite; `gpunet bench history`"):
        load_run(db, run + 1)


def test_an_unknown_database_is_not_created_by_a_look_up(tmp_path: Path) -> None:
    db = tmp_path / "none.sqlite"
    with pytest.raises(UsageError, match="does not exist"):
        load_run(db, 1)
    assert not db.exists()


def test_a_database_from_before_rails_gains_the_column(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as old:
        old.executescript(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT NOT NULL, plan_hash TEXT NOT NULL, "
            "tool TEXT NOT NULL, pattern TEXT NOT NULL, arguments TEXT NOT NULL);"
            "CREATE TABLE measurements (run_id INTEGER NOT NULL, source TEXT NOT NULL, destination TEXT NOT NULL, "
            "plane TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL, expected REAL, "
            "status TEXT NOT NULL, raw TEXT NOT NULL);"
            "INSERT INTO runs VALUES (1, 't', 'h', 'iperf3', 'pair', '');"
            "INSERT INTO measurements VALUES (1, 'a', 'b', 'compute', 'throughput', 9.0, 'Gb/s', 10.0, 'ok', '{}');")
    old.close()
    assert measurements(db, 1) == [ROW.model_copy(update={"rail": None})]
    second = save_run(db, plan_hash="h", tool="iperf3", pattern="rail", arguments="", measurements=[ROW])
    assert measurements(db, second) == [ROW]
