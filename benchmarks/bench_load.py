"""How long `gpunet bench show RUN --png` takes to load and draw a 2 000-node all-pairs run.

A synthetic run in a temporary SQLite file: every pair of 2 000 nodes once (1 999 000 measurements,
as all-pairs stores them), values around 97 % of expected with a few low, failed and inconclusive
pairs. The raw tool output of each row is a stand-in of 200 bytes (a real iperf3 -J is tens of kB,
which the old path read too and the new one never touches).

Prints the median of 3 of load + draw by the cells path (load_cells, grid_of, write_png), and of
--old-runs runs of the whole-row path `bench show` used before (load_run: every Measurement
validated, raw and health included; percent_matrix in Python), with their ratio. The old figure
itself (a 40-inch, 16.6-megapixel PNG) is not drawn: the old path's time is a lower bound.

    python benchmarks/bench_load.py [--nodes 2000] [--old-runs 1]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gpunet.bench.health import EndHealth
from gpunet.bench.heatmap import grid_of, percent_matrix, write_png
from gpunet.bench.store import Measurement, add_measurements, load_cells, load_run, start_run
from gpunet.model.base import bulk_objects

RAW = '{"start": {"version": "iperf 3.12"}, "end": {"sum_received": {"bits_per_second": 9.6e10}}}'.ljust(200)
BATCH = 100_000


def synthetic_run(db: Path, nodes: int, seed: int = 1) -> int:
    """All pairs of `nodes` nodes, stored in batches as `bench run` stores its rounds."""
    run = start_run(db, plan_hash="synthetic", tool="iperf3", pattern="all-pairs", arguments="plane=compute")
    batch: list[Measurement] = []
    for m in _pairs(nodes, random.Random(seed)):
        batch.append(m)
        if len(batch) == BATCH:
            add_measurements(db, run, batch)
            batch = []
    add_measurements(db, run, batch)
    return run


def _pairs(nodes: int, rng: random.Random) -> Iterator[Measurement]:
    names = [f"gpu{i:04d}" for i in range(1, nodes + 1)]
    ends = (EndHealth(node="gpu0001", role="client", seconds=4.0, cpu_pressure=0.01, busy=0.2, steal=0.0, cpus=64),)
    for a in range(nodes):
        for b in range(a + 1, nodes):
            value = rng.gauss(96.0, 1.5)
            status = rng.choices(["ok", "low", "failed", "inconclusive"], [9970, 15, 5, 10])[0]
            value = 0.0 if status == "failed" else 70.0 if status == "low" else value
            yield Measurement.model_construct(
                source=names[a], destination=names[b], plane="compute", metric="throughput", value=value,
                unit="Gb/s", expected=100.0, status=status, raw=RAW, rail=None, health=ends,
                reason="server gpu0002: ..." if status == "inconclusive" else None, attempts=1)


def cells_path(db: Path, run: int, png: Path) -> None:
    write_png(load_cells(db, run), png, f"run {run}")


def whole_rows_path(db: Path, run: int) -> None:
    _, results = load_run(db, run)
    percent_matrix(results)


def median_seconds(step: Callable[[], None], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of `runs` runs (CPU: what a shared machine's load does not inflate)."""
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--old-runs", type=int, default=1, help="runs of the whole-row path (0: skip)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, bulk_objects():
        db, png = Path(tmp) / "bench.sqlite", Path(tmp) / "heat.png"
        start = time.perf_counter()
        run = synthetic_run(db, args.nodes)
        print(f"{args.nodes} nodes, {args.nodes * (args.nodes - 1) // 2} measurements stored in "
              f"{time.perf_counter() - start:.0f} s ({db.stat().st_size / 1e6:.0f} MB)")
        grid_of(load_cells(db, run))  # numpy and matplotlib imported once, as a CLI run pays once
        new, new_cpu = median_seconds(lambda: cells_path(db, run, png), 3)
        print(f"cells path, load + draw: {new:.2f} s, CPU {new_cpu:.2f} s (median of 3; PNG "
              f"{png.stat().st_size / 1e6:.1f} MB; load average {os.getloadavg()[0]:.1f})")
        if args.old_runs:
            old, old_cpu = median_seconds(lambda: whole_rows_path(db, run), args.old_runs)
            print(f"whole-row path, load + matrix only: {old:.2f} s, CPU {old_cpu:.2f} s (median of "
                  f"{args.old_runs}); ratio {old / new:.0f}x, CPU {old_cpu / new_cpu:.0f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
