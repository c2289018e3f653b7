"""Median scrape time of `gpunet exporter` against node_exporter, same namespace, same interfaces.

The issue's acceptance: "same namespace, same interfaces, median scrape time of gpunet against
node_exporter (netdev + netstat + infiniband collectors) as a ratio". The script builds the network
namespace ``gnbx-vs`` with 100 veth pairs (both ends inside it, all set up, plus ``lo``: 201
interfaces) and starts, inside it (``ip netns exec``):

* ``python -m gpunet exporter --listen 127.0.0.1:9842 --include-virtual`` (collectors netdev,
  netstat, bonding, infiniband; --include-virtual so the veths and lo are exported), and
* node_exporter (Debian's prometheus-node-exporter) with ``--collector.disable-defaults
  --collector.netdev --collector.netstat --collector.infiniband
  --web.listen-address=127.0.0.1:9100`` and ``--collector.netdev.device-exclude=`` (empty), so that
  its netdev exports lo too, as gpunet does; --exclude-lo keeps node_exporter's default ``^lo$``.

One Python process inside the namespace then scrapes them one at a time: --warmup rounds (default
20, not counted), then --rounds (default 200), each round one scrape of each exporter, which one
goes first alternating from round to round; every scrape is a new connection (``Connection:
close``, no gzip) timed from connect to the last byte. It reports, per exporter, the median and p90
scrape time, sample lines per scrape (split by collector, and the interfaces the netdev series
cover), bytes, CPU seconds per scrape (``/proc/PID/stat`` over all the scrapes, warm-up included,
start-up not) and resident memory afterwards, and the ratio of the medians, gpunet / node_exporter.

Comparable work, roughly: node_exporter's netdev reads all interfaces at once (netlink or
/proc/net/dev) and exports 17 counters per interface; gpunet's reads the link facts from sysfs (four
files per interface, held open between scrapes and re-read in place), the counters from
/proc/net/dev, and exports 8 counters and 4 gauges.
node_exporter's netstat exports its default
--collector.netstat.fields set (including Icmp, Ip6 and Udp6 from /proc/net/snmp6); gpunet's keeps
a similar set. node_exporter adds its own go_*, process_* and promhttp_* series. There is no
InfiniBand hardware in the namespace, so both infiniband collectors find nothing (node_exporter
reports that as node_scrape_collector_success 0, which is not counted as an error here).

Both exporters are stopped (by PID) and the namespace deleted in a ``finally`` block (also on
Ctrl-C and SIGTERM), and at the end the script checks that ``ip netns list`` shows no namespace
starting with ``gnbx``. It needs root, and node_exporter (``apt-get install
prometheus-node-exporter``, or --node-exporter PATH); without either it exits with status 2.
It exits 1 if a scrape failed.

Usage::

    sudo python benchmarks/exporter_vs_node_exporter.py
    sudo python benchmarks/exporter_vs_node_exporter.py --rounds 50 --json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from exporter_load import (
    NS_PREFIX,
    VETH_PAIRS,
    Watch,
    cpu_seconds,
    interface_count,
    leftover_check,
    leftover_namespaces,
    make_namespace,
    percentile,
    problem_of,
    proc_status,
    run_worker,
    sample_lines,
    scrape,
    start_in_namespace,
    torn_down,
    wait_ready,
)

NAMESPACE = f"{NS_PREFIX}-vs"
GPUNET_PORT, NODE_PORT = 9842, 9100
DEFAULT_ROUNDS, DEFAULT_WARMUP = 200, 20
TIMEOUT_S = 10.0
READY_TIMEOUT_S = 30.0
NODE_EXPORTER_NAMES = ("prometheus-node-exporter", "node_exporter")
NODE_FLAGS = ("--collector.disable-defaults", "--collector.netdev", "--collector.netstat", "--collector.infiniband",
              f"--web.listen-address=127.0.0.1:{NODE_PORT}")
GROUPS = {  # sample-line prefixes per collector, per exporter
    "gpunet": {"netdev": ("gpunet_network_", "gpunet_skipped_lines"), "netstat": ("gpunet_tcp_", "gpunet_netstat_"),
               "infiniband": ("gpunet_infiniband_",), "bonding": ("gpunet_bond_",), "self": ("gpunet_collector_",)},
    "node_exporter": {"netdev": ("node_network_",), "netstat": ("node_netstat_",),
                      "infiniband": ("node_infiniband_",),
                      "self": ("node_scrape_", "node_exporter_", "go_", "process_", "promhttp_")},
}
NODE_SUCCESS = re.compile(r'^node_scrape_collector_success\{collector="([^"]*)"\} (\S+)$', re.MULTILINE)
DEVICE_LABEL = re.compile(r'device="([^"]*)"')
INSTALL_HINT = ("node_exporter not found: `apt-get install prometheus-node-exporter` (the Debian package also "
                "enables and starts a service on :9100; to get only the binary: `apt-get download "
                "prometheus-node-exporter && dpkg-deb -x prometheus-node-exporter_*.deb /tmp/ne` and pass "
                "--node-exporter /tmp/ne/usr/bin/prometheus-node-exporter)")


# --- inside the namespace: alternating scrapes --------------------------------------------------

def shape_of(name: str, body: str) -> dict[str, Any]:
    """Samples per collector, interfaces in the netdev series, and node_exporter's collector successes."""
    lines = sample_lines(body)
    groups = dict.fromkeys([*GROUPS[name], "other"], 0)
    netdev: list[str] = []
    for line in lines:
        group = next((g for g, prefixes in GROUPS[name].items() if line.startswith(prefixes)), "other")
        groups[group] += 1
        if group == "netdev":
            netdev.append(line)
    return {"samples": len(lines), "by_collector": groups,
            "interfaces": len(set(DEVICE_LABEL.findall("\n".join(netdev)))),
            "collector_success": {c: float(v) for c, v in NODE_SUCCESS.findall(body)}}


