"""How fast, and in how little memory, gpunet refuses inputs built to exhaust it.

Each case runs `python -m gpunet ...` in a fresh process (as a user would) and reports the wall
time and the process's peak resident memory (ru_maxrss, read at exit by a small wrapper), beside
the same for a valid spec, so the cost of refusing is seen against Python's own start-up:

* alias bomb:    a 9-level "billion laughs" YAML (9^9 values once expanded) given to `validate`
                 and as `bench compare --rules`;
* 10M nodes:     a spec whose group is `node[1-10000000]`, and `fleet run 'node[1-10000000]'`;
* 50 MB spec:    a spec file of 50 MB of comments;
* deep nesting:  5 000 nested flow sequences.

The issue's target: each refused in under 2 s and under 200 MB, with a message naming the limit.
Medians of --runs runs (default 3).

Usage::

    python benchmarks/input_limits.py
    python benchmarks/input_limits.py --runs 5 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRAPPER = ("import atexit, resource, sys\n"
           "atexit.register(lambda: print(f'MAXRSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', "
           "file=sys.stderr))\n"
           "from gpunet.cli.main import app\n"
           "sys.argv = ['gpunet', *sys.argv[1:]]\n"
           "app()\n")
TARGET_S, TARGET_MB = 2.0, 200.0


def write_inputs(directory: Path) -> dict[str, list[str]]:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    (directory / "bomb.yaml").write_text("\n".join(lines) + "\n")
    example = (Path(__file__).resolve().parents[1] / "src/gpunet/spec/examples/one-server.yaml").read_text()
    (directory / "valid.yaml").write_text(example)
    (directory / "ten-million.yaml").write_text(example.replace("nodes: gpu01", 'nodes: "node[1-10000000]"'))
    with (directory / "big.yaml").open("w") as handle:
        handle.writelines(["# " + "x" * 77 + "\n"] * (50 * 1024 * 1024 // 80))
    (directory / "deep.yaml").write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    return {
        "valid spec (reference)": ["validate", str(directory / "valid.yaml")],
        "alias bomb: validate": ["validate", str(directory / "bomb.yaml")],
        "alias bomb: bench compare --rules": ["bench", "compare", "1", "2", "--db", str(directory / "none.sqlite"),
                                              "--rules", str(directory / "bomb.yaml")],
        "10M nodes: validate": ["validate", str(directory / "ten-million.yaml")],
        "10M nodes: fleet run": ["fleet", "run", "node[1-10000000]", "--", "true"],
        "50 MB spec: validate": ["validate", str(directory / "big.yaml")],
        "5000-deep nesting: validate": ["validate", str(directory / "deep.yaml")],
    }


def measure(args: list[str]) -> tuple[float, float, int, str]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=300,
                          check=False)
    seconds = time.monotonic() - start
    rss_kb = next((int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("MAXRSS")), 0)
    message = next((line for line in done.stderr.splitlines() if line.startswith("error")), "")
    return seconds, rss_kb / 1024, done.returncode, message


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpunet-limits-") as tmp:
        for name, args in write_inputs(Path(tmp)).items():
            runs = [measure(args) for _ in range(options.runs)]
            rows.append({"case": name, "seconds": statistics.median(r[0] for r in runs),
                         "peak_mb": statistics.median(r[1] for r in runs), "exit": runs[0][2],
                         "message": runs[0][3][:160]})
    if options.json:
        print(json.dumps(rows, indent=1))
    else:
        for row in rows:
            print(f"{row['case']:<36} exit {row['exit']}  {row['seconds']:5.2f} s  {row['peak_mb']:6.1f} MB  "
                  f"{row['message']}")
    bombs = [r for r in rows if "reference" not in r["case"]]
    met = all(r["exit"] == 2 and r["seconds"] < TARGET_S and r["peak_mb"] < TARGET_MB for r in bombs)
    print(f"target (each refused with exit 2 in < {TARGET_S:g} s and < {TARGET_MB:g} MB): {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
