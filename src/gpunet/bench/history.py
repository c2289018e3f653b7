"""What the bench database keeps beyond runs and measurements, so it stays bounded and answers fast:
each run's aggregates (per pair class, rail, leaf–spine group), what the latest rotation's cover
should cross (the keys never measured are then known), baselines per pair class, and pruning of
raw outputs past a retention."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpunet.bench.aggregate import Aggregate, AggregateKey
from gpunet.bench.store import reading, writing
from gpunet.model.base import Frozen

KEY_COLUMNS = ("kind", "plane", "metric", "path", "rail", "leaf", "spine")
VALUE_COLUMNS = ("pairs", "judged", "inconclusive", "flagged", "median_value", "median_percent")
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS aggregates (
    run_id INTEGER NOT NULL REFERENCES runs(id), kind TEXT NOT NULL, plane TEXT NOT NULL, metric TEXT NOT NULL,
    path TEXT NOT NULL, rail INTEGER NOT NULL, leaf TEXT NOT NULL, spine TEXT NOT NULL, pairs INTEGER NOT NULL,
    judged INTEGER NOT NULL, inconclusive INTEGER NOT NULL, flagged INTEGER NOT NULL, median_value REAL,
    median_percent REAL
);
CREATE INDEX IF NOT EXISTS aggregates_latest ON aggregates ({", ".join(KEY_COLUMNS)}, run_id);
CREATE INDEX IF NOT EXISTS aggregates_run ON aggregates (run_id);
CREATE TABLE IF NOT EXISTS latest_aggregates (
    run_id INTEGER NOT NULL, kind TEXT NOT NULL, plane TEXT NOT NULL, metric TEXT NOT NULL, path TEXT NOT NULL,
    rail INTEGER NOT NULL, leaf TEXT NOT NULL, spine TEXT NOT NULL, pairs INTEGER NOT NULL, judged INTEGER NOT NULL,
    inconclusive INTEGER NOT NULL, flagged INTEGER NOT NULL, median_value REAL, median_percent REAL,
    PRIMARY KEY ({", ".join(KEY_COLUMNS)})
);
CREATE TABLE IF NOT EXISTS expected (
    kind TEXT NOT NULL, plane TEXT NOT NULL, metric TEXT NOT NULL, path TEXT NOT NULL, rail INTEGER NOT NULL,
    leaf TEXT NOT NULL, spine TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS baselines (
    plane TEXT NOT NULL, metric TEXT NOT NULL, path TEXT NOT NULL, rail INTEGER NOT NULL, value REAL NOT NULL,
    percent REAL, runs TEXT NOT NULL, set_at TEXT NOT NULL, PRIMARY KEY (plane, metric, path, rail)
);
"""
KEYS = ", ".join(KEY_COLUMNS)


class Latest(Frozen):
    """A key's aggregate in the latest run that measured it, and when that run started."""

    aggregate: Aggregate
    run_id: int
    started: str


class Baseline(Frozen):
    plane: str
    metric: str
    path: str
    rail: int
    value: float  # Gb/s: the median of the runs' class medians
    percent: float | None
    runs: str  # the run ids it was set from, comma-separated
    set_at: str


def _writing(path: Path) -> sqlite3.Connection:
    db = writing(path)
    db.executescript(SCHEMA)
    return db


def _has_tables(db: sqlite3.Connection, *names: str) -> bool:
    found = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return set(names) <= found


ALL_COLUMNS = ("run_id", *KEY_COLUMNS, *VALUE_COLUMNS)
# Each key's newest aggregate kept apart as runs are saved: the latest view reads one row a key,
# not a year of runs (an older run aggregated late never replaces a newer one's).
UPSERT_LATEST = (f"INSERT INTO latest_aggregates ({', '.join(ALL_COLUMNS)}) SELECT {', '.join(ALL_COLUMNS)} "
                 f"FROM aggregates WHERE run_id = ? ON CONFLICT ({KEYS}) DO UPDATE SET "
                 + ", ".join(f"{c} = excluded.{c}" for c in ("run_id", *VALUE_COLUMNS))
                 + " WHERE excluded.run_id >= latest_aggregates.run_id")


def save_aggregates(path: Path, run_id: int, aggregates: Iterable[Aggregate]) -> None:
    """The run's aggregates, replacing any it had (a run aggregated again after a retry)."""
    columns = (*KEY_COLUMNS, *VALUE_COLUMNS)
    with closing(_writing(path)) as db, db:
        db.execute("DELETE FROM aggregates WHERE run_id = ?", (run_id,))
        db.executemany(f"INSERT INTO aggregates (run_id, {', '.join(columns)}) VALUES (?{', ?' * len(columns)})",
                       ((run_id, *(getattr(a, c) for c in columns)) for a in aggregates))
        db.execute(UPSERT_LATEST, (run_id,))


