"""How big the bench database grows over a year of nightly regular runs, and how long the
latest-per-class view (what the exporter and `bench baseline check` read) takes to load.

A synthetic rail-optimized cluster: NODES nodes with 8 rails, 32 nodes under each rail leaf (a
scalable unit is 8 leaves), SPINES spines every leaf reaches. Its fabric cover is what `bench run`
measures (every NIC in a pair under its leaf, every two leaves crossed once); the schedule runs one
seventh of it a night (`--period week`, one run a night), so every night stores that many rows,
each with its aggregates per pair class, rail and leaf–spine group. Raw outputs (a synthetic
iperf3 -J of 32 streams over 3 s, zlib-compressed as `bench run` stores it) and each end's health
and counters are kept for --keep-days; older rows are written as `bench prune` leaves them, and one
real `bench prune` runs at the end. Rows are written straight to SQLite in batches (the same
columns `bench run` writes), not measured.

Prints the file's size and the median of 3 loads of the latest-per-class view (and of the
baseline check over it).

    python benchmarks/bench_history.py            # 200 nodes, a year: well under a minute
    python benchmarks/bench_history.py --full     # 2 000 nodes, a year: minutes, some GB of disk
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from gpunet.api.bench_regular import check_baseline, prune, set_baseline
from gpunet.bench.aggregate import CLASS_KIND, GROUP_KIND, RAIL_KIND, Aggregate
from gpunet.bench.history import latest, save_aggregates
from gpunet.bench.store import WRITTEN, cell_code, writing

RAILS, PER_LEAF, STREAMS = 8, 32, 32
VARIANTS = 64  # distinct raw outputs (compressed once each)


def raw_variant(rng: random.Random) -> bytes:
    """An iperf3 -J of STREAMS streams, 3 one-second intervals: the size and entropy of a real one."""
    def stream(i: int) -> dict[str, object]:
        bps = rng.uniform(2.5e9, 3.2e9)
        return {"socket": 5 + i, "start": 0, "end": 1.0, "seconds": 1.0, "bytes": int(bps / 8),
                "bits_per_second": bps, "retransmits": rng.randint(0, 40), "snd_cwnd": rng.randint(1 << 20, 1 << 23),
                "rtt": rng.randint(30, 400), "rttvar": rng.randint(5, 90), "pmtu": 9000, "omitted": False}
    intervals = [{"streams": [stream(i) for i in range(STREAMS)], "sum": {"bits_per_second": rng.uniform(9e10, 1e11)}}
                 for _ in range(3)]
    end = {"streams": [{"sender": stream(i), "receiver": stream(i)} for i in range(STREAMS)],
           "sum_received": {"bits_per_second": rng.uniform(9e10, 1e11)},
           "cpu_utilization_percent": {"host_total": rng.uniform(20, 60), "remote_total": rng.uniform(20, 60)}}
    text = json.dumps({"start": {"version": "iperf 3.12", "test_start": {"num_streams": STREAMS}},
                       "intervals": intervals, "end": end}, indent=1)
    return zlib.compress(text.encode(), 6)


HEALTH = json.dumps([{"node": "gpu0001", "role": "client", "seconds": 4.0, "cpu_pressure": 0.01, "busy": 0.21,
                      "steal": 0.0, "cpus": 128, "tool_cpu": 34.5, "tool_cpu_limit": 95.0, "unreadable": None},
                     {"node": "gpu0002", "role": "server", "seconds": 4.0, "cpu_pressure": 0.0, "busy": 0.19,
                      "steal": 0.0, "cpus": 128, "tool_cpu": 51.0, "tool_cpu_limit": 95.0, "unreadable": None}])
COUNTERS = json.dumps([{"node": "gpu0001", "role": "client", "growth": {"ens1np0:rx_pause": 0}, "unreadable": None},
                       {"node": "gpu0002", "role": "server", "growth": {"ens1np0:rx_pause": 0}, "unreadable": None}])


def cover(nodes: int) -> list[tuple[str, int, str, int, str, int, int]]:
    """(source, rail, destination, to_rail, path, leaf a, leaf b) of the fabric cover, by class."""
    leaves = [(unit, rail) for unit in range(-(-nodes // PER_LEAF)) for rail in range(RAILS)]
    index = {leaf: i for i, leaf in enumerate(leaves)}
    pairs = []
    for unit, rail in leaves:
        members = [n for n in range(unit * PER_LEAF, min(nodes, (unit + 1) * PER_LEAF))]
        leaf = index[unit, rail]
        pairs += [(f"gpu{a:04d}", rail, f"gpu{b:04d}", rail, "same-leaf", leaf, leaf)
                  for a, b in zip(members[::2], members[1::2], strict=False)]
    for i, (unit_a, rail_a) in enumerate(leaves):
        for j in range(i + 1, len(leaves)):
            unit_b, rail_b = leaves[j]
            a, b = unit_a * PER_LEAF + (j % PER_LEAF), unit_b * PER_LEAF + (i % PER_LEAF)
            if a != b and a < nodes and b < nodes:
                pairs.append((f"gpu{a:04d}", rail_a, f"gpu{b:04d}", rail_b, "cross-leaf", i, j))
    return sorted(pairs, key=lambda p: (p[4], p[1]))


def night_rows(pairs: list[tuple[str, int, str, int, str, int, int]], run_id: int, keep_raw: bool,
               rng: random.Random, raws: list[bytes]) -> Iterator[tuple[object, ...]]:
    for source, rail, destination, to_rail, path, _, _ in pairs:
        status = rng.choices(["ok", "low", "inconclusive"], [9950, 20, 30])[0]
        value = 70.0 if status == "low" else rng.gauss(96.0, 1.5)
        values = {"source": source, "destination": destination, "plane": "compute", "metric": "throughput",
                  "value": value, "unit": "Gb/s", "expected": 100.0, "status": status,
                  "raw": rng.choice(raws) if keep_raw else "", "rail": rail,
                  "health": HEALTH if keep_raw else None, "reason": "client gpu0001: ..." if status != "ok" else None,
                  "attempts": 1, "counters": COUNTERS if keep_raw else None, "to_rail": None if to_rail == rail
                  else to_rail, "path": path, "cell": cell_code(value, status)}
        yield (run_id, *(values[c] for c in WRITTEN))


def night_aggregates(pairs: list[tuple[str, int, str, int, str, int, int]], spines: int) -> list[Aggregate]:
    """What `bench run` folds a night into: its classes, rails, and leaf–spine groups crossed."""
    classes = sorted({(p[4], p[1]) for p in pairs})
    rails = sorted({r for p in pairs for r in (p[1], p[3])})
    leaves = sorted({leaf for p in pairs if p[4] == "cross-leaf" for leaf in p[5:]})

    def made(kind: str, **key: object) -> Aggregate:
        return Aggregate(kind=kind, plane="compute", metric="throughput", pairs=40, judged=39, inconclusive=1,
                         flagged=0, median_value=96.0, median_percent=96.0, **key)  # type: ignore[arg-type]
    return ([made(CLASS_KIND, path=path, rail=rail) for path, rail in classes]
            + [made(RAIL_KIND, rail=rail) for rail in rails]
            + [made(GROUP_KIND, leaf=f"leaf{leaf:04d}", spine=f"spine{s:02d}") for leaf in leaves
               for s in range(spines)])


def simulate(db: Path, nodes: int, days: int, keep_days: int, spines: int) -> int:
    """A year of nights into db, the last one today; the number of measurement rows."""
    first = datetime.now(UTC).replace(hour=1, minute=0, second=0, microsecond=0) - timedelta(days=days - 1)
    rng = random.Random(1)
    raws = [raw_variant(rng) for _ in range(VARIANTS)]
    pairs = cover(nodes)
    per_night = -(-len(pairs) // 7)
    rows = 0
    for night in range(days):
        started = (first + timedelta(days=night)).isoformat(timespec="seconds")
        part = pairs[(night % 7) * per_night:(night % 7 + 1) * per_night]
        with closing(writing(db)) as connection, connection:
            run_id = connection.execute("INSERT INTO runs (started, plan_hash, tool, pattern, arguments) VALUES "
                                        "(?, 'synthetic', 'iperf3', 'fabric', ?)",
                                        (started, f"plane=compute slice={night % 7 + 1}/7 slice_size=class")).lastrowid
            connection.executemany(f"INSERT INTO measurements (run_id, {', '.join(WRITTEN)}) VALUES "
                                   f"(?{', ?' * len(WRITTEN)})",
                                   night_rows(part, int(run_id or 0), night >= days - keep_days - 1, rng, raws))
        save_aggregates(db, int(run_id or 0), night_aggregates(part, spines))
        rows += len(part)
    return rows


def median_seconds(step: Callable[[], object], runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--keep-days", type=int, default=14, help="raw outputs kept this long (bench prune)")
    parser.add_argument("--spines", type=int, default=16, help="spines each leaf reaches")
    parser.add_argument("--full", action="store_true", help="2 000 nodes (minutes; several GB in $TMPDIR)")
    parser.add_argument("--dir", type=Path, default=None, help="where the database goes (default: a temporary one)")
    args = parser.parse_args()
    nodes = 2000 if args.full else args.nodes
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        db = Path(tmp) / "bench.sqlite"
        start = time.perf_counter()
        rows = simulate(db, nodes, args.days, args.keep_days, args.spines)
        written = time.perf_counter() - start
        set_baseline(db, [1, 2, 3, 4, 5, 6, 7])
        pruned = time.perf_counter()
        prune(db, args.keep_days)  # the night past the retention: the rest was written as prune leaves it
        pruned = time.perf_counter() - pruned
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
        view = median_seconds(lambda: latest(db))
        judged = median_seconds(lambda: check_baseline(db))
        found, _ = latest(db)
        print(f"{nodes} nodes, {len(cover(nodes))} pairs in the cover, {args.days} nightly runs of a seventh: {rows} "
              f"measurements, {len(found)} keys in the latest view; written in {written:.0f} s, prune {pruned:.0f} s")
        print(f"database {size / 1e9:.2f} GB (raw outputs kept {args.keep_days} days); latest-per-class view "
              f"{view:.2f} s, baseline check {judged:.2f} s (medians of 3; load average {os.getloadavg()[0]:.1f})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
