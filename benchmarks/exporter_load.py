"""`gpunet exporter` under load: 20 concurrent scrapers for 60 s against 200 veth interfaces.

The issue's acceptance: "Load: 20 concurrent scrapers for 60 s against an exporter in a namespace
with 200 veth interfaces: 0 errors, p99 printed." The script builds the network namespace
``gnbx-load`` holding 100 veth pairs (both ends inside it, all set up, plus ``lo``; one
``ip -batch``), starts ``python -m gpunet exporter --listen 127.0.0.1:9842 --include-virtual``
inside it (``ip netns exec``) and waits until /metrics answers. Then one Python process inside the
namespace runs the scrapers: --scrapers threads (default 20), each scraping back-to-back for
--seconds (default 60), a new connection per scrape (``Connection: close``, no keep-alive, no
gzip), with a --timeout of 10 s (Prometheus's default scrape_timeout).

A scrape is an error when it raises (refused, reset, timed out), answers other than 200, has no
``gpunet_collector_success`` line, or has one that is not 1. Latency is from connect to the last
byte read, errors included. The script prints scrapes, errors, scrapes/s, latency p50/p90/p99/max,
series per scrape (sample lines), interfaces exported, what the exporter reported as each
collector's duration (and how many distinct runs that shows: concurrent scrapes share a run in
flight), and the exporter's resident memory and threads (``/proc/PID/status``) before the load,
at its peak (sampled every 0.5 s; a few samples through the run are printed too) and after the
run, with its CPU seconds per scrape and any lines it logged. It exits 1 if any scrape failed.

The scrapers share the machine's CPUs with the exporter (both are Python processes), so on a small
machine the latencies include the scrapers' own share; the exporter's CPU seconds per scrape do not.

Processes are stopped (by PID) and the namespace deleted in a ``finally`` block (also on Ctrl-C
and SIGTERM), and at the end the script checks that ``ip netns list`` shows no namespace starting
with ``gnbx``. It needs root (network namespaces); without it, it exits with status 2.

Usage::

    sudo python benchmarks/exporter_load.py
    sudo python benchmarks/exporter_load.py --seconds 5 --json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any, TypeVar

from lab_scale import no_interrupts  # the same teardown guard as the lab benchmark (scripts share a folder)

NS_PREFIX = "gnbx"
NAMESPACE = f"{NS_PREFIX}-load"
PORT = 9842
VETH_PAIRS = 100
DEFAULT_SCRAPERS = 20
DEFAULT_SECONDS = 60.0
DEFAULT_TIMEOUT_S = 10.0  # Prometheus's default scrape_timeout
READY_TIMEOUT_S = 30.0
SAMPLE_EVERY_S = 0.5
SUCCESS_LINE = re.compile(r'^gpunet_collector_success\{collector="([^"]*)"\} (\S+)$', re.MULTILINE)
DURATION_LINE = re.compile(r'^gpunet_collector_duration_seconds\{collector="([^"]*)"\} (\S+)$', re.MULTILINE)
DEVICE_LABEL = re.compile(r'device="([^"]*)"')


# --- the namespace ------------------------------------------------------------------------------

def veth_batch(pairs: int) -> str:
    """`ip -n NS -batch -` input: `pairs` veth pairs, both ends in NS, everything up."""
    lines = ["link set lo up"]
    for i in range(pairs):
        a, b = f"vx{i:03d}a", f"vx{i:03d}b"
        lines += [f"link add {a} type veth peer name {b}", f"link set {a} up", f"link set {b} up"]
    return "\n".join(lines) + "\n"


def make_namespace(namespace: str, pairs: int) -> float:
    """Create `namespace` with `pairs` veth pairs inside it; returns the seconds it took."""
    if not namespace.startswith(NS_PREFIX):
        raise SystemExit(f"refusing to create {namespace!r}: benchmark namespaces start with {NS_PREFIX!r}")
    start = time.perf_counter()
    subprocess.run(["ip", "netns", "add", namespace], check=True, capture_output=True, text=True)
    subprocess.run(["ip", "-n", namespace, "-batch", "-"], input=veth_batch(pairs), check=True,
                   capture_output=True, text=True)
    return time.perf_counter() - start


def remove_namespace(namespace: str) -> None:
    """Delete `namespace` (and the veths inside it) if it exists."""
    if namespace in namespaces():
        subprocess.run(["ip", "netns", "del", namespace], check=False, capture_output=True, text=True)


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def leftover_namespaces() -> list[str]:
    return [name for name in namespaces() if name.startswith(NS_PREFIX)]


def interface_count(namespace: str) -> int:
    out = subprocess.run(["ip", "-n", namespace, "-o", "link", "show"], capture_output=True, text=True,
                         check=True).stdout
    return len(out.splitlines())


# --- processes we start (and stop, by PID) ------------------------------------------------------

def start_in_namespace(namespace: str, argv: Sequence[str], log: IO[str] | int | None) -> subprocess.Popen[str]:
    """`ip netns exec` execs the program, so the Popen's pid is the program's own."""
    return subprocess.Popen(["ip", "netns", "exec", namespace, *argv], stdout=log, stderr=log, text=True)


def stop(process: subprocess.Popen[str] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS (KiB) and Threads from /proc/PID/status; {} once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    found = dict(re.findall(r"^(VmRSS|Threads):\s+(\d+)", text, re.MULTILINE))
    return {key: int(value) for key, value in found.items()}


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads) from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


T = TypeVar("T")


@dataclass
class Watch:
    """Peak RSS and thread count of a process, sampled while we wait for something else."""

    pid: int
    peak_rss_kib: int = 0
    peak_threads: int = 0
    trace: list[tuple[float, int, int]] = field(default_factory=list)  # (seconds, RSS KiB, threads)
    start: float = field(default_factory=time.perf_counter)

    def sample(self) -> None:
        status = proc_status(self.pid)
        self.peak_rss_kib = max(self.peak_rss_kib, status.get("VmRSS", 0))
        self.peak_threads = max(self.peak_threads, status.get("Threads", 0))
        self.trace.append((time.perf_counter() - self.start, status.get("VmRSS", 0), status.get("Threads", 0)))

    def every(self, seconds: float) -> list[tuple[float, int, int]]:
        """The trace thinned to about one sample per `seconds` (growth over a run, at a glance)."""
        kept: list[tuple[float, int, int]] = []
        for point in self.trace:
            if not kept or point[0] - kept[-1][0] >= seconds:
                kept.append(point)
        return kept


def run_worker(namespace: str, script: str, payload: dict[str, Any], tick: Callable[[], None] | None = None,
               holder: list[subprocess.Popen[str]] | None = None) -> dict[str, Any]:
    """Run `script --worker PAYLOAD` inside `namespace` (where 127.0.0.1 is the exporter's) and
    return the JSON it prints; meanwhile call `tick` every 0.5 s. `holder` gets the Popen, for cleanup.
    Its output goes to a file: a pipe nobody reads until the end would fill up and stall it."""
    argv = [sys.executable, os.path.abspath(script), "--worker", json.dumps(payload)]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(["ip", "netns", "exec", namespace, *argv], stdout=out, stderr=err, text=True)
        if holder is not None:
            holder.append(process)
        while process.poll() is None:
            if tick:
                tick()
            time.sleep(SAMPLE_EVERY_S)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"the scraper inside {namespace} failed ({process.returncode}): {err.read().strip()}")
        answer: dict[str, Any] = json.loads(out.read())
        return answer


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise KeyboardInterrupt


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least 1
    return ordered[int(rank) - 1]


# --- inside the namespace: scraping -------------------------------------------------------------

def scrape(port: int, timeout: float, path: str = "/metrics") -> tuple[float, int, str]:
    """GET http://127.0.0.1:PORT/PATH on a fresh connection: (seconds, status, body)."""
    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Connection": "close", "Accept-Encoding": "identity"})
        response = connection.getresponse()
        body = response.read().decode()
        return time.perf_counter() - start, response.status, body
    finally:
        connection.close()


def sample_lines(body: str) -> list[str]:
    return [line for line in body.splitlines() if line and not line.startswith("#")]


def problem_of(status: int, body: str) -> str | None:
    """Why a /metrics answer is an error, or None."""
    if status != 200:
        return f"HTTP {status}"
    successes = SUCCESS_LINE.findall(body)
    if not successes:
        return "no gpunet_collector_success line"
    failed = sorted(name for name, value in successes if float(value) != 1)
    return f"collector_success 0: {','.join(failed)}" if failed else None


def wait_ready(port: int, seconds: float) -> float:
    """Poll until /metrics answers 200; returns how long that took."""
    start = time.perf_counter()
    last = "no answer"
    while time.perf_counter() - start < seconds:
        try:
            _, status, _ = scrape(port, timeout=5)
            if status == 200:
                return time.perf_counter() - start
            last = f"HTTP {status}"
        except OSError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    raise SystemExit(f"127.0.0.1:{port} did not answer within {seconds:g} s: {last}")


@dataclass
class Tally:
    """What the scraper threads record; one lock, taken once per scrape."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    durations: dict[str, list[float]] = field(default_factory=dict)
    interfaces: int = 0

    def record(self, latency: float, problem: str | None, body: str) -> None:
        durations = DURATION_LINE.findall(body) if problem is None else []
        with self.lock:
            self.latencies.append(latency)
            if problem is not None:
                self.errors[problem.split(":")[0]] += 1
                if len(self.examples) < 5:
                    self.examples.append(problem)
                return
            self.samples.append(len(sample_lines(body)))
            self.sizes.append(len(body))
            for name, value in durations:
                self.durations.setdefault(name, []).append(float(value))
            if not self.interfaces:
                self.interfaces = len(set(DEVICE_LABEL.findall(
                    "\n".join(line for line in body.splitlines() if line.startswith("gpunet_network_up{")))))


def scraper(port: int, timeout: float, deadline: list[float], start: threading.Barrier, tally: Tally) -> None:
    start.wait()
    while time.perf_counter() < deadline[0]:
        began = time.perf_counter()
        try:
            _, status, body = scrape(port, timeout)
            problem = problem_of(status, body)
        except (OSError, http.client.HTTPException) as exc:
            body, problem = "", f"{type(exc).__name__}: {exc}"
        tally.record(time.perf_counter() - began, problem, body)


def worker_load(port: int, scrapers: int, seconds: float, timeout: float) -> dict[str, Any]:
    tally = Tally()
    deadline = [0.0]
    barrier = threading.Barrier(scrapers + 1)
    threads = [threading.Thread(target=scraper, args=(port, timeout, deadline, barrier, tally), daemon=True)
               for _ in range(scrapers)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    deadline[0] = began + seconds
    barrier.wait()
    for thread in threads:
        thread.join()
    return {"elapsed_s": time.perf_counter() - began, "latencies_s": tally.latencies, "samples": tally.samples,
            "bytes": tally.sizes, "errors": dict(tally.errors), "error_examples": tally.examples,
            "collector_durations_s": tally.durations, "interfaces": tally.interfaces}


def worker(payload: dict[str, Any]) -> dict[str, Any]:
    if payload["mode"] == "ready":
        return {"ready_s": wait_ready(payload["port"], payload["seconds"])}
    return worker_load(payload["port"], payload["scrapers"], payload["seconds"], payload["timeout"])


# --- measuring ----------------------------------------------------------------------------------

@dataclass
class Result:
    namespace: str
    interfaces_in_namespace: int = 0
    namespace_build_s: float = 0.0
    ready_s: float = 0.0
    scrapers: int = 0
    seconds: float = 0.0
    scrapes: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    error_examples: list[str] = field(default_factory=list)
    scrapes_per_s: float = 0.0
    latency_s: dict[str, float] = field(default_factory=dict)  # p50, p90, p99, max
    series_per_scrape: dict[str, int] = field(default_factory=dict)  # min, median, max
    bytes_per_scrape: int = 0
    interfaces_exported: int = 0
    # name -> p50, p99, max, and runs: distinct durations seen, about how many times the collector ran
    # (concurrent scrapes share a run in flight)
    collector_duration_s: dict[str, dict[str, float]] = field(default_factory=dict)
    exporter_rss_kib: dict[str, int] = field(default_factory=dict)  # before, peak, after
    exporter_threads: dict[str, int] = field(default_factory=dict)  # before, peak, after
    exporter_cpu_s_per_scrape: float = 0.0
    exporter_trace: list[tuple[float, int, int]] = field(default_factory=list)  # (s, RSS KiB, threads)
    exporter_log: list[str] = field(default_factory=list)


def summarize(result: Result, load: dict[str, Any]) -> None:
    latencies, samples = load["latencies_s"], load["samples"]
    result.scrapes = len(latencies)
    result.errors = sum(load["errors"].values())
    result.error_kinds, result.error_examples = load["errors"], load["error_examples"]
    result.seconds = load["elapsed_s"]
    result.scrapes_per_s = result.scrapes / load["elapsed_s"] if load["elapsed_s"] else 0.0
    result.latency_s = {"p50": percentile(latencies, 50), "p90": percentile(latencies, 90),
                        "p99": percentile(latencies, 99), "max": max(latencies, default=0.0)}
    if samples:
        result.series_per_scrape = {"min": min(samples), "median": int(statistics.median(samples)),
                                    "max": max(samples)}
        result.bytes_per_scrape = int(statistics.median(load["bytes"]))
    result.interfaces_exported = load["interfaces"]
    result.collector_duration_s = {name: {"p50": percentile(values, 50), "p99": percentile(values, 99),
                                          "max": max(values), "runs": len(set(values))}
                                   for name, values in load["collector_durations_s"].items()}


def measure(args: argparse.Namespace, log_path: Path, started: list[subprocess.Popen[str]]) -> Result:
    result = Result(namespace=NAMESPACE, scrapers=args.scrapers)
    result.namespace_build_s = make_namespace(NAMESPACE, VETH_PAIRS)
    result.interfaces_in_namespace = interface_count(NAMESPACE)
    with log_path.open("w") as log:
        exporter = start_in_namespace(NAMESPACE, [sys.executable, "-m", "gpunet", "exporter", "--listen",
                                                  f"127.0.0.1:{args.port}", "--include-virtual"], log)
    started.append(exporter)
    ready = run_worker(NAMESPACE, __file__, {"mode": "ready", "port": args.port, "seconds": READY_TIMEOUT_S},
                       holder=started)
    result.ready_s = ready["ready_s"]
    before, cpu_before = proc_status(exporter.pid), cpu_seconds(exporter.pid)
    watch = Watch(exporter.pid)
    watch.sample()
    if not args.json:
        print(f"exporter up in {result.ready_s:.2f} s; {args.scrapers} scrapers for {args.seconds:g} s ...",
              file=sys.stderr, flush=True)
    load = run_worker(NAMESPACE, __file__, {"mode": "load", "port": args.port, "scrapers": args.scrapers,
                                            "seconds": args.seconds, "timeout": args.timeout}, watch.sample, started)
    after, cpu_after = proc_status(exporter.pid), cpu_seconds(exporter.pid)
    summarize(result, load)
    result.exporter_rss_kib = {"before": before.get("VmRSS", 0), "peak": watch.peak_rss_kib,
                               "after": after.get("VmRSS", 0)}
    result.exporter_threads = {"before": before.get("Threads", 0), "peak": watch.peak_threads,
                               "after": after.get("Threads", 0)}
    result.exporter_cpu_s_per_scrape = (cpu_after - cpu_before) / result.scrapes if result.scrapes else 0.0
    result.exporter_trace = watch.every(max(1.0, args.seconds / 6))
    if exporter.poll() is not None:
        result.error_examples.append(f"the exporter exited during the run ({exporter.returncode})")
        result.errors += 1
    return result


# --- reporting ----------------------------------------------------------------------------------

def print_table(r: Result) -> None:
    ms = {k: v * 1000 for k, v in r.latency_s.items()}
    print(f"namespace {r.namespace}: {r.interfaces_in_namespace} interfaces ({VETH_PAIRS} veth pairs + lo), "
          f"built in {r.namespace_build_s:.2f} s; exporter answered after {r.ready_s:.2f} s")
    print(f"{r.scrapers} scrapers, {r.seconds:.1f} s: {r.scrapes} scrapes, {r.errors} errors, "
          f"{r.scrapes_per_s:.1f} scrapes/s")
    print(f"latency ms: p50 {ms['p50']:.1f}  p90 {ms['p90']:.1f}  p99 {ms['p99']:.1f}  max {ms['max']:.1f}")
    series = r.series_per_scrape
    if series:
        spread = "" if series["min"] == series["max"] else f" (min {series['min']}, max {series['max']})"
        print(f"series per scrape: {series['median']}{spread}; {r.interfaces_exported} interfaces exported; "
              f"{r.bytes_per_scrape / 1024:.0f} KiB per scrape")
    for name, d in r.collector_duration_s.items():
        print(f"  collector {name:<11} reported duration ms: p50 {d['p50'] * 1000:.1f}  p99 {d['p99'] * 1000:.1f}"
              f"  max {d['max'] * 1000:.1f}; ~{d['runs']:.0f} runs for {r.scrapes - r.errors} scrapes")
    rss, threads = r.exporter_rss_kib, r.exporter_threads
    print(f"exporter RSS MiB: before {rss['before'] / 1024:.1f}, peak {rss['peak'] / 1024:.1f}, "
          f"after {rss['after'] / 1024:.1f}; threads: before {threads['before']}, peak {threads['peak']}, "
          f"after {threads['after']}; CPU {r.exporter_cpu_s_per_scrape * 1000:.1f} ms per scrape")
    print("exporter RSS MiB / threads over the run: "
          + ", ".join(f"{t:.0f} s {kib / 1024:.1f}/{n}" for t, kib, n in r.exporter_trace))
    if r.errors:
        print(f"errors by kind: {r.error_kinds}; e.g. {r.error_examples}")
    if r.exporter_log:
        print(f"the exporter logged {len(r.exporter_log)} line(s), e.g.: {r.exporter_log[:3]}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="how long to scrape (default: 60)")
    parser.add_argument("--scrapers", type=int, default=DEFAULT_SCRAPERS, help="concurrent scrapers (default: 20)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help="seconds before a scrape counts as failed (default: 10)")
    parser.add_argument("--port", type=int, default=PORT, help="exporter port inside the namespace (default: 9842)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # the scrapers, run inside the namespace
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.scrapers < 1:
        parser.error("--seconds must be positive and --scrapers at least 1")
    return args


def torn_down(namespace: str, measure: Callable[[list[subprocess.Popen[str]]], T]) -> tuple[T | None, bool]:
    """measure(started), then stop every process it started and remove the namespace, whatever
    happened (Ctrl-C, SIGTERM, a process inside the namespace failing); also True when interrupted."""
    signal.signal(signal.SIGTERM, raise_interrupt)  # so `finally` cleans up on kill too
    started: list[subprocess.Popen[str]] = []
    try:
        remove_namespace(namespace)  # one left by an earlier, killed run
        return measure(started), False
    except KeyboardInterrupt:
        print("interrupted: processes stopped, namespace removed", file=sys.stderr)
        return None, True
    except SystemExit as exc:  # a process inside the namespace failed: still clean up and check
        print(exc, file=sys.stderr)
        return None, False
    finally:
        with no_interrupts():
            for process in reversed(started):
                stop(process)
            remove_namespace(namespace)


def run_cleanly(args: argparse.Namespace) -> tuple[Result | None, bool]:
    with tempfile.TemporaryDirectory(prefix="gnbx-load-") as tmp:
        log_path = Path(tmp) / "exporter.log"
        result, interrupted = torn_down(NAMESPACE, lambda started: measure(args, log_path, started))
        if result is not None and log_path.exists():
            result.exporter_log = [line for line in log_path.read_text().splitlines() if "serving http" not in line]
    return result, interrupted


def leftover_check(left: list[str]) -> str:
    if left:
        return f"`ip netns list`: {len(left)} {NS_PREFIX}* namespace(s) LEFT BEHIND: {', '.join(left)}"
    return f"`ip netns list`: no namespace starting with {NS_PREFIX!r} is left"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if os.geteuid() != 0:
        print("exporter_load.py builds a network namespace and veths: run it as root (e.g. with sudo)",
              file=sys.stderr)
        return 2
    result, interrupted = run_cleanly(args)
    left = leftover_namespaces()
    if args.json:
        print(json.dumps({**(asdict(result) if result else {}), "leftover_namespaces": left,
                          "interrupted": interrupted}, indent=2))
    elif result is not None:
        print_table(result)
    print(leftover_check(left), file=sys.stderr if args.json else sys.stdout)
    failed = result is None or result.errors > 0
    return 1 if failed or left or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