def problem(name: str, status: int, body: str) -> str | None:
    """gpunet: as exporter_load.py judges it; node_exporter: not 200, or no collector lines (a collector
    with nothing to read, infiniband here, reports success 0 and is no error)."""
    if name == "gpunet":
        return problem_of(status, body)
    if status != 200:
        return f"HTTP {status}"
    return None if NODE_SUCCESS.search(body) else "no node_scrape_collector_success line"


def one_scrape(name: str, port: int, record: dict[str, Any]) -> None:
    try:
        latency, status, body = scrape(port, TIMEOUT_S)
        trouble = problem(name, status, body)
    except (OSError, http.client.HTTPException) as exc:
        latency, body, trouble = 0.0, "", f"{type(exc).__name__}: {exc}"
    if trouble is not None:
        record["errors"].append(trouble)
        return
    record["latencies_s"].append(latency)
    record["bytes"].append(len(body))
    if "shape" not in record:
        record["shape"] = shape_of(name, body)


def worker_compare(ports: dict[str, int], warmup: int, rounds: int) -> dict[str, Any]:
    records: dict[str, dict[str, Any]] = {name: {"latencies_s": [], "bytes": [], "errors": []} for name in ports}
    spare: dict[str, dict[str, Any]] = {name: {"latencies_s": [], "bytes": [], "errors": []} for name in ports}
    names = list(ports)
    for n in range(warmup + rounds):
        order = names if n % 2 == 0 else names[::-1]
        for name in order:
            one_scrape(name, ports[name], records[name] if n >= warmup else spare[name])
    for name in names:  # failures in warm-up count too
        records[name]["errors"] = spare[name]["errors"] + records[name]["errors"]
    return records


def worker(payload: dict[str, Any]) -> dict[str, Any]:
    if payload["mode"] == "ready":
        return {name: wait_ready(port, READY_TIMEOUT_S) for name, port in payload["ports"].items()}
    return worker_compare(payload["ports"], payload["warmup"], payload["rounds"])


# --- measuring ----------------------------------------------------------------------------------

