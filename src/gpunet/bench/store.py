"""Results in SQLite: one row per run, one per measurement (with its raw output)."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from gpunet.model.base import Frozen

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY, started TEXT NOT NULL, plan_hash TEXT NOT NULL, tool TEXT NOT NULL,
    pattern TEXT NOT NULL, arguments TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    run_id INTEGER NOT NULL REFERENCES runs(id), source TEXT NOT NULL, destination TEXT NOT NULL,
    plane TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
    expected REAL, status TEXT NOT NULL, raw TEXT NOT NULL
);
"""


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

    @property
    def percent_of_expected(self) -> float | None:
        return 100 * self.value / self.expected if self.expected else None


class RunSummary(Frozen):
    id: int
    started: str
    tool: str
    pattern: str
    measurements: int
    flagged: int


def default_db() -> Path:
    data = Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share"))
    return data / "gpunet" / "bench.sqlite"


def _open(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    return db


def save_run(path: Path, *, plan_hash: str, tool: str, pattern: str, arguments: str,
             measurements: list[Measurement]) -> int:
    with closing(_open(path)) as db, db:
        cursor = db.execute("INSERT INTO runs (started, plan_hash, tool, pattern, arguments) VALUES (?, ?, ?, ?, ?)",
                            (datetime.now(UTC).isoformat(timespec="seconds"), plan_hash, tool, pattern, arguments))
        run_id = int(cursor.lastrowid or 0)
        db.executemany(
            "INSERT INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(run_id, m.source, m.destination, m.plane, m.metric, m.value, m.unit, m.expected, m.status, m.raw)
             for m in measurements])
    return run_id


def history(path: Path, limit: int = 20) -> list[RunSummary]:
    with closing(_open(path)) as db:
        rows = db.execute(
            "SELECT r.id, r.started, r.tool, r.pattern, COUNT(m.run_id), SUM(m.status != 'ok') FROM runs r "
            "LEFT JOIN measurements m ON m.run_id = r.id GROUP BY r.id ORDER BY r.id DESC LIMIT ?", (limit,)).fetchall()
    return [RunSummary(id=r[0], started=r[1], tool=r[2], pattern=r[3], measurements=r[4], flagged=r[5] or 0)
            for r in rows]


def measurements(path: Path, run_id: int) -> list[Measurement]:
    with closing(_open(path)) as db:
        rows = db.execute("SELECT source, destination, plane, metric, value, unit, expected, status, raw "
                          "FROM measurements WHERE run_id = ?", (run_id,)).fetchall()
    keys = ("source", "destination", "plane", "metric", "value", "unit", "expected", "status", "raw")
    return [Measurement(**dict(zip(keys, row, strict=True))) for row in rows]
