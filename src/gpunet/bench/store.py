"""Results in SQLite: one row per run, one per measurement (with its raw output)."""

from __future__ import annotations

import os
import re
import sqlite3
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from gpunet.bench.flow import EndCounters
from gpunet.bench.health import EndHealth
from gpunet.errors import UsageError
from gpunet.files.inputs import check_regular
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
    attempts INTEGER NOT NULL DEFAULT 1, cell INTEGER, counters TEXT, to_rail INTEGER, path TEXT
);
"""
# Columns added since the first schema, added to an older database when it is next written to.
ADDED_COLUMNS = {"rail": "INTEGER", "health": "TEXT", "reason": "TEXT", "attempts": "INTEGER NOT NULL DEFAULT 1",
                 "cell": "INTEGER", "counters": "TEXT", "to_rail": "INTEGER", "path": "TEXT"}
# A run's cells read from an index without touching the rows: raw outputs (tens of kB each, and
# the columns after them) stay on disk when a 2 000-node run's matrix is drawn. `cell` is the
# measurement as a matrix cell (cell_code), written with it: 2 million cells cost no arithmetic.
CELLS_INDEX = "CREATE INDEX IF NOT EXISTS measurements_cells ON measurements (run_id, source, destination, cell)"
QUERY_SECONDS = 60  # a backstop: runs and measurements must be plain tables, so reads are linear
MAX_RAW = 1 << 20  # a measurement's raw tool output: iperf3's JSON is tens of kB
MAX_HEALTH = 1 << 14  # two ends' health as JSON: a few hundred bytes
MAX_COUNTERS = 1 << 16  # two ends' counter growth as JSON
COLUMNS = ("source", "destination", "plane", "metric", "value", "unit", "expected", "status", "raw", "rail",
           "health", "reason", "attempts", "counters", "to_rail", "path")
WRITTEN = (*COLUMNS, "cell")


class Measurement(Frozen):
    source: str
    destination: str
    plane: str
    metric: str  # throughput
    value: float
    unit: str  # Gb/s
    expected: float | None = None
    status: str  # ok | inconclusive (an end was saturated) | congested (low, and the ends paused or got CNPs:
    # reason "flow control: ..." or "congestion: ...") | low | failed
    raw: str = ""
    rail: int | None = None  # the rail measured (the source's); None for the plane as a whole
    to_rail: int | None = None  # the destination's rail where it differs (a pair across rails, fabric pattern)
    path: str | None = None  # the path class in the Plan: same-leaf, cross-leaf, cross-pod (fabric pattern)
    health: tuple[EndHealth, ...] = ()  # each end's CPU over the measurement's window
    reason: str | None = None  # why the status: which end was saturated, by which figure
    attempts: int = 1  # measured this many times (a retry of an inconclusive pair counts)
    counters: tuple[EndCounters, ...] = ()  # each end's pause/ECN/CNP counter growth over the window

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
    congested: int = 0  # low with pause or CNP growth at an end


@dataclass(frozen=True)
class CellColumns:
    """A run's pair measurements as columns, only what a matrix needs, packed so that 2 million of
    them cross from SQLite in C. Row by row: the source (`sources[i]` for the next `runs[i]` rows),
    the destination, and in `codes` one integer a row, separated by spaces: the % of expected times
    PERCENT_SCALE (-1: no expectation) times 256 plus the code point of the status's first letter
    (cell_code)."""

    sources: list[str]
    runs: list[int]
    destinations: list[str]
    codes: str

    @property
    def count(self) -> int:
        return len(self.destinations)


PERCENT_SCALE = 10_000  # percent to 1e-4: far finer than the whole percent a cell shows
MAX_SCALED = 10**12  # 100 million %, beyond any measurement: 256 times it still fits SQLite's 64 bits
# cell_code in SQL, for rows written before the `cell` column.
CELL_SQL = (f"(CASE WHEN expected > 0 AND value >= 0 THEN min(CAST(round({PERCENT_SCALE} * 100.0 * value / "
            f"expected) AS INTEGER), {MAX_SCALED}) ELSE -1 END * 256 + (unicode(status) & 255))")


def cell_code(percent: float | None, status: str) -> int:
    """One measurement as CellColumns packs it (CELL_SQL computes the same)."""
    scaled = -1 if percent is None or not percent >= 0 else min(percent * PERCENT_SCALE, MAX_SCALED)
    return round(scaled) * 256 + (ord(status[0]) & 255 if status else 0)


HEALTH = TypeAdapter(tuple[EndHealth, ...])
COUNTERS = TypeAdapter(tuple[EndCounters, ...])


def _column(name: str) -> str:
    """A column as read: text cut to a bound (a crafted row of 400 MB is not loaded whole)."""
    # A BLOB's substr is its first bytes: a compressed raw is inflated from those.
    return {"raw": f"substr(raw, 1, {MAX_RAW})", "health": f"substr(health, 1, {MAX_HEALTH})",
            "counters": f"substr(counters, 1, {MAX_COUNTERS})",
            "reason": "substr(reason, 1, 1024)", "value": "value", "expected": "expected", "rail": "rail",
            "to_rail": "to_rail", "path": "substr(path, 1, 32)",
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
    if os.path.lexists(path):
        check_regular(path, "bench database")  # SQLite would block on a FIFO, or write through a device
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
    if not os.path.lexists(path):
        raise UsageError(f"no bench database at {path} (`gpunet bench run` creates it; --db names another)")
    check_regular(path, "bench database")
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
        db.executemany(f"INSERT INTO measurements (run_id, {', '.join(WRITTEN)}) VALUES (?{', ?' * len(WRITTEN)})",
                       ((run_id, *_row(m)) for m in added))


def _row(m: Measurement) -> tuple[object, ...]:
    """The values of WRITTEN for a measurement: the raw output zlib-compressed (a BLOB; iperf3's JSON
    shrinks 4 to 8 times), health and counters as JSON."""
    fields = (HEALTH.dump_json(m.health).decode() if c == "health" else COUNTERS.dump_json(m.counters).decode()
              if c == "counters" else compress_raw(m.raw) if c == "raw" else getattr(m, c) for c in COLUMNS)
    return (*fields, cell_code(m.percent_of_expected, m.status))


def compress_raw(raw: str) -> bytes | str:
    """Raw output as stored: compressed, the empty string as itself (a pruned or tool-less row)."""
    return zlib.compress(raw.encode(), 6) if raw else ""


def raw_text(stored: object) -> str:
    """Raw output as read: a compressed BLOB inflated to at most MAX_RAW bytes (a crafted one that
    would inflate to gigabytes stops there), text from before compression as it is."""
    if isinstance(stored, bytes):
        try:
            return zlib.decompressobj().decompress(stored, MAX_RAW).decode(errors="replace")
        except zlib.error:
            return "[gpunet] raw output unreadable (not zlib)"
    return stored if isinstance(stored, str) else ""


def _replace(db: sqlite3.Connection, run_id: int, m: Measurement) -> bool:
    found = db.execute("SELECT rowid FROM measurements WHERE run_id = ? AND source = ? AND destination = ? "
                       "AND plane = ? AND metric = ? AND rail IS ? AND to_rail IS ? "
                       "AND status = 'inconclusive' LIMIT 1",
                       (run_id, m.source, m.destination, m.plane, m.metric, m.rail, m.to_rail)).fetchone()
    if found is not None:
        db.execute(f"UPDATE measurements SET {', '.join(f'{c} = ?' for c in WRITTEN)} WHERE rowid = ?",
                   (*_row(m), found[0]))
    return found is not None


def history(path: Path, limit: int = 20) -> list[RunSummary]:
    with _reading(path) as db:
        rows = db.execute(
            "SELECT r.id, substr(r.started, 1, 64), substr(r.tool, 1, 64), substr(r.pattern, 1, 64), "
            "substr(r.arguments, 1, 1024), COUNT(m.run_id), SUM(m.status IN ('low', 'failed')), "
            "SUM(m.status = 'inconclusive'), SUM(m.status = 'congested') FROM runs r "
            "LEFT JOIN measurements m ON m.run_id = r.id GROUP BY r.id ORDER BY r.id DESC LIMIT ?", (limit,)).fetchall()
        return [RunSummary(id=r[0], started=r[1], tool=r[2], pattern=r[3], plane=_plane(r[4]), measurements=r[5],
                           flagged=r[6] or 0, inconclusive=r[7] or 0, congested=r[8] or 0) for r in rows]


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
    fields["raw"] = raw_text(fields["raw"])
    health, counters = fields["health"], fields["counters"]
    return Measurement.model_validate(fields | {"attempts": fields["attempts"] or 1,
                                                "health": HEALTH.validate_json(health) if isinstance(health, str)
                                                else (),
                                                "counters": COUNTERS.validate_json(counters)
                                                if isinstance(counters, str) else ()})


def worst(path: Path, run_id: int, limit: int) -> tuple[list[Measurement], dict[str, int]]:
    """The run's `limit` worst measurements (not ok first, then the lowest % of expected) and the
    count of each status, ranked on the cells index where every row has its code (a run of 2
    million rows is not read whole, nor its raw outputs), else on the rows."""
    with _reading(path) as db:
        present = {row[1] for row in db.execute("PRAGMA table_info(measurements)")}
        coded = "cell" in present and not db.execute("SELECT COUNT(*) - COUNT(cell) FROM measurements "
                                                     "WHERE run_id = ?", (run_id,)).fetchone()[0]
        order = ("(cell & 255) = 111, cell >> 8" if coded  # 111: the o of ok
                 else "status = 'ok', CASE WHEN expected > 0 THEN value / expected ELSE 0 END")
        rowids = [r[0] for r in db.execute(f"SELECT rowid FROM measurements WHERE run_id = ? ORDER BY {order} "
                                           "LIMIT ?", (run_id, limit))]
        selected = ", ".join(_column(c) if c in present else f"NULL AS {c}" for c in COLUMNS)
        rows = [db.execute(f"SELECT {selected} FROM measurements WHERE rowid = ?", (rowid,)).fetchone()
                for rowid in rowids]
        return [_measurement(row) for row in rows], _status_counts(db, run_id, coded)


def _status_counts(db: sqlite3.Connection, run_id: int, coded: bool) -> dict[str, int]:
    """How many measurements of each status: by the first letter in the cells index when coded."""
    if not coded:
        return dict(db.execute("SELECT substr(status, 1, 64), COUNT(*) FROM measurements WHERE run_id = ? "
                               "GROUP BY status", (run_id,)).fetchall())
    by_letter = {ord(status[0]): status for status in ("ok", "inconclusive", "congested", "low", "failed")}
    counts: dict[str, int] = {}
    for letter, count in db.execute("SELECT cell & 255, COUNT(*) FROM measurements WHERE run_id = ? "
                                    "GROUP BY cell & 255", (run_id,)):
        status = by_letter.get(letter, "other")
        counts[status] = counts.get(status, 0) + count
    return counts


def load_cells(path: Path, run_id: int) -> CellColumns:
    """A run's measurements as matrix cells (CellColumns), read through the cells index, one row a
    source (names and codes of a source's rows aggregated together, so they line up whatever order
    SQLite reads them in); rows written before `cell` existed are coded here from the table. A row
    that does not fit (a NULL, a line break in a name) breaks a count and is refused; SQLite's limit
    on a string (1 GB) bounds what a crafted row costs."""
    with _reading(path) as db:
        coded = "cell" in {row[1] for row in db.execute("PRAGMA table_info(measurements)")}
        groups = _cell_groups(db, run_id, "cell") if coded else []
        if not coded or any(cells != count for _, count, cells, *_ in groups):
            groups = _cell_groups(db, run_id, CELL_SQL)
    destinations = "\n".join(names for *_, names, _ in groups).split("\n") if groups else []
    if len(destinations) != sum(count for _, count, *_ in groups) or not all(
            isinstance(name, str) and isinstance(codes, str) for name, *_, codes in groups):
        raise UsageError(f"{path}: run {run_id} has rows gpunet did not write (a line break in a node name, "
                         "or a NULL)")
    return CellColumns(sources=[name for name, *_ in groups], runs=[count for _, count, *_ in groups],
                       destinations=destinations, codes=" ".join(codes for *_, codes in groups))


def _cell_groups(db: sqlite3.Connection, run_id: int, code: str) -> list[tuple[str, int, int, str, str]]:
    """Per source: its rows, its rows with a code, its destinations and their codes."""
    return db.execute(f"SELECT source, COUNT(*), COUNT({code}), group_concat(destination, char(10)), "
                      f"group_concat({code}, ' ') FROM measurements WHERE run_id = ? GROUP BY source",
                      (run_id,)).fetchall()


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


SLICE_ARGUMENT = re.compile(r"(?:^| )slice=([0-9]+)/([0-9]+) slice_size=(\S+)(?: |$)")


def last_slice(path: Path, plane: str, count: int, size: str) -> int | None:
    """The slice the latest run of this rotation (plane, N slices of this size) measured, as `bench
    run --slice` records it in the run's arguments; None before the first (or without a database)."""
    if not os.path.lexists(path):
        return None
    with _reading(path) as db:
        for (arguments,) in db.execute("SELECT substr(arguments, 1, 1024) FROM runs WHERE arguments LIKE "
                                       "'%slice=%' ORDER BY id DESC"):
            found = SLICE_ARGUMENT.search(arguments) if isinstance(arguments, str) else None
            if found and _plane(arguments) == plane and (int(found[2]), found[3]) == (count, size):
                return int(found[1])
    return None


def writing(path: Path) -> sqlite3.Connection:
    """The database opened for writing (bench/history.py's tables live in it too)."""
    return _open(path)


reading = _reading  # the database opened read-only, bounded as every reader here is
