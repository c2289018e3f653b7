"""How long `gpunet lab up` and `lab down` take for labs of 8, 32 and 64 servers.

For each size the script designs a plan shaped like tests/fixtures/lab/small.yaml, scaled up:
a 10G management plane of 16-port switches (one switch or spine-leaf, as the design picks) and
a 100G RoCE spine-leaf compute plane (8-port switches up to 32 servers, 16-port beyond, so there
are several leaves and at least two spines). All subnets are inside 198.18.0.0/15. Then, per
run, it times:

* up:   ``lab_up(plan, lab_id, max_nodes=servers)`` (nothing is sliced away)
* down: ``lab_down(lab_id)``

with lab ids ``bs8``, ``bs32``, ``bs64`` (namespaces ``gnbs<size>-<device>``). It reports the
median up and down seconds over the runs (default 3), the namespaces and veth cables the lab
holds (from the returned LabState), seconds per server, where the time of `up` goes (each
build step, timed through lab_up's progress callback) and of `down` (each command it runs),
and how the per-server up time of the largest size compares with the smallest.

Every lab is taken down in a ``finally`` block (also on Ctrl-C, SIGTERM or an error), and at
the end the script checks that ``ip netns list`` shows no namespace starting with ``gnbs``.
It needs root (network namespaces); without it, it exits with status 2.

Usage::

    sudo python benchmarks/lab_scale.py
    sudo python benchmarks/lab_scale.py --sizes 8,32 --runs 1 --json
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
from types import FrameType
from typing import Any

from gpunet.design import design
from gpunet.lab.build import lab_down, lab_up
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.runner import run_local
from gpunet.spec.checks import spec_problems

DEFAULT_SIZES = (8, 32, 64)
DEFAULT_RUNS = 3
LAB_PREFIX = "bs"  # lab ids bs8, bs32, ...; namespaces gnbs8-...
NS_PREFIX = f"gn{LAB_PREFIX}"
MGMT_RADIX = 16
PLURAL = {"leaf": "leaves"}
BEFORE_STEPS = "prepare"  # slice, blueprint and state file, before the first progress call


def compute_radix(servers: int) -> int:
    """8-port switches while two tiers of them hold the servers (8 * 8 / 2 = 32 at 1:1), else 16."""
    return 8 if servers <= 8 * 8 // 2 else 16


def spec_dict(servers: int) -> dict[str, Any]:
    """tests/fixtures/lab/small.yaml with `servers` nodes, as the YAML loader would see it."""
    radix = compute_radix(servers)
    return {
        "version": 1,
        "site": {"name": f"labbench{servers}"},
        "planes": {
            "management": {
                "subnet": "198.18.0.0/24",
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


def one_run(plan: Plan, lab_id: str, servers: int) -> tuple[dict[str, Any], int, int]:
    """Time one lab_up and one lab_down; the lab is taken down whatever happens."""
    steps, down_timer = StepTimer(), CommandTimer()
    up_s = down_s = 0.0
    try:
        start = time.perf_counter()
        steps.start = start
        state = lab_up(plan, lab_id, max_nodes=servers, progress=steps)
        up_s = time.perf_counter() - start
        steps("", 0, 0)  # close the last interval: after progress("up"), lab_up writes the state file
    finally:
        down_s = teardown(lab_id, down_timer)
    commands = dict(down_timer.seconds)
    commands["(python)"] = max(0.0, down_s - sum(commands.values()))
    sample = {"up_s": up_s, "down_s": down_s, "up_steps_s": steps.seconds, "down_commands_s": commands,
              "down_commands_n": dict(down_timer.counts)}
    return sample, len(state.namespaces), len(state.veths)


def median_by_key(dicts: list[dict[str, float]]) -> dict[str, float]:
    keys = list(dict.fromkeys(k for d in dicts for k in d))
    return {k: statistics.median(d.get(k, 0.0) for d in dicts) for k in keys}


def measure(servers: int, runs: int, quiet: bool) -> Result:
    plan = build_plan(servers)
    lab_id = f"{LAB_PREFIX}{servers}"
    result = Result(servers=servers, lab_id=lab_id, fabric=fabric_summary(plan))
    teardown(lab_id)  # a lab left by an earlier, killed run would make lab_up return at once
    for run in range(runs):
        sample, result.namespaces, result.veths = one_run(plan, lab_id, servers)
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
    return result


def leftover_namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip() and line.startswith(NS_PREFIX)]


# --- reporting ----------------------------------------------------------------------------------

def summary_of(results: list[Result]) -> dict[str, Any]:
    ordered = sorted(results, key=lambda r: r.servers)
    ratio = ordered[-1].up_s_per_server / ordered[0].up_s_per_server if ordered else None
    return {"up_per_server_ratio": ratio, "ratio_sizes": [ordered[0].servers, ordered[-1].servers] if ordered else []}


def share_line(parts: dict[str, float], total: float, top: int = 4) -> str:
    ranked = sorted(parts.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{name} {s:.2f} s ({100 * s / total:.0f}%)" for name, s in ranked if total > 0)


def print_table(results: list[Result], summary: dict[str, Any]) -> None:
    for r in results:
        print(f"{r.servers} servers (lab {r.lab_id}): {r.fabric}; {r.runs} run(s)")
    print()
    head = ("servers", "namespaces", "veths", "up s", "down s", "up s/server", "down s/server")
    print("{:>7} {:>10} {:>6} {:>7} {:>7} {:>12} {:>14}".format(*head))
    for r in results:
        print(f"{r.servers:>7} {r.namespaces:>10} {r.veths:>6} {r.up_s:>7.2f} {r.down_s:>7.2f} "
              f"{r.up_s_per_server:>12.3f} {r.down_s_per_server:>14.3f}")
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
    if not sizes or min(sizes) < 1 or max(sizes) > 99:
        raise argparse.ArgumentTypeError("give server counts from 1 to 99 (lab ids are bs<size>, 4 characters)")
    return list(dict.fromkeys(sizes))


def raise_interrupt(signum: int, frame: FrameType | None) -> None:
    del signum, frame
    raise KeyboardInterrupt


def run_all(sizes: list[int], runs: int, quiet: bool) -> list[Result]:
    results = []
    for servers in sizes:
        if not quiet:
            print(f"measuring {servers} servers ...", file=sys.stderr, flush=True)
        results.append(measure(servers, runs, quiet))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=list(DEFAULT_SIZES),
                        help="comma-separated server counts (default: 8,32,64)")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="runs per size (default: 3)")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    args = parser.parse_args(argv)
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
        results = run_all(args.sizes, args.runs, args.json)
    except KeyboardInterrupt:
        interrupted = True
        print("interrupted: labs taken down", file=sys.stderr)
    finally:
        with no_interrupts():
            for servers in args.sizes:  # belt and braces: nothing of ours stays up
                lab_down(f"{LAB_PREFIX}{servers}")
    left = leftover_namespaces()
    summary = summary_of(results) if results else {}
    if args.json:
        print(json.dumps({"results": [asdict(r) for r in results], **summary,
                          "leftover_namespaces": left, "interrupted": interrupted}, indent=2))
    elif results:
        print_table(results, summary)
    check = (f"`ip netns list`: {len(left)} {NS_PREFIX}* namespace(s) LEFT BEHIND: {', '.join(left)}" if left
             else f"`ip netns list`: no namespace starting with {NS_PREFIX!r} is left")
    print(check, file=sys.stderr if args.json else sys.stdout)
    return 1 if left or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
