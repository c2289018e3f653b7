"""Time `gpunet doctor` on a lab server (root): the whole command minus its sampling interval,
with and without --peers, median of --runs; and its start-up alone (`gpunet doctor --help`:
Python and the imports). Target: under 1 s plus the interval, --peers included (issue 15).

    sudo python benchmarks/doctor_time.py [--runs 5] [--interval 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gpunet.api import plan_spec
from gpunet.lab.build import lab_down, lab_up, node_argv
from gpunet.lab.state import lab_dir

SPEC = Path(__file__).parent.parent / "tests" / "fixtures" / "lab" / "small.yaml"
LAB = "bd"
TARGET_S = 1.0


def one(interval: float, mode: str) -> float:
    argv = [sys.executable, "-m", "gpunet", "doctor", "--plan", str(lab_dir(LAB) / "plan.json"), "--node", "gpu1",
            "--interval", str(interval), "--json", *(["--peers"] if mode == "peers" else [])]
    if mode == "start-up":
        argv, interval = [sys.executable, "-m", "gpunet", "doctor", "--help"], 0
    start = time.perf_counter()
    done = subprocess.run(node_argv(LAB, "gpu1", argv), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"doctor failed: {done.stderr}")
    return elapsed - interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the lab needs root: sudo python benchmarks/doctor_time.py")
    try:
        lab_up(plan_spec(SPEC), LAB)
        results = {mode: statistics.median(one(args.interval, mode) for _ in range(args.runs))
                   for mode in ("start-up", "local", "peers")}
    finally:
        lab_down(LAB)
    summary = {"runs": args.runs, "interval_s": args.interval, "seconds_beyond_interval": results,
               "target_s": TARGET_S, "met": results["peers"] < TARGET_S}
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    print(f"start-up (gpunet doctor --help): {results['start-up']:.2f} s (median of {args.runs})")
    for mode in ("local", "peers"):
        print(f"doctor {'--peers ' if mode == 'peers' else ''}on a lab server: {results[mode]:.2f} s beyond the "
              f"{args.interval:g} s interval (median of {args.runs})")
    print(f"target < {TARGET_S:g} s + interval: {'met' if summary['met'] else 'MISSED'}")


if __name__ == "__main__":
    main()
