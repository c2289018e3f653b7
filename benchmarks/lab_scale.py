"""How long `gpunet lab up` and `lab down` take for labs of 8, 32 and 64 servers, routed by FRR
and by static routes.

For each size the script designs a plan shaped like tests/fixtures/lab/small.yaml, scaled up:
a 10G management plane of 16-port switches (one switch or spine-leaf, as the design picks) and
a 100G RoCE spine-leaf compute plane (8-port switches up to 32 servers, 16-port beyond, so there
are several leaves and at least two spines). All subnets are inside 198.18.0.0/15. Then, per
run, it times:

* up:   ``lab_up(plan, lab_id, max_nodes=servers, routing=...)`` (nothing is sliced away); with FRR
        it returns once every planned BGP session is Established and every leaf has the planned
        ECMP width, so this is the up-and-converged time
* down: ``lab_down(lab_id)``

for each routing asked (``--routing frr,static``, both by default where FRR is installed), with lab
ids ``bs`` (static routes) or ``bf`` (FRR) and the size in base 36 (a lab id has at most 4 characters):
``bs8``, ``bsw``, ``bs1s``, ``bs74`` for 8, 32, 64 and 256 servers, ``bf8`` ... ``bf74`` for FRR
(namespaces ``gnbs<size>-<device>``, ``gnbf<size>-<device>``). With FRR it also reports when BGP
had converged (seconds from the start of the build) and the memory of each router: the resident
set (VmRSS) of its FRR daemons (zebra, bgpd, staticd), read from the pid files `lab up` wrote,
median and largest. It reports the
median up and down seconds over the runs (default 3), the namespaces and veth cables the lab
holds (from the returned LabState), seconds per server, where the time of `up` goes (each
build step, timed through lab_up's progress callback) and of `down` (each command it runs),
and how the per-server up time of the largest size compares with the smallest.

Every lab is taken down in a ``finally`` block (also on Ctrl-C, SIGTERM or an error), and at
the end the script checks that ``ip netns list`` shows no namespace starting with ``gnbs`` or ``gnbf``.
It needs root (network namespaces); without it, it exits with status 2.

Usage::

    sudo python benchmarks/lab_scale.py
    sudo python benchmarks/lab_scale.py --sizes 8,32 --runs 1 --json
    sudo python benchmarks/lab_scale.py --routing frr --sizes 64
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from gpunet.design import design
from gpunet.lab.build import lab_down, lab_up
from gpunet.lab.frr import SUBDIR, frr_missing
from gpunet.lab.state import LabState, lab_dir
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.runner import run_local
from gpunet.spec.checks import spec_problems

DEFAULT_SIZES = (8, 32, 64)
MAX_SERVERS = 512  # two tiers of 32-port switches at 1:1
DEFAULT_RUNS = 3
LAB_PREFIXES = {"static": "bs", "frr": "bf"}  # lab ids bs8, bfw, ...; namespaces gnbs8-..., gnbfw-...
DIGITS36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def bench_lab_id(routing: str, servers: int) -> str:
    """The routing's prefix and the size in base 36: 4 characters up to 1 295 servers."""
    digits = ""
    while servers:
        servers, digit = divmod(servers, 36)
        digits = DIGITS36[digit] + digits
    return LAB_PREFIXES[routing] + digits
NS_PREFIXES = tuple(f"gn{p}" for p in LAB_PREFIXES.values())
MGMT_RADIX = 16
PLURAL = {"leaf": "leaves"}
BEFORE_STEPS = "prepare"  # slice, blueprint and state file, before the first progress call


