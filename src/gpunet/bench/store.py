"""Results in SQLite: one row per run, one per measurement (with its raw output)."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from gpunet.bench.health import EndHealth
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
    expected REAL, status TEXT NOT NULL, raw TEXT NOT NULL, rail INTEGER, health TEXT, reason TEXT,
    attempts INTEGER NOT NULL DEFAULT 1
);
"""
# Columns added since the first schema, added to an older database when it is next written to.
ADDED_COLUMNS = {"rail": "INTEGER", "health": "TEXT", "reason": "TEXT", "attempts": "INTEGER NOT NULL DEFAULT 1"}
# A run's cells read from an index without touching the rows: raw outputs (tens of kB each, and
# the columns after them) stay on disk when a 2 000-node run's matrix is drawn.
CELLS_INDEX = ("CREATE INDEX IF NOT EXISTS measurements_cells "
               "ON measurements (run_id, source, destination, value, expected, status)")
QUERY_SECONDS = 60  # a backstop: runs and measurements must be plain tables, so reads are linear
MAX_RAW = 1 << 20  # a measurement's raw tool output: iperf3's JSON is tens of kB
MAX_HEALTH = 1 << 14  # two ends' health as JSON: a few hundred bytes
COLUMNS = ("source", "destination", "plane", "metric", "value", "unit", "expected", "status", "raw", "rail",
           "health", "reason", "attempts")


class Measurement(Frozen):
    source: str
    destination: str
    plane: str
    metric: str  # throughput
    value: float
    unit: str  # Gb/s
    expected: float | None = None
    status: str  # ok | inconclusive (an end was saturated: see reason) | low | failed
    raw: str = ""
    rail: int | None = None  # the rail measured (rail pattern); None for the plane as a whole
    health: tuple[EndHealth, ...] = ()  # each end's CPU over the measurement's window
    reason: str | None = None  # why the status: which end was saturated, by which figure
    attempts: int = 1  # measured this many times (a retry of an inconclusive pair counts)

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
    plane: str
    measurements: int
    flagged: int  # low or failed
    inconclusive: int = 0


@dataclass(frozen=True)
class CellColumns:
    """A run's pair measurements as columns, only what a matrix needs, packed so that 2 million of
    them cross from SQLite in C: `codes` holds one integer a measurement, separated by spaces, the
    % of expected times PERCENT_SCALE (-1: no expectation) times 256 plus the code point of the
    status's first letter (cell_code)."""

    sources: list[str]
    destinations: list[str]
    codes: str


PERCENT_SCALE = 10_000  # percent to 1e-4: far finer than the whole percent a cell shows


def cell_code(percent: float | None, status: str) -> int:
    """One measurement as CellColumns packs it (the SQL in load_cells computes the same)."""
    scaled = -1 if percent is None or not percent >= 0 else round(percent * PERCENT_SCALE)
    return scaled * 256 + (ord(status[0]) if status else 0)


HEALTH = TypeAdapter(tuple[EndHealth, ...])


def _column(name: str) -> str:
    """A column as read: text cut to a bound (a crafted row of 400 MB is not loaded whole)."""
    return {"raw": f"substr(raw, 1, {MAX_RAW})", "health": f"substr(health, 1, {MAX_HEALTH})",
            "reason": "substr(reason, 1, 1024)", "value": "value", "expected": "expected", "rail": "rail",
            "attempts": "attempts"}.get(name, f"substr({name}, 1, 256)")


def default_db(environ: dict[str, str] | None = None) -> Path:
    """The calling user's database: state (history that survives, but not a document to keep) in
    $XDG_STATE_HOME, ~/.local/state by default (XDG base directories)."""
    env = os.environ if environ is None else environ
    state = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME", "").startswith("/") else (
        Path.home() / ".local" / "state")
    return state / "gpunet" / "bench.sqlite"


