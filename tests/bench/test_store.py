"""The SQLite store's run look-ups, its upgrade of a database from before rails or health, retries
replacing their inconclusive rows, and a run read as matrix cells."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gpunet.bench.health import EndHealth
from gpunet.bench.store import (
    CellColumns,
    Measurement,
    add_measurements,
    default_db,
    history,
    load_cells,
    load_run,
    measurements,
    run_info,
    save_run,
)
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


HEALTH = (EndHealth(node="a", role="client", seconds=4.1, cpu_pressure=0.02, busy=0.3, steal=0.0, cpus=2,
                    tool_cpu=1.7),
          EndHealth(node="b", role="server", seconds=4.1, cpu_pressure=0.97, busy=1.0, steal=0.0, cpus=2,
                    unreadable=None))
SATURATED = ROW.model_copy(update={"status": "inconclusive", "health": HEALTH, "rail": None,
                                   "reason": "server b: runnable tasks waited for a CPU 97 % of the window"})


def test_health_reason_and_attempts_are_kept(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    run = save_run(db, plan_hash="h", tool="iperf3", pattern="pair", arguments="plane=compute",
                   measurements=[SATURATED])
    assert measurements(db, run) == [SATURATED] and measurements(db, run)[0].health[1].cpu_pressure == 0.97


def test_a_database_from_before_health_loads_and_gains_the_columns(tmp_path: Path) -> None:
    db = tmp_path / "rails.sqlite"
    with sqlite3.connect(db) as old:
        old.executescript(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT NOT NULL, plan_hash TEXT NOT NULL, "
            "tool TEXT NOT NULL, pattern TEXT NOT NULL, arguments TEXT NOT NULL);"
            "CREATE TABLE measurements (run_id INTEGER NOT NULL, source TEXT NOT NULL, destination TEXT NOT NULL, "
            "plane TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL, expected REAL, "
            "status TEXT NOT NULL, raw TEXT NOT NULL, rail INTEGER);"
            "INSERT INTO runs VALUES (1, 't', 'h', 'iperf3', 'rail', 'plane=storage seconds=3');"
            "INSERT INTO measurements VALUES (1, 'a', 'b', 'compute', 'throughput', 9.0, 'Gb/s', 10.0, 'ok', '{}', 2);")
    old.close()
    assert measurements(db, 1) == [ROW]  # no health, no reason, one attempt
    assert load_cells(db, 1) == CellColumns(sources=["a"], runs=[1], destinations=["b"],
                                            codes=str(90 * 10_000 * 256 + ord("o")))
    second = save_run(db, plan_hash="h", tool="iperf3", pattern="pair", arguments="plane=compute",
                      measurements=[SATURATED])
    assert measurements(db, second) == [SATURATED] and measurements(db, 1) == [ROW]
    assert load_cells(db, 1).codes == str(90 * 10_000 * 256 + ord("o"))  # its rows have no cell code yet
    assert [(r.id, r.plane, r.flagged, r.inconclusive) for r in history(db)] == [(2, "compute", 0, 1),
                                                                                 (1, "storage", 0, 0)]


def test_a_retry_replaces_the_inconclusive_row_of_its_pair(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    other = SATURATED.model_copy(update={"source": "c"})
    run = save_run(db, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="plane=compute",
                   measurements=[SATURATED, other])
    retried = ROW.model_copy(update={"rail": None, "value": 9.8, "attempts": 2})
    add_measurements(db, run, [retried])
    assert measurements(db, run) == [retried, other]  # one row a pair, in its place
    still = other.model_copy(update={"attempts": 2, "reason": f"{other.reason}; again on attempt 2: ..."})
    add_measurements(db, run, [still])
    assert measurements(db, run) == [retried, still]


def test_cells_are_read_as_measured_and_refused_when_a_name_breaks_them(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    rows = [ROW, ROW.model_copy(update={"destination": "c", "expected": None, "status": "failed", "value": 0.0}),
            SATURATED.model_copy(update={"source": "c", "value": 10.05})]
    run = save_run(db, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="", measurements=rows)
    cells = load_cells(db, run)
    sources = [name for name, run in zip(cells.sources, cells.runs, strict=True) for _ in range(run)]
    assert sorted(zip(sources, cells.destinations, map(int, cells.codes.split()), strict=True)) == sorted(
        [("a", "b", 900_000 * 256 + ord("o")), ("a", "c", -256 + ord("f")), ("c", "b", 1_005_000 * 256 + ord("i"))])
    broken = save_run(db, plan_hash="h", tool="iperf3", pattern="pair", arguments="",
                      measurements=[ROW.model_copy(update={"destination": "b\nc"})])
    with pytest.raises(UsageError, match="rows gpunet did not write"):
        load_cells(db, broken)


def test_the_default_database_is_the_users_state() -> None:
    assert default_db({"XDG_STATE_HOME": "/home/ana/.state"}) == Path("/home/ana/.state/gpunet/bench.sqlite")
    assert default_db({}) == Path.home() / ".local" / "state" / "gpunet" / "bench.sqlite"
    assert default_db({"XDG_STATE_HOME": "relative"}) == Path.home() / ".local" / "state" / "gpunet" / "bench.sqlite"
