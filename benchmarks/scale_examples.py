"""`gpunet validate` on every built-in scale example (million-gpu: 125,000 8-GPU servers), each in a
process of its own: the verdict, wall and CPU seconds, and the peak resident memory.

A scale example is a full design of a million GPUs (about a minute and 6 GB on 2 cores), so it is
checked here rather than in the test suite, which stays within its 10 minutes on 2 cores; the suite
checks the same spec's schema, cross-field checks and sizing (tests/spec/test_scale_example.py).
Exit 0 when every scale example validates, 1 otherwise.

Usage::

    python benchmarks/scale_examples.py
    python benchmarks/scale_examples.py --json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpunet.spec.examples import SCALE_EXAMPLES, example_text


def validate(name: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="gpunet-scale-") as folder:
        spec = Path(folder) / f"{name}.yaml"
        spec.write_text(example_text(name))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "gpunet", "validate", str(spec), "--json"],
                              capture_output=True, text=True, check=False)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    answer = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return {"example": name, "exit_code": done.returncode, "valid": answer.get("valid") is True,
            "wall_s": round(wall, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "peak_rss_gb": round(after.ru_maxrss / 1024 / 1024, 2),  # the largest child so far
            "error": "" if done.returncode == 0 else done.stderr.strip()[-300:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    results = [validate(name) for name in SCALE_EXAMPLES]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            verdict = "valid" if r["valid"] else f"REFUSED (exit {r['exit_code']}): {r['error']}"
            print(f"{r['example']}: {verdict}; wall {r['wall_s']} s, CPU {r['cpu_s']} s, "
                  f"peak RSS {r['peak_rss_gb']} GB")
    return 0 if all(r["valid"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
