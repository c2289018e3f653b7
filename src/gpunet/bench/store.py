"""Results in SQLite: one row per run, one per measurement (with its raw output)."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from gpunet.errors import UsageError
from gpunet.model.base import Frozen

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, started TEXT NOT NULL, plan_hash TEXT NOT NULL, tool TEXT NOT NULL,
    pattern TEXT NOT NULL, arguments TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    run_id INTEGER NOT NULL REFERENCES runs(id), source TEXT NOT NULL, destination TEXT NOT NULL,
    plane TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
    expected REAL, status TEXT NOT NULL, raw TEXT NOT NULL, rail INTEGER
);
"""
QUERY_SECONDS = 60  # a backstop: runs and measurements must be plain tables, so reads are linear
MAX_RAW = 1 << 20  # a measurement's raw tool output: iperf3's JSON is tens of kB
COLUMNS = ("source", "destination", "plane", "metric", "value", "unit", "expected", "status", "raw", "rail")


class Measurement(Frozen):
    source: str
    destination: str
    plane: str
    metric: str  # throughput
    value: float
    unit: str  # Gb/s
    expected: float | None = None
    status: str  # ok | low | failed
    raw: str = ""
    rail: int | None = None  # the rail measured (rail pattern); None for the plane as a whole

    @property
    def percent_of_expected(self) -> float | None:
        return 100 * self.value / self.expected if self.expected else None


class RunInfo(Frozen):
    id: int
    started: str
    plan_hash: str
    tool: str
    pattern: str
    arguments: str


class RunSummary(Frozen):
    id: int
    started: str
    tool: str
    pattern: str
    measurements: int
    flagged: int


def _column(name: str) -> str:
    """A column as read: text cut to a bound (a crafted row of 400 MB is not loaded whole)."""
    return {"raw": f"substr(raw, 1, {MAX_RAW})", "value": "value", "expected": "expected", "rail": "rail"}.get(
        name, f"substr({name}, 1, 256)")


def default_db() -> Path:
    data = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share"))
    return data / "gpunet" / "bench.sqlite"