def set_expected(path: Path, plane: str, keys: Iterable[AggregateKey]) -> None:
    """What the plane's cover crosses now (replacing what it crossed before)."""
    with closing(_writing(path)) as db, db:
        db.execute("DELETE FROM expected WHERE plane = ?", (plane,))
        db.executemany(f"INSERT INTO expected ({KEYS}) VALUES (?, ?, ?, ?, ?, ?, ?)", keys)


def latest(path: Path) -> tuple[list[Latest], list[AggregateKey]]:
    """Every key's aggregate from the latest run that measured it, and the expected keys no run has
    measured: one row a key (latest_aggregates), each run's start looked up by its id."""
    with reading(path) as db:
        if not _has_tables(db, "latest_aggregates", "expected"):
            return [], []
        rows = db.execute(f"SELECT a.run_id, substr(r.started, 1, 64), "
                          f"{', '.join(f'a.{c}' for c in (*KEY_COLUMNS, *VALUE_COLUMNS))} FROM latest_aggregates a "
                          "JOIN runs r ON r.id = a.run_id").fetchall()
        found = [Latest(aggregate=Aggregate(**dict(zip((*KEY_COLUMNS, *VALUE_COLUMNS), row[2:], strict=True))),
                        run_id=row[0], started=row[1]) for row in rows]
        measured = {f.aggregate.key for f in found}
        expected = [AggregateKey(*row) for row in db.execute(f"SELECT {KEYS} FROM expected")]
    return found, [k for k in expected if k not in measured]


def run_aggregates(path: Path, run_ids: Iterable[int]) -> list[tuple[int, Aggregate]]:
    """The stored aggregates of these runs."""
    ids = list(run_ids)
    with reading(path) as db:
        if not _has_tables(db, "aggregates") or not ids:
            return []
        rows = db.execute(f"SELECT run_id, {', '.join((*KEY_COLUMNS, *VALUE_COLUMNS))} FROM aggregates WHERE run_id "
                          f"IN ({', '.join('?' * len(ids))})", ids).fetchall()
    return [(row[0], Aggregate(**dict(zip((*KEY_COLUMNS, *VALUE_COLUMNS), row[1:], strict=True)))) for row in rows]


def runs_without_aggregates(path: Path) -> list[int]:
    with reading(path) as db:
        table = "aggregates" if _has_tables(db, "aggregates") else None
        query = ("SELECT id FROM runs WHERE id NOT IN (SELECT run_id FROM aggregates)" if table
                 else "SELECT id FROM runs")
        return [row[0] for row in db.execute(query + " ORDER BY id")]


def save_baselines(path: Path, baselines: Iterable[Baseline]) -> None:
    """Each class's baseline, replacing the one it had (classes not named keep theirs)."""
    columns = tuple(Baseline.model_fields)
    with closing(_writing(path)) as db, db:
        db.executemany(f"INSERT OR REPLACE INTO baselines ({', '.join(columns)}) VALUES "
                       f"({', '.join('?' * len(columns))})", (tuple(getattr(b, c) for c in columns) for b in baselines))


def baselines(path: Path) -> list[Baseline]:
    with reading(path) as db:
        if not _has_tables(db, "baselines"):
            return []
        columns = tuple(Baseline.model_fields)
        rows = db.execute(f"SELECT {', '.join(columns)} FROM baselines ORDER BY plane, metric, path, rail")
        return [Baseline(**dict(zip(columns, row, strict=True))) for row in rows]


def inconclusive_streak(path: Path, plane: str) -> int:
    """How many of the plane's latest runs in a row ended with a pair still inconclusive."""
    with reading(path) as db:
        if not _has_tables(db, "aggregates"):
            return 0
        streak = 0
        for (left,) in db.execute("SELECT sum(inconclusive) FROM aggregates WHERE kind = 'class' AND plane = ? "
                                  "GROUP BY run_id ORDER BY run_id DESC LIMIT 1000", (plane,)):
            if not left:
                break
            streak += 1
        return streak


def prune(path: Path, keep_days: int, now: datetime | None = None) -> tuple[int, int]:
    """Raw outputs, health and counters of measurements in runs started more than keep_days ago
    emptied (their aggregates and the rows' values, statuses and reasons kept), then the file
    compacted. Returns (runs pruned, rows emptied)."""
    cutoff = ((now or datetime.now(UTC)) - timedelta(days=keep_days)).isoformat(timespec="seconds")
    with closing(_writing(path)) as db:
        with db:
            runs = [row[0] for row in db.execute("SELECT id FROM runs WHERE started <= ? AND id IN "
                                                 "(SELECT run_id FROM measurements WHERE raw != '' OR health "
                                                 "IS NOT NULL)", (cutoff,))]
            emptied = db.execute("UPDATE measurements SET raw = '', health = NULL, counters = NULL WHERE run_id IN "
                                 "(SELECT id FROM runs WHERE started <= ?) AND (raw != '' OR health IS NOT NULL "
                                 "OR counters IS NOT NULL)", (cutoff,)).rowcount
        db.execute("VACUUM")
    return len(runs), emptied
