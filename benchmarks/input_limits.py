"""How fast, and in how little memory, gpunet refuses inputs built to exhaust it.

Each case runs `python -m gpunet ...` in a fresh process (as a user would) and reports the wall
time and the process's peak resident memory (ru_maxrss, read at exit by a small wrapper), beside
the same for a valid spec, so the cost of refusing is seen against Python's own start-up:

* alias bomb:    a 9-level "billion laughs" YAML (9^9 values once expanded) given to `validate`
                 and as `bench compare --rules`;
* 10M nodes:     a spec whose group is `node[1-10000000]`, and `fleet run 'node[1-10000000]'`;
* 50 MB spec:    a spec file of 50 MB of comments;
* deep nesting:  5 000 nested flow sequences;
* every reader of a file or an answer (issue 22): `cabling check --lldp-dir` and `--ibnetdiscover`,
  `localize --ibqueryerrors` and `--before`, `plan --catalog`, a plan.json (`render`), a spec
  (`validate`), a bench database (`bench history --db`) and `localize --prometheus` (a local
  stand-in serving each answer), each given /dev/zero (an endless answer for Prometheus), a FIFO,
  100 MB, a 5 000-digit number, NUL bytes, 10 000-deep nesting and wrong JSON types.

The issue's target: each refused with exit 2 and one line, in under 2 s and under 200 MB. Medians
of --runs runs (default 3).

Usage::

    python benchmarks/input_limits.py
    python benchmarks/input_limits.py --runs 5 --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


DIGITS = "9" * 5000
DEEP = "[" * 10_000 + "]" * 10_000
BIG = 100 * 10**6
# What each kind of reader is given, beside /dev/zero, a FIFO and 100 MB: text for the text readers,
# JSON for the JSON readers (a neighbour table, a plan, a Prometheus answer).
TEXT = {"digits": f'Errors for 0x1 "a"\n   GUID 0x1 port 1: [SymbolErrorCounter == {DIGITS}]\nSwitch {DIGITS} "S-1"\n',
        "nul": 'Errors for 0x1 "a"\n\0\0\0\n', "deep": DEEP}
JSON_TYPES = {"digits": f'{{"lldp": {{"interface": [{{"eth0": {{"age": {DIGITS}}}}}]}}, "schema_version": {DIGITS}}}',
              "nul": '{"lldp": "\0"}\0', "deep": DEEP, "wrong-types": '{"lldp": 5, "schema_version": "one"}'}
ANSWERS = {"digits": '{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, '
                     f'"value": [{DIGITS}, "1"]}}]}}}}', "nul": '{"status": "success"}\0', "deep": DEEP,
           "no-data": '{"status": "success"}', "result-not-a-list": '{"status": "success", "data": '
           '{"resultType": "vector", "result": 5}}', "value-a-number": '{"status": "success", "data": {"resultType": '
           '"vector", "result": [{"metric": {"__name__": "ifInErrors"}, "value": [1, 5]}]}}',
           "metric-not-strings": '{"status": "success", "data": {"resultType": "vector", "result": [{"metric": '
           '{"instance": 5}, "value": [1, "5"]}]}}', "status-a-list": '{"status": ["success"]}'}


def hostile_files(directory: Path, kind: str) -> dict[str, Path]:
    """name -> a hostile file of that reader kind ("text" or "json"), named as that reader wants."""
    suffix = ".json" if kind == "json" else ".txt"
    made: dict[str, Path] = {}
    (directory / f"zero{suffix}").symlink_to("/dev/zero")
    made["/dev/zero"] = directory / f"zero{suffix}"
    os.mkfifo(directory / f"fifo{suffix}")
    made["FIFO"] = directory / f"fifo{suffix}"
    with (directory / f"big{suffix}").open("wb") as big:  # 100 MB that reads as zeros, written in no time
        big.truncate(BIG)
    made["100 MB"] = directory / f"big{suffix}"
    for name, text in (JSON_TYPES if kind == "json" else TEXT).items():
        (directory / f"{name}{suffix}").write_text(text)
        made[name] = directory / f"{name}{suffix}"
    return made


class _Answers(BaseHTTPRequestHandler):
    """/<case>/api/v1/query: ANSWERS[case]; /zero: an endless answer; /big: 100 MB."""

    def do_GET(self) -> None:
        case = self.path.split("/")[1]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        with contextlib.suppress(OSError):  # the client stops reading once it has its limit
            if case in ("zero", "big"):
                chunk, sent = b"0" * (1 << 20), 0
                while case == "zero" or sent < BIG:
                    self.wfile.write(chunk)
                    sent += len(chunk)
            else:
                self.wfile.write(ANSWERS[case].encode())

    def log_message(self, *args: object) -> None:
        del args


@contextlib.contextmanager
def prometheus_stand_in() -> Iterator[str]:
    """A local HTTP server (loopback only) answering as a hostile Prometheus would."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def reader_cases(directory: Path, prometheus: str) -> dict[str, list[str]]:
    """'reader: input' -> the command line; every reader of a file or an answer, every hostile input."""
    example = (Path(__file__).resolve().parents[1] / "src/gpunet/spec/examples/one-server.yaml").read_text()
    (directory / "spec.yaml").write_text(example)
    plan = directory / "plan" / "plan.json"
    subprocess.run([sys.executable, "-m", "gpunet", "plan", str(directory / "spec.yaml"), "-o", str(plan.parent)],
                   capture_output=True, check=True)
    good = directory / "good.txt"
    good.write_text("## Summary: 1 nodes checked, 0 bad nodes found\n")
    cases: dict[str, list[str]] = {}
    for kind, readers in (("text", TEXT_READERS), ("json", JSON_READERS)):
        for name, path in hostile_files(_fresh(directory / kind), kind).items():
            for reader, argv in readers.items():
                cases[f"{reader}: {name}"] = argv(path, plan, good, directory)
    for name in ("zero", "big", *ANSWERS):
        shown = {"zero": "endless", "big": "100 MB"}.get(name, name)
        cases[f"--prometheus: {shown}"] = ["localize", "--prometheus", f"{prometheus}/{name}", "--plan", str(plan)]
    return cases