def _open(path: Path) -> sqlite3.Connection:
    """For writing: the database, made (with its directory) when missing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        db = sqlite3.connect(path)
        db.executescript(SCHEMA)
        present = {row[1] for row in db.execute("PRAGMA table_info(measurements)")}
        for name, kind in ADDED_COLUMNS.items():  # a database from before rails or health
            if name not in present:
                db.execute(f"ALTER TABLE measurements ADD COLUMN {name} {kind}")
        db.execute(CELLS_INDEX)
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
    """Insert each measurement; a retry (attempts > 1) replaces the run's inconclusive row of the
    same pair instead, so a run keeps one row a pair."""
    with closing(_open(path)) as db, db:
        added = [m for m in measurements if m.attempts == 1 or not _replace(db, run_id, m)]
        db.executemany(f"INSERT INTO measurements (run_id, {', '.join(COLUMNS)}) VALUES (?{', ?' * len(COLUMNS)})",
                       ((run_id, *_row(m)) for m in added))


def _row(m: Measurement) -> tuple[object, ...]:
    return tuple(HEALTH.dump_json(m.health).decode() if c == "health" else getattr(m, c) for c in COLUMNS)


def _replace(db: sqlite3.Connection, run_id: int, m: Measurement) -> bool:
    found = db.execute("SELECT rowid FROM measurements WHERE run_id = ? AND source = ? AND destination = ? "
                       "AND plane = ? AND metric = ? AND rail IS ? AND status = 'inconclusive' LIMIT 1",
                       (run_id, m.source, m.destination, m.plane, m.metric, m.rail)).fetchone()
    if found is not None:
        db.execute(f"UPDATE measurements SET {', '.join(f'{c} = ?' for c in COLUMNS)} WHERE rowid = ?",
                   (*_row(m), found[0]))
    return found is not None


def history(path: Path, limit: int = 20) -> list[RunSummary]:
    with _reading(path) as db:
        rows = db.execute(
            "SELECT r.id, substr(r.started, 1, 64), substr(r.tool, 1, 64), substr(r.pattern, 1, 64), "
            "substr(r.arguments, 1, 1024), COUNT(m.run_id), SUM(m.status IN ('low', 'failed')), "
            "SUM(m.status = 'inconclusive') FROM runs r "
            "LEFT JOIN measurements m ON m.run_id = r.id GROUP BY r.id ORDER BY r.id DESC LIMIT ?", (limit,)).fetchall()
        return [RunSummary(id=r[0], started=r[1], tool=r[2], pattern=r[3], plane=_plane(r[4]), measurements=r[5],
                           flagged=r[6] or 0, inconclusive=r[7] or 0) for r in rows]


def _plane(arguments: object) -> str:
    """The plane a run measured, as `bench run` records it in the run's arguments (plane=compute)."""
    found = re.search(r"(?:^| )plane=(\S+)", arguments) if isinstance(arguments, str) else None
    return found.group(1) if found else ""


def measurements(path: Path, run_id: int) -> list[Measurement]:
    """Every measurement of a run, whole (raw output and health included)."""
    with _reading(path) as db:
        present = {row[1] for row in db.execute("PRAGMA table_info(measurements)")}
        # A database from before rails or health: those columns read as NULL.
        selected = ", ".join(_column(c) if c in present else f"NULL AS {c}" for c in COLUMNS)
        rows = db.execute(f"SELECT {selected} FROM measurements WHERE run_id = ?", (run_id,)).fetchall()
        return [_measurement(row) for row in rows]


def _measurement(row: Sequence[object]) -> Measurement:
    fields = dict(zip(COLUMNS, row, strict=True))
    health = fields["health"]
    return Measurement.model_validate(fields | {"attempts": fields["attempts"] or 1,
                                                "health": HEALTH.validate_json(health) if isinstance(health, str)
                                                else ()})


def worst(path: Path, run_id: int, limit: int) -> tuple[list[Measurement], dict[str, int]]:
    """The run's `limit` worst measurements (not ok first, then the lowest % of expected) and the
    count of each status, without loading the rest."""
    with _reading(path) as db:
        present = {row[1] for row in db.execute("PRAGMA table_info(measurements)")}
        selected = ", ".join(_column(c) if c in present else f"NULL AS {c}" for c in COLUMNS)
        rows = db.execute(f"SELECT {selected} FROM measurements WHERE run_id = ? ORDER BY status = 'ok', "
                          "CASE WHEN expected > 0 THEN value / expected ELSE 0 END LIMIT ?", (run_id, limit)).fetchall()
        counts = db.execute("SELECT substr(status, 1, 64), COUNT(*) FROM measurements WHERE run_id = ? "
                            "GROUP BY status", (run_id,)).fetchall()
        return [_measurement(row) for row in rows], dict(counts)


def load_cells(path: Path, run_id: int) -> CellColumns:
    """A run's measurements as matrix cells (CellColumns), read through the cells index, one row a
    source (names and codes of a source's rows aggregated together, so they line up whatever order
    SQLite reads them in). A row that does not fit (a NULL, a line break in a name, a rate beyond 64
    bits) breaks a count and is refused; SQLite's limit on a string (1 GB) bounds a crafted row."""
    code = (f"(CASE WHEN expected > 0 AND value >= 0 THEN CAST(round({PERCENT_SCALE} * 100.0 * value / expected) "
            "AS INTEGER) ELSE -1 END * 256 + unicode(status))")
    with _reading(path) as db:
        groups = db.execute(f"SELECT source, COUNT(*), group_concat(destination, char(10)), group_concat({code}, ' ') "
                            "FROM measurements WHERE run_id = ? GROUP BY source", (run_id,)).fetchall()
    sources = [name for name, count, _, _ in groups for _ in range(count)]
    destinations = "\n".join(names for _, _, names, _ in groups).split("\n") if groups else []
    if len(destinations) != len(sources) or not all(isinstance(name, str) and isinstance(codes, str)
                                                     for name, _, _, codes in groups):
        raise UsageError(f"{path}: run {run_id} has rows gpunet did not write (a line break in a node name, "
                         "or a NULL)")
    return CellColumns(sources=sources, destinations=destinations, codes=" ".join(codes for *_, codes in groups))


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
