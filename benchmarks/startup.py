"""How long `gpunet` takes to start: `gpunet --help` and `gpunet validate` of the built-in example
spec (the one `gpunet plan` designs when given none), each run --runs times as a fresh subprocess;
median, min and max of the wall-clock time, and PASS when its median is under 0.5 s (issue 24);
beside them the median CPU time, which a loaded machine stretches less. With --more, also the
help of the commands that live in modules of their own (`plan --help`, `doctor --help`, ...), for
information: no target.

Each command runs once first, unmeasured, with bytecode writing allowed (as an installed gpunet
runs, even where PYTHONDONTWRITEBYTECODE is set): the runs then time start-up, not compilation.
The machine's load shows in every number; run it on a quiet one and say the load beside them.

    python benchmarks/startup.py [--runs 10] [--more] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpunet.spec.examples import DEFAULT_EXAMPLE, example_text

TARGET_S = 0.5
INFORMATION = (["plan", "--help"], ["doctor", "--help"], ["lab", "--help"], ["compare", "--help"])


def seconds(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock seconds, and the CPU seconds of the child (user + system), which a loaded
    machine stretches less."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "gpunet", *argv], capture_output=True, text=True, env=env,
                          check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"gpunet {' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def measure(command: str, argv: list[str], runs: int, env: dict[str, str], *, target: bool) -> dict[str, object]:
    seconds(argv, env)  # the warm-up: writes any bytecode missing
    walls, cpus = zip(*(seconds(argv, env) for _ in range(runs)), strict=True)
    median = statistics.median(walls)
    return {"command": command, "target": target, "median_s": median, "min_s": min(walls), "max_s": max(walls),
            "cpu_median_s": statistics.median(cpus), "pass": median < TARGET_S}


def line(row: dict[str, object]) -> str:
    verdict = ("PASS" if row["pass"] else "FAIL") if row["target"] else "(no target)"
    return (f"  {row['command']:<40} median {row['median_s']:.3f} s  min {row['min_s']:.3f}  max {row['max_s']:.3f}  "
            f"(CPU {row['cpu_median_s']:.3f})  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--more", action="store_true", help="also the help of commands in their own modules")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / f"{DEFAULT_EXAMPLE}.yaml"
        spec.write_text(example_text(DEFAULT_EXAMPLE))
        rows = [measure("gpunet --help", ["--help"], args.runs, env, target=True),
                measure(f"gpunet validate <{DEFAULT_EXAMPLE}.yaml>", ["validate", str(spec)], args.runs, env,
                        target=True)]
        rows += [measure(" ".join(["gpunet", *argv]), argv, args.runs, env, target=False)
                 for argv in (INFORMATION if args.more else ())]
    met = all(r["pass"] for r in rows if r["target"])
    if args.json:
        print(json.dumps({"runs": args.runs, "target_s": TARGET_S, "load": os.getloadavg()[0], "commands": rows,
                          "met": met}, indent=1))
    else:
        print(f"{args.runs} runs each, load {os.getloadavg()[0]:.2f}; target: median under {TARGET_S} s")
        print("\n".join(line(row) for row in rows))
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