@dataclass
class Side:
    exporter: str
    command: list[str]
    scrapes: int = 0
    errors: int = 0
    error_examples: list[str] = field(default_factory=list)
    median_s: float = 0.0
    p90_s: float = 0.0
    samples: int = 0
    samples_by_collector: dict[str, int] = field(default_factory=dict)
    interfaces: int = 0
    bytes_per_scrape: int = 0
    cpu_s_per_scrape: float = 0.0
    rss_kib: int = 0
    peak_threads: int = 0
    collector_success: dict[str, float] = field(default_factory=dict)


@dataclass
class Result:
    namespace: str
    interfaces_in_namespace: int
    node_exporter_version: str
    rounds: int
    warmup: int
    sides: dict[str, Side] = field(default_factory=dict)
    ratio: float = 0.0  # gpunet median / node_exporter median

    @property
    def errors(self) -> int:
        return sum(side.errors for side in self.sides.values())


def version_of(binary: str) -> str:
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False, timeout=10)
    return ((done.stdout or done.stderr).splitlines() or ["?"])[0].strip()


def fill(side: Side, record: dict[str, Any], cpu: float, total_scrapes: int, watch: Watch) -> None:
    latencies = record["latencies_s"]
    side.scrapes, side.errors, side.error_examples = len(latencies), len(record["errors"]), record["errors"][:5]
    side.median_s = statistics.median(latencies) if latencies else 0.0
    side.p90_s = percentile(latencies, 90)
    shape = record.get("shape", {})
    side.samples, side.samples_by_collector = shape.get("samples", 0), shape.get("by_collector", {})
    side.interfaces, side.collector_success = shape.get("interfaces", 0), shape.get("collector_success", {})
    side.bytes_per_scrape = int(statistics.median(record["bytes"])) if record["bytes"] else 0
    side.cpu_s_per_scrape = cpu / total_scrapes if total_scrapes else 0.0
    side.rss_kib, side.peak_threads = proc_status(watch.pid).get("VmRSS", 0), watch.peak_threads


def measure(args: argparse.Namespace, logs: Path, started: list[subprocess.Popen[str]]) -> Result:
    make_namespace(NAMESPACE, VETH_PAIRS)
    result = Result(NAMESPACE, interface_count(NAMESPACE), version_of(args.node_exporter), args.rounds, args.warmup)
    node_flags = [*NODE_FLAGS, *([] if args.exclude_lo else ["--collector.netdev.device-exclude="])]
    commands = {"gpunet": [sys.executable, "-m", "gpunet", "exporter", "--listen", f"127.0.0.1:{GPUNET_PORT}",
                           "--include-virtual"],
                "node_exporter": [args.node_exporter, *node_flags]}
    processes = {}
    for name, command in commands.items():
        with (logs / f"{name}.log").open("w") as log:
            processes[name] = start_in_namespace(NAMESPACE, command, log)
        started.append(processes[name])
    ports = {"gpunet": GPUNET_PORT, "node_exporter": NODE_PORT}
    run_worker(NAMESPACE, __file__, {"mode": "ready", "ports": ports}, None, started)
    watches = {name: Watch(p.pid) for name, p in processes.items()}
    cpu_before = {name: cpu_seconds(p.pid) for name, p in processes.items()}  # start-up not counted
    if not args.json:
        print(f"scraping both exporters, {args.warmup} + {args.rounds} rounds ...", file=sys.stderr, flush=True)
    payload = {"mode": "compare", "ports": ports, "warmup": args.warmup, "rounds": args.rounds}

    def sample_both() -> None:
        for watch in watches.values():
            watch.sample()

    records = run_worker(NAMESPACE, __file__, payload, sample_both, started)
    for name, process in processes.items():
        side = Side(name, [os.path.basename(c) if i == 0 else c for i, c in enumerate(commands[name])])
        fill(side, records[name], cpu_seconds(process.pid) - cpu_before[name], args.warmup + args.rounds,
             watches[name])
        if process.poll() is not None:
            side.errors += 1
            side.error_examples.append(f"exited during the run ({process.returncode})")
        result.sides[name] = side
    gpunet, node = result.sides["gpunet"], result.sides["node_exporter"]
    result.ratio = gpunet.median_s / node.median_s if node.median_s else 0.0
    return result


# --- reporting ----------------------------------------------------------------------------------

