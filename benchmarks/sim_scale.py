"""How long `gpunet sim` takes for a ring all-reduce over every node of a rail-optimized plan, from
256 nodes up to 12,500 (100,000 GPUs), and how the cost per simulated connection grows.

Each size runs in a process of its own: the plan is designed first (the spec of
benchmarks/plan_scale.py: management, rail-optimized NDR compute with 8 NICs a node, bonded RoCE
storage; not timed), then `simulate` runs a ring all-reduce of every GPU node (hash routing, 2
connections per peer and rail, 5 message sizes), once per run. Printed per size: the median
seconds, connections simulated, microseconds per connection, the process's peak memory (plan
included) and, against the smallest size, the per-connection cost ratio beside the n log n bound
log(F_large) / log(F_small). Targets: 12,500 nodes under 60 s and 8 GB; 1,024 nodes under 2 s.

Usage::

    python benchmarks/sim_scale.py [--sizes 256,1024,4096,12500] [--runs 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

from plan_scale import build_spec  # type: ignore[import-not-found]

from gpunet.design import design
from gpunet.sim import SimOptions, simulate

TARGETS = {12_500: 60.0, 1024: 2.0}
MEMORY_TARGET_GB = 8.0


def one_size(nodes: int, runs: int) -> dict[str, float]:
    """In this process: design, then simulate `runs` times (the plan is not timed)."""
    started = time.perf_counter()
    plan = design(build_spec(nodes))
    designed = time.perf_counter() - started
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    seconds = []
    report = None
    for _ in range(runs):
        start = time.perf_counter()
        report = simulate(plan, options=SimOptions())
        seconds.append(time.perf_counter() - start)
    assert report is not None
    connections = report.nodes * report.rails * report.connections * 2  # both rings: the job and the non-blocking one
    return {"nodes": nodes, "gpus": report.ranks, "seconds": statistics.median(seconds), "design_s": designed,
            "connections": connections, "busbw": report.busbw, "peak_busbw": report.peak_busbw,
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "before_sim_gb": before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="256,1024,4096,12500")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_size(args.one, args.runs)))
        return
    results = []
    for nodes in (int(s) for s in args.sizes.split(",")):
        runs = 1 if nodes > 4096 else args.runs
        done = subprocess.run([sys.executable, __file__, "--one", str(nodes), "--runs", str(runs)],
                              capture_output=True, text=True, check=True, env=os.environ)
        results.append(json.loads(done.stdout))
    smallest = results[0]
    for r in results:
        r["us_per_connection"] = r["seconds"] / r["connections"] * 1e6
        r["cost_ratio"] = r["us_per_connection"] / (smallest["seconds"] / smallest["connections"] * 1e6)
        r["nlogn_bound"] = math.log(r["connections"]) / math.log(smallest["connections"])
        r["target_s"] = TARGETS.get(r["nodes"])
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"results": results, "load": load}, indent=1))
        return
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'nodes':>7} {'GPUs':>8} {'sim s':>8} {'target':>7} {'connections':>12} {'us/conn':>8} "
          f"{'ratio':>6} {'nlogn':>6} {'peak GB':>8} {'busbw':>8} {'design s':>9}")
    for r in results:
        target = f"{r['target_s']:.0f}" if r["target_s"] else "-"
        print(f"{r['nodes']:>7,} {r['gpus']:>8,} {r['seconds']:>8.2f} {target:>7} {r['connections']:>12,} "
              f"{r['us_per_connection']:>8.2f} {r['cost_ratio']:>6.2f} {r['nlogn_bound']:>6.2f} {r['peak_gb']:>8.2f} "
              f"{r['busbw']:>8.1f} {r['design_s']:>9.1f}")
    met = all(r["seconds"] < r["target_s"] for r in results if r["target_s"])
    memory = all(r["peak_gb"] < MEMORY_TARGET_GB for r in results)
    growth = all(r["cost_ratio"] <= r["nlogn_bound"] for r in results)
    print(f"time targets {'met' if met else 'MISSED'}; memory under {MEMORY_TARGET_GB:g} GB "
          f"{'met' if memory else 'MISSED'}; per-connection cost within n log n {'yes' if growth else 'NO'}")


if __name__ == "__main__":
    main()