def _open(path: Path) -> sqlite3.Connection:
    """For writing: the database, made (with its directory) when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite3.connect(path)
        db.executescript(SCHEMA)
        if "rail" not in {row[1] for row in db.execute("PRAGMA table_info(measurements)")}:
            db.execute("ALTER TABLE measurements ADD COLUMN rail INTEGER")  # a database from before rails
    except sqlite3.DatabaseError as exc:
        raise UsageError(f"{path} is not a gpunet bench database: {exc}") from None
    return db


@contextmanager
def _reading(path: Path) -> Iterator[sqlite3.Connection]:
    """For reading: opened read-only and never created (immutable, so no -shm or -wal file is made,
    unless a writer has a -wal file in use); runs and measurements must be tables, not views that
    compute without end; a query is stopped after QUERY_SECONDS. What is not a bench database is a
    UsageError."""
    if not path.is_file():
        raise UsageError(f"no bench database at {path} (`gpunet bench run` creates it; --db names another)")
    in_use = path.with_name(path.name + "-wal").exists()
    uri = f"{path.absolute().as_uri()}?{'mode=ro' if in_use else 'immutable=1'}"
    try:
        with closing(sqlite3.connect(uri, uri=True)) as db:
            deadline = time.monotonic() + QUERY_SECONDS
            db.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
            _require_tables(db, path)
            yield db
    except sqlite3.DatabaseError as exc:
        why = f"a query ran past {QUERY_SECONDS} s" if "interrupted" in str(exc) else str(exc)
        raise UsageError(f"{path} is not a gpunet bench database: {why}") from None
    except ValidationError as exc:
        raise UsageError(f"{path}: a row gpunet did not write: {exc.errors()[0]['loc']}: "
                         f"{exc.errors()[0]['msg']}") from None


def _require_tables(db: sqlite3.Connection, path: Path) -> None:
    kinds = dict(db.execute("SELECT name, type FROM sqlite_master WHERE name IN ('runs', 'measurements')"))
    if kinds.get("runs") != "table" or kinds.get("measurements") != "table":
        raise UsageError(f"{path} is not a gpunet bench database: runs and measurements are not both tables "
                         f"({kinds or 'neither is there'})")


def save_run(path: Path, *, plan_hash: str, tool: str, pattern: str, arguments: str,
             measurements: list[Measurement]) -> int:
    run_id = start_run(path, plan_hash=plan_hash, tool=tool, pattern=pattern, arguments=arguments)
    add_measurements(path, run_id, measurements)
    return run_id


def start_run(path: Path, *, plan_hash: str, tool: str, pattern: str, arguments: str) -> int:
    """A run row before its first measurement, so each round is kept as it completes: an all-pairs
    run of hours interrupted in round 300 keeps 299 rounds."""
    with closing(_open(path)) as db, db:
        cursor = db.execute("INSERT INTO runs (started, plan_hash, tool, pattern, arguments) VALUES (?, ?, ?, ?, ?)",
                            (datetime.now(UTC).isoformat(timespec="seconds"), plan_hash, tool, pattern, arguments))
        return int(cursor.lastrowid or 0)


def add_measurements(path: Path, run_id: int, measurements: list[Measurement]) -> None:
    with closing(_open(path)) as db, db:
        db.executemany(
            f"INSERT INTO measurements (run_id, {', '.join(COLUMNS)}) VALUES (?{', ?' * len(COLUMNS)})",
            [(run_id, *(getattr(m, c) for c in COLUMNS)) for m in measurements])


def history(path: Path, limit: int = 20) -> list[RunSummary]:
    with _reading(path) as db:
        rows = db.execute(
            "SELECT r.id, substr(r.started, 1, 64), substr(r.tool, 1, 64), substr(r.pattern, 1, 64), COUNT(m.run_id), "
            "SUM(m.status != 'ok') FROM runs r "
            "LEFT JOIN measurements m ON m.run_id = r.id GROUP BY r.id ORDER BY r.id DESC LIMIT ?", (limit,)).fetchall()
        return [RunSummary(id=r[0], started=r[1], tool=r[2], pattern=r[3], measurements=r[4], flagged=r[5] or 0)
                for r in rows]


def measurements(path: Path, run_id: int) -> list[Measurement]:
    with _reading(path) as db:
        present = {row[1] for row in db.execute("PRAGMA table_info(measurements)")}
        selected = ", ".join(_column(c) if c in present else f"NULL AS {c}" for c in COLUMNS)  # before rails: no rail
        rows = db.execute(f"SELECT {selected} FROM measurements WHERE run_id = ?", (run_id,)).fetchall()
        return [Measurement(**dict(zip(COLUMNS, row, strict=True))) for row in rows]


def run_info(path: Path, run_id: int) -> RunInfo | None:
    """What was run (tool, pattern, arguments, plan) as stored; None for an unknown id."""
    if not path.exists() or not 0 < run_id < 2**63:  # SQLite's integers are 64-bit
        return None
    with _reading(path) as db:
        row = db.execute("SELECT id, substr(started, 1, 64), substr(plan_hash, 1, 64), substr(tool, 1, 64), "
                         "substr(pattern, 1, 64), substr(arguments, 1, 1024) FROM runs WHERE id = ?",
                         (run_id,)).fetchone()
        return RunInfo(**dict(zip(RunInfo.model_fields, row, strict=True))) if row else None


def load_run(path: Path, run_id: int) -> tuple[RunInfo, list[Measurement]]:
    """A stored run and its measurements; an unknown id (or no database) is a UsageError."""
    info = run_info(path, run_id)
    if info is None:
        where = f"in {path}" if path.exists() else f"({path} does not exist)"
        raise UsageError(f"no bench run {run_id} {where}; `gpunet bench history` lists the runs")
    return info, measurements(path, run_id)