def compute_radix(servers: int) -> int:
    """The smallest of 8, 16 and 32 ports whose two tiers hold the servers at 1:1 (radix * radix / 2)."""
    return next((radix for radix in (8, 16) if servers <= radix * radix // 2), 32)


def spec_dict(servers: int) -> dict[str, Any]:
    """tests/fixtures/lab/small.yaml with `servers` nodes, as the YAML loader would see it."""
    radix = compute_radix(servers)
    return {
        "version": 1,
        "site": {"name": f"labbench{servers}"},
        "planes": {
            "management": {
                "subnet": "198.18.0.0/24" if servers <= 128 else "198.18.0.0/22",  # servers and switches
                "gateway": "198.18.0.1",
                "speed": "10G",
                "fabric": {"switch": {"model": f"mgmt-{MGMT_RADIX}x10G", "radix": MGMT_RADIX, "port_speed": "10G"}},
            },
            "compute": {
                "subnet": "198.18.16.0/22",
                "technology": "roce",
                "mtu": 9000,
                "speed": "100G",
                "fabric": {
                    "style": "spine-leaf",
                    "switch": {"model": f"eth-{radix}x100G", "radix": radix, "port_speed": "100G"},
                },
            },
        },
        "groups": [{
            "name": "gpu",
            "nodes": f"gpu[1-{servers}]",
            "gpus": 8,
            "nics": {"management": {"devices": ["eth0"]}, "compute": {"devices": ["ens1"]}},
        }],
    }


def build_plan(servers: int) -> Plan:
    spec = Spec.model_validate(spec_dict(servers))
    problems = spec_problems(spec)
    if problems:
        raise SystemExit(f"benchmark spec for {servers} servers is invalid: {problems}")
    return design(spec)


def fabric_summary(plan: Plan) -> str:
    """'management single-switch (1 leaf), compute spine-leaf (2 leaves + 2 spines)'."""
    parts = []
    for cap in plan.capacity:
        tiers: dict[str, int] = defaultdict(int)
        for s in plan.switches:
            if s.plane == cap.plane:
                tiers[s.tier] += 1
        counts = " + ".join(f"{n} {tier if n == 1 else PLURAL.get(tier, tier + 's')}" for tier, n in tiers.items())
        parts.append(f"{cap.plane} {cap.style} ({counts})")
    return ", ".join(parts)


# --- timing what lab_up and lab_down do --------------------------------------------------------

def command_label(argv: Sequence[str], stdin: str | None) -> str:
    """A short name for a command lab_up/lab_down runs: 'ip -batch netns add', 'sysctl', ..."""
    args = list(argv)
    if "exec" in args and args[0] == "ip":  # ip netns exec NS PROGRAM ...
        args = args[args.index("exec") + 2:]
    program = os.path.basename(args[0]) if args else "?"
    if program in ("ip", "tc") and "-batch" in args:
        first = (stdin or "").split()[:2]
        if "-force" in args:
            return f"{program} -force -batch {' '.join(first)}"
        return f"{program} -batch {' '.join(first)}"
    if program == "nsenter":
        return "nsenter + " + os.path.basename(next((a for a in args if a.startswith("/")), "?"))
    return program


@dataclass
class CommandTimer:
    """A CommandRunner that runs commands locally and adds up their time per label."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def __call__(self, argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
                 timeout: float = 120) -> subprocess.CompletedProcess[str]:
        start = time.perf_counter()
        try:
            return run_local(argv, stdin=stdin, check=check, timeout=timeout)
        finally:
            label = command_label(argv, stdin)
            self.seconds[label] += time.perf_counter() - start
            self.counts[label] += 1


@dataclass
class StepTimer:
    """lab_up's progress callback: progress(step, done, total) is called before each step."""

    start: float = field(default_factory=time.perf_counter)
    current: str = BEFORE_STEPS
    seconds: dict[str, float] = field(default_factory=dict)

    def __call__(self, step: str, done: int, total: int) -> None:
        del done, total
        now = time.perf_counter()
        if self.current == "up":
            self.current = "state file"
        self.seconds[self.current] = self.seconds.get(self.current, 0.0) + now - self.start
        self.current, self.start = step, now


# --- measuring ----------------------------------------------------------------------------------

@dataclass
class Result:
    servers: int
    lab_id: str
    fabric: str
    routing: str = "static"
    runs: int = 0
    namespaces: int = 0
    veths: int = 0
    up_s: float = 0.0
    down_s: float = 0.0
    up_s_per_server: float = 0.0
    down_s_per_server: float = 0.0
    up_steps_s: dict[str, float] = field(default_factory=dict)  # medians over the runs
    down_commands_s: dict[str, float] = field(default_factory=dict)  # medians; "(python)" = the rest
    down_commands_n: dict[str, int] = field(default_factory=dict)
    converged_s: float | None = None  # FRR: BGP converged, seconds from the start of the build (median)
    routers: int = 0  # switches running FRR
    rss_mib_median: float | None = None  # one router's FRR daemons, resident
    rss_mib_max: float | None = None
    samples: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def no_interrupts() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is over (a teardown must not be cut short)."""
    caught: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def hold(signum: int, frame: FrameType | None) -> None:
        del frame
        caught.append(signum)

    for sig in previous:
        signal.signal(sig, hold)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            raise KeyboardInterrupt


def teardown(lab_id: str, timer: CommandTimer | None = None) -> float:
    """lab_down, uninterruptible; returns its seconds."""
    with no_interrupts():
        start = time.perf_counter()
        lab_down(lab_id, run=timer or run_local)
        return time.perf_counter() - start


def router_rss_mib(lab_id: str) -> list[float]:
    """Per router running FRR: the resident memory of its daemons together (VmRSS, MiB)."""
    found = []
    for folder in sorted((lab_dir(lab_id) / SUBDIR).glob(f"gn{lab_id}-*")):
        kib = 0
        for pid_file in folder.glob("*.pid"):
            status = Path(f"/proc/{pid_file.read_text().strip()}/status")
            kib += next((int(line.split()[1]) for line in status.read_text().splitlines()
                         if line.startswith("VmRSS:")), 0) if status.exists() else 0
        found.append(kib / 1024)
    return found


def converged_after(state: LabState) -> float | None:
    """Seconds from the start of the build until BGP had converged (None: no FRR in this lab)."""
    readiness = state.readiness
    if readiness is None or "bgp" not in readiness.conditions:
        return None
    return readiness.built_s + readiness.conditions["bgp"].ready_s


def one_run(plan: Plan, lab_id: str, servers: int, routing: str) -> tuple[dict[str, Any], int, int]:
    """Time one lab_up and one lab_down; the lab is taken down whatever happens."""
    steps, down_timer = StepTimer(), CommandTimer()
    up_s = down_s = 0.0
    try:
        start = time.perf_counter()
        steps.start = start
        state = lab_up(plan, lab_id, max_nodes=servers, progress=steps, routing="frr" if routing == "frr" else "static")
        up_s = time.perf_counter() - start
        steps("", 0, 0)  # close the last interval: after progress("up"), lab_up writes the state file
        rss = router_rss_mib(lab_id)
    finally:
        down_s = teardown(lab_id, down_timer)
    commands = dict(down_timer.seconds)
    commands["(python)"] = max(0.0, down_s - sum(commands.values()))
    sample = {"up_s": up_s, "down_s": down_s, "up_steps_s": steps.seconds, "down_commands_s": commands,
              "down_commands_n": dict(down_timer.counts), "converged_s": converged_after(state), "rss_mib": rss}
    return sample, len(state.namespaces), len(state.veths)


def median_by_key(dicts: list[dict[str, float]]) -> dict[str, float]:
    keys = list(dict.fromkeys(k for d in dicts for k in d))
    return {k: statistics.median(d.get(k, 0.0) for d in dicts) for k in keys}


def measure(servers: int, runs: int, quiet: bool, routing: str = "static") -> Result:
    plan = build_plan(servers)
    lab_id = bench_lab_id(routing, servers)
    result = Result(servers=servers, lab_id=lab_id, fabric=fabric_summary(plan), routing=routing)
    teardown(lab_id)  # a lab left by an earlier, killed run would make lab_up return at once
    for run in range(runs):
        sample, result.namespaces, result.veths = one_run(plan, lab_id, servers, routing)
        result.samples.append(sample)
        if not quiet:
            print(f"  {lab_id} run {run + 1}/{runs}: up {sample['up_s']:.2f} s, down {sample['down_s']:.2f} s",
                  file=sys.stderr, flush=True)
    result.runs = len(result.samples)
    result.up_s = statistics.median(s["up_s"] for s in result.samples)
    result.down_s = statistics.median(s["down_s"] for s in result.samples)
    result.up_s_per_server = result.up_s / servers
    result.down_s_per_server = result.down_s / servers
    result.up_steps_s = median_by_key([s["up_steps_s"] for s in result.samples])
    result.down_commands_s = median_by_key([s["down_commands_s"] for s in result.samples])
    result.down_commands_n = result.samples[-1]["down_commands_n"]
    converged = [s["converged_s"] for s in result.samples if s["converged_s"] is not None]
    result.converged_s = statistics.median(converged) if converged else None
    rss = [mib for s in result.samples for mib in s["rss_mib"]]
    result.routers = len(result.samples[-1]["rss_mib"])
    result.rss_mib_median = statistics.median(rss) if rss else None
    result.rss_mib_max = max(rss) if rss else None
    return result


def leftover_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip() and line.startswith(NS_PREFIXES)]


# --- reporting ----------------------------------------------------------------------------------

def summary_of(results: list[Result]) -> dict[str, Any]:
    ordered = sorted((r for r in results if r.routing == results[0].routing), key=lambda r: r.servers)
    ratio = ordered[-1].up_s_per_server / ordered[0].up_s_per_server if ordered else None
    return {"up_per_server_ratio": ratio, "ratio_sizes": [ordered[0].servers, ordered[-1].servers] if ordered else []}


def share_line(parts: dict[str, float], total: float, top: int = 4) -> str:
    ranked = sorted(parts.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{name} {s:.2f} s ({100 * s / total:.0f}%)" for name, s in ranked if total > 0)


def print_table(results: list[Result], summary: dict[str, Any]) -> None:
    for r in results:
        print(f"{r.servers} servers (lab {r.lab_id}, {r.routing}): {r.fabric}; {r.runs} run(s)")
    print()
    head = ("servers", "routing", "namespaces", "veths", "up s", "bgp s", "down s", "up s/server", "routers",
            "MiB/router", "max")
    print("{:>7} {:>7} {:>10} {:>6} {:>7} {:>6} {:>7} {:>12} {:>7} {:>10} {:>6}".format(*head))
    for r in results:
        bgp = f"{r.converged_s:.2f}" if r.converged_s is not None else "-"
        rss = f"{r.rss_mib_median:.1f}" if r.rss_mib_median is not None else "-"
        top = f"{r.rss_mib_max:.1f}" if r.rss_mib_max is not None else "-"
        print(f"{r.servers:>7} {r.routing:>7} {r.namespaces:>10} {r.veths:>6} {r.up_s:>7.2f} {bgp:>6} "
              f"{r.down_s:>7.2f} {r.up_s_per_server:>12.3f} {r.routers:>7} {rss:>10} {top:>6}")
    print("(up s: lab up until ready, BGP converged included with FRR; bgp s: when BGP had converged, from the "
          "start of the build; MiB/router: zebra + bgpd + staticd resident, median over routers and runs)")
    print()
    print("where the time goes (medians):")
    for r in results:
        print(f"  up   {r.servers:>3}: {share_line(r.up_steps_s, r.up_s)}")
        print(f"  down {r.servers:>3}: {share_line(r.down_commands_s, r.down_s)}")
    print()
    if summary["up_per_server_ratio"] is not None:
        low, high = summary["ratio_sizes"]
        print(f"per-server up time, {high} servers / {low} servers: {summary['up_per_server_ratio']:.2f}x")


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes are comma-separated server counts, got {text!r}") from None
    if not sizes or min(sizes) < 2 or max(sizes) > MAX_SERVERS:
        raise argparse.ArgumentTypeError(f"give server counts from 2 to {MAX_SERVERS} (two tiers of 32-port switches)")
    return list(dict.fromkeys(sizes))


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise KeyboardInterrupt


def run_all(sizes: list[int], runs: int, quiet: bool, routings: list[str]) -> list[Result]:
    results = []
    for servers in sizes:
        for routing in routings:
            if not quiet:
                print(f"measuring {servers} servers, {routing} ...", file=sys.stderr, flush=True)
            results.append(measure(servers, runs, quiet, routing))
    return results


def chosen_routings(parser: argparse.ArgumentParser, asked: list[str] | None) -> list[str]:
    routings = asked or (["frr", "static"] if frr_missing() is None else ["static"])
    if "frr" in routings and frr_missing() is not None:
        parser.error(f"--routing frr: {frr_missing()}")
    return routings


def parse_routings(text: str) -> list[str]:
    chosen = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not chosen or set(chosen) - set(LAB_PREFIXES):
        raise argparse.ArgumentTypeError(f"routing: frr, static or both (frr,static), got {text!r}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=list(DEFAULT_SIZES),
                        help="comma-separated server counts (default: 8,32,64)")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="runs per size (default: 3)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    parser.add_argument("--routing", type=parse_routings, default=None,
                        help="frr, static or frr,static (default: both where FRR is installed, else static)")
    args = parser.parse_args(argv)
    routings = chosen_routings(parser, args.routing)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if os.geteuid() != 0:
        print("lab_scale.py builds network namespaces and veths: run it as root (e.g. with sudo)",
              file=sys.stderr)
        return 2

    signal.signal(signal.SIGTERM, raise_interrupt)  # so `finally` tears down on kill too
    results: list[Result] = []
    interrupted = False
    try:
        results = run_all(args.sizes, args.runs, args.json, routings)
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: labs taken down", file=sys.stderr)
    finally:
        with no_interrupts():
            for servers in args.sizes:  # belt and braces: nothing of ours stays up
                for routing in routings:
                    lab_down(bench_lab_id(routing, servers))
    left = leftover_namespaces()
    summary = summary_of(results) if results else {}
    if args.json:
        print(json.dumps({"results": [asdict(r) for r in results], **summary,
                          "leftover_namespaces": left, "interrupted": interrupted}, indent=2))
    elif results:
        print_table(results, summary)
    check = (f"`ip netns list`: {len(left)} namespace(s) LEFT BEHIND: {', '.join(left)}" if left
             else f"`ip netns list`: no namespace starting with {' or '.join(NS_PREFIXES)} is left")
    print(check, file=sys.stderr if args.json else sys.stdout)
    return 1 if left or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