def print_table(r: Result) -> None:
    print(f"namespace {r.namespace}: {r.interfaces_in_namespace} interfaces ({VETH_PAIRS} veth pairs + lo); "
          f"{r.node_exporter_version}")
    print(f"{r.rounds} rounds after {r.warmup} warm-up rounds, one scrape of each per round, order alternating")
    print()
    head = ("exporter", "median ms", "p90 ms", "samples", "interfaces", "KiB", "CPU ms/scrape", "RSS MiB", "errors")
    print("{:<14} {:>9} {:>7} {:>8} {:>10} {:>5} {:>13} {:>7} {:>6}".format(*head))
    for s in r.sides.values():
        print(f"{s.exporter:<14} {s.median_s * 1000:>9.2f} {s.p90_s * 1000:>7.2f} {s.samples:>8} {s.interfaces:>10} "
              f"{s.bytes_per_scrape / 1024:>5.0f} {s.cpu_s_per_scrape * 1000:>13.2f} {s.rss_kib / 1024:>7.1f} "
              f"{s.errors:>6}")
    print()
    print(f"median scrape time, gpunet / node_exporter: {r.ratio:.2f}x")
    for s in r.sides.values():
        split = ", ".join(f"{group} {n}" for group, n in s.samples_by_collector.items() if n)
        print(f"samples of {s.exporter}: {split}")
    node = r.sides["node_exporter"]
    if node.collector_success:
        print("node_exporter collector success: "
              + ", ".join(f"{c} {v:g}" for c, v in node.collector_success.items()))
    gpunet = r.sides["gpunet"]
    if gpunet.interfaces != node.interfaces:
        print(f"interfaces differ: gpunet exports {gpunet.interfaces}, node_exporter {node.interfaces}")
    for s in r.sides.values():
        if s.errors:
            print(f"{s.exporter}: {s.errors} failed scrape(s), e.g. {s.error_examples}")


def print_gpunet_log(logged: dict[str, list[str]]) -> None:
    lines = [line for line in logged.get("gpunet", []) if "serving http" not in line]
    if lines:
        print(f"the gpunet exporter logged {len(lines)} line(s), e.g.: {lines[:3]}")


def node_exporter_path(given: str | None) -> str | None:
    if given:
        return given if os.access(given, os.X_OK) else None
    return next((found for name in NODE_EXPORTER_NAMES if (found := shutil.which(name))), None)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="measured rounds (default: 200)")
    parser.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="rounds not counted (default: 20)")
    parser.add_argument("--node-exporter", metavar="PATH",
                        help="the node_exporter binary (default: prometheus-node-exporter or node_exporter on PATH)")
    parser.add_argument("--exclude-lo", action="store_true",
                        help="keep node_exporter's default --collector.netdev.device-exclude=^lo$")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # the scraper, run inside the namespace
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup not negative")
    return args


def run_cleanly(args: argparse.Namespace) -> tuple[Result | None, bool, dict[str, list[str]]]:
    """measure(), then stop both exporters and remove the namespace whatever happened."""
    with tempfile.TemporaryDirectory(prefix="gnbx-vs-") as tmp:
        result, interrupted = torn_down(NAMESPACE, lambda started: measure(args, Path(tmp), started))
        logged = {path.stem: path.read_text().splitlines() for path in Path(tmp).glob("*.log")}
    return result, interrupted, logged


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    args.node_exporter = node_exporter_path(args.node_exporter)
    if args.node_exporter is None:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("exporter_vs_node_exporter.py builds a network namespace and veths: run it as root (e.g. with sudo)",
              file=sys.stderr)
        return 2
    result, interrupted, logged = run_cleanly(args)
    left = leftover_namespaces()
    if args.json:
        print(json.dumps({**(asdict(result) if result else {}), "exporter_logs": logged,
                          "leftover_namespaces": left, "interrupted": interrupted}, indent=2))
    elif result is not None:
        print_table(result)
        print_gpunet_log(logged)
    print(leftover_check(left), file=sys.stderr if args.json else sys.stdout)
    return 1 if result is None or result.errors or left or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
