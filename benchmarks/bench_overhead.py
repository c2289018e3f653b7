"""What gpunet's bench costs over bare iperf3, in a lab (root).

1. One pair (gpu1 -> gpu2, under one leaf), measured alternately through gpunet
   (`bench.run.measure_pair`: a one-off server, the client through the lab's runner, the JSON
   parsed and judged) and by the same iperf3 commands typed by hand, --runs times each: the ratio
   of the median received rates (gpunet / bare; >= 0.97 expected: gpunet adds no traffic).
2. The 28 pairs of 8 servers: all-pairs in 7 rounds of 4 concurrent pairs against the same pairs
   one after the other: the ratio of wall times (all-pairs / one by one), and the all-pairs run's
   worst and median % of expected (cross-leaf rounds fill a leaf's uplinks exactly).

    sudo python benchmarks/bench_overhead.py [--runs 5] [--duration 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from gpunet.api import plan_spec
from gpunet.bench.iperf3 import parse_iperf3_json
from gpunet.bench.run import BenchSetup, measure_pair, pair_commands, run_rounds
from gpunet.bench.schedule import all_pair_rounds
from gpunet.lab.build import lab_down, lab_up, node_argv
from gpunet.lab.state import lab_dir, read_state
from gpunet.model.io import read_plan

SPEC = Path(__file__).parent.parent / "tests" / "fixtures" / "lab" / "small.yaml"
LAB = "bo"
PAIR = ("gpu1", "gpu2")


def bare_pair(setup: BenchSetup) -> float:
    """The commands gpunet would run, run by hand: server, a moment, client, parse."""
    commands = pair_commands(setup, PAIR)
    server = subprocess.Popen(node_argv(LAB, PAIR[1], commands.server), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        client = subprocess.run(node_argv(LAB, PAIR[0], commands.client), capture_output=True, text=True,
                                timeout=setup.seconds + 60, check=True)
    finally:
        server.wait(timeout=30)
    return parse_iperf3_json(client.stdout).received_gbps


def one_pair(setup: BenchSetup, runs: int) -> dict[str, float]:
    through, bare = [], []
    for _ in range(runs):
        through.append(measure_pair(setup, PAIR).value)
        bare.append(bare_pair(setup))
    medians = {"gpunet_gbps": statistics.median(through), "bare_gbps": statistics.median(bare)}
    return medians | {"ratio": medians["gpunet_gbps"] / medians["bare_gbps"]}


def all_pairs_vs_one_by_one(setup: BenchSetup) -> dict[str, float]:
    rounds = all_pair_rounds([f"gpu{i}" for i in range(1, 9)])
    start = time.perf_counter()
    measured = run_rounds(setup, rounds)
    concurrent = time.perf_counter() - start
    percents = sorted(m.percent_of_expected or 0.0 for m in measured)
    start = time.perf_counter()
    run_rounds(setup, [[pair] for round_ in rounds for pair in round_])
    sequential = time.perf_counter() - start
    return {"all_pairs_s": concurrent, "one_by_one_s": sequential, "ratio": concurrent / sequential,
            "pairs": sum(len(r) for r in rounds), "rounds": len(rounds), "worst_pct": percents[0],
            "median_pct": statistics.median(percents), "flagged": sum(m.status != "ok" for m in measured)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the lab needs root: sudo python benchmarks/bench_overhead.py")
    try:
        lab_up(plan_spec(SPEC), LAB)
        state = read_state(LAB)
        setup = BenchSetup(plan=read_plan(lab_dir(LAB) / "plan.json"), on_node=lambda n, c: node_argv(LAB, n, c),
                           seconds=args.duration, scale=state.scale_mbit_per_gbit if state else None)
        summary = {"one_pair": one_pair(setup, args.runs), "all_pairs": all_pairs_vs_one_by_one(setup),
                   "runs": args.runs, "duration_s": args.duration}
    finally:
        lab_down(LAB)
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    pair, every = summary["one_pair"], summary["all_pairs"]
    print(f"one pair {PAIR[0]} -> {PAIR[1]}, median of {args.runs}: gpunet {pair['gpunet_gbps'] * 1000:.1f} Mbit/s, "
          f"bare iperf3 {pair['bare_gbps'] * 1000:.1f} Mbit/s, ratio {pair['ratio']:.3f} (>= 0.97 expected)")
    print(f"{every['pairs']:.0f} pairs: all-pairs ({every['rounds']:.0f} rounds) {every['all_pairs_s']:.1f} s, "
          f"one by one {every['one_by_one_s']:.1f} s, ratio {every['ratio']:.2f}")
    print(f"all-pairs, % of expected: worst {every['worst_pct']:.1f}, median {every['median_pct']:.1f}, "
          f"{every['flagged']:.0f} of {every['pairs']:.0f} flagged (under 85 %)")


if __name__ == "__main__":
    main()
