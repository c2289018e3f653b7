"""`place` against random placements in seeded trials, on the built-in examples.

For each example (default `scalable-unit`, and `multi-unit-large`) and job size (32 and 256 nodes,
where the plan has that many GPU nodes; a size larger than the plan is reported as not run, since
`place` refuses it), each trial i (seeded with i) frees a random 40-90 % of the GPU nodes, places
the job with `place`, draws as many free nodes at random (ranks in name order, as Slurm lists them),
and simulates both: ring all-reduce of 8 GiB, hash routing with seed i, 2 connections per peer and
rail. Printed: the share of trials where the placed job's predicted busbw is at least the random
one's, the median busbw and spine share of both, and the seconds taken.

Usage::

    python benchmarks/place_trials.py [--trials 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from gpunet.design import design
from gpunet.place.trials import trials
from gpunet.sim import SimOptions
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec

EXAMPLES = ("scalable-unit", "multi-unit-large")
SIZES = (32, 256)
GiB = 1 << 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for name in EXAMPLES:
        plan = design(parse_spec(example_text(name), name)[0])
        gpus = sum(1 for n in plan.nodes if n.gpus)
        for count in SIZES:
            if count > gpus:
                rows.append({"example": name, "nodes": count, "run": False,
                             "why": f"the plan has {gpus} GPU nodes; place refuses a {count}-node job (exit 2)"})
                continue
            start = time.perf_counter()
            done = trials(plan, count, args.trials, SimOptions(sizes=(8 * GiB,)))
            rows.append({
                "example": name, "nodes": count, "run": True, "trials": len(done),
                "at_least_random": sum(t.chosen_busbw >= t.random_busbw * (1 - 1e-9) for t in done) / len(done),
                "chosen_busbw": statistics.median(t.chosen_busbw for t in done),
                "random_busbw": statistics.median(t.random_busbw for t in done),
                "chosen_spine_share": statistics.median(t.chosen_spine_share for t in done),
                "random_spine_share": statistics.median(t.random_spine_share for t in done),
                "worst_ratio": min(t.chosen_busbw / t.random_busbw for t in done if t.random_busbw),
                "seconds": time.perf_counter() - start,
            })
    if args.json:
        print(json.dumps({"rows": rows, "load": os.getloadavg()}, indent=1))
        return
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; {args.trials} trials per row")
    for r in rows:
        if not r["run"]:
            print(f"{r['example']:>17} {r['nodes']:>4} nodes: not run ({r['why']})")
            continue
        print(f"{r['example']:>17} {r['nodes']:>4} nodes: placed >= random in {r['at_least_random']:.0%}; busbw "
              f"{r['chosen_busbw']:.1f} vs {r['random_busbw']:.1f} GB/s (worst placed/random {r['worst_ratio']:.2f}); "
              f"spine share {r['chosen_spine_share']:.3f} vs {r['random_spine_share']:.3f}; {r['seconds']:.0f} s")


if __name__ == "__main__":
    main()