def _fresh(directory: Path) -> Path:
    directory.mkdir()
    return directory


def _lldp_dir(path: Path, plan: Path, good: Path, directory: Path) -> list[str]:
    del good
    holder = directory / f"lldp-{path.stem}"
    holder.mkdir()
    (holder / "gpu01.json").symlink_to(path)
    return ["cabling", "check", "--plan", str(plan), "--lldp-dir", str(holder)]


TEXT_READERS = {
    "--ibnetdiscover": lambda path, plan, good, directory: ["cabling", "check", "--plan", str(plan),
                                                            "--ibnetdiscover", str(path)],
    "--ibqueryerrors": lambda path, plan, good, directory: ["localize", "--ibqueryerrors", str(path), "--plan",
                                                            str(plan)],
    "--before": lambda path, plan, good, directory: ["localize", "--ibqueryerrors", str(good), "--before", str(path),
                                                     "--plan", str(plan)],
    "spec": lambda path, plan, good, directory: ["validate", str(path)],
    "--catalog": lambda path, plan, good, directory: ["plan", str(directory / "spec.yaml"), "-o",
                                                      str(directory / "out"), "--catalog", str(path)],
    "bench --db": lambda path, plan, good, directory: ["bench", "history", "--db", str(path)],
}
JSON_READERS = {
    "--lldp-dir": _lldp_dir,
    "plan.json": lambda path, plan, good, directory: ["render", str(path), "-o", str(directory / "render")],
}


def measure(args: list[str]) -> tuple[float, float, int, str]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, timeout=300,
                          check=False)
    seconds = time.monotonic() - start
    rss_kb = next((int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("MAXRSS")), 0)
    said = [line for line in done.stderr.splitlines() if not line.startswith("MAXRSS")]
    message = said[0] if len(said) == 1 and said[0].startswith("error") else f"{len(said)} lines: {said[:2]}"
    return seconds, rss_kb / 1024, done.returncode, message


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--readers-only", action="store_true", help="Only the readers of files and answers.")
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpunet-limits-") as tmp, prometheus_stand_in() as prometheus:
        cases = write_inputs(Path(tmp))
        if options.readers_only:
            cases = {name: args for name, args in cases.items() if "reference" in name}
        cases |= reader_cases(Path(tmp), prometheus)
        for name, args in cases.items():
            runs = [measure(args) for _ in range(options.runs)]
            rows.append({"case": name, "seconds": statistics.median(r[0] for r in runs),
                         "peak_mb": statistics.median(r[1] for r in runs), "exit": runs[0][2],
                         "message": runs[0][3][:160]})
    if options.json:
        print(json.dumps(rows, indent=1))
    else:
        for row in rows:
            print(f"{row['case']:<36} exit {row['exit']}  {row['seconds']:5.2f} s  {row['peak_mb']:6.1f} MB  "
                  f"{row['message'][:110]}")
    bombs = [r for r in rows if "reference" not in r["case"]]
    reference = next((r["seconds"] for r in rows if "reference" in r["case"]), None)
    if reference is not None and bombs:  # what refusing costs beyond Python's and gpunet's own start-up
        worst = max(bombs, key=lambda r: r["seconds"])
        print(f"start-up (valid spec) {reference:.2f} s; slowest refusal {worst['seconds']:.2f} s ({worst['case']}), "
              f"peak {max(r['peak_mb'] for r in bombs):.1f} MB")
    met = all(r["exit"] == 2 and r["message"].startswith("error") and r["seconds"] < TARGET_S
              and r["peak_mb"] < TARGET_MB for r in bombs)
    print(f"target (each refused with exit 2 and one line in < {TARGET_S:g} s and < {TARGET_MB:g} MB): "
          f"{'met' if met else 'MISSED'}; load: {os.getloadavg()[0]:.1f}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
