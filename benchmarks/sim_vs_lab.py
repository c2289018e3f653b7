"""The simulator against iperf3 in the lab: five traffic patterns, per flow and in aggregate (root).

Two labs, one at a time, each always taken down: `s1`, the lab fixture (tests/fixtures/lab/small.yaml:
8 servers, 2 leaves of 4 servers and 4 uplinks, 2 spines, 100G) and `s2`, the same at 2:1 (4 servers
and 2 uplinks a leaf, one spine). Every cable is a veth shaped with tbf at --scale Mbit/s per plan
Gbit/s; switches route with static ECMP (fib_multipath_hash_policy=3 on the 5-tuple, a seed per
switch). Patterns (every pair --streams TCP connections, each its own iperf3 client with its own source
port; all pairs of a pattern at once; a pair's throughput is the sum of its connections'):

* ring across leaves: gpu1 -> gpu5 -> gpu2 -> gpu6 -> gpu3 -> gpu7 -> gpu4 -> gpu8 -> gpu1 (8 flows)
* all-to-all: gpu1, gpu2, gpu5, gpu6 each to the three others (12 flows)
* two jobs sharing spines: job A gpu1 <-> gpu5 and gpu2 <-> gpu6, job B gpu3 -> gpu7 and gpu4 -> gpu8
  with three times the connections (6 pairs)
* one spine link down: the ring, with comp-leaf001:5 (a leaf-spine cable) down
* 2:1 oversubscription (s2): gpu1..gpu4 -> gpu5..gpu8 (4 flows over 2 uplinks)

Modelled, not tuned: each client binds its source port (--cport), so its 5-tuple is known, and the
path of every connection and of its ACKs is read from the switches' own kernels (`ip route get ...
iif ... ipproto tcp sport ... dport ...` at each hop: the same hash and next hops that forward the
packets). The lab's rate is the plan's Gb/s times --scale Mbit/s, and iperf3 counts TCP payload:
(MTU - 52) / (MTU + 14) of what tbf passes. Two sharing models over those paths: max-min fair (the
simulator's, judged against the target), and, for information, TCP's (cubic in its
Reno-friendly region, as here where queues dwarf the path's own delay: flows on a bottleneck share
in inverse proportion to their round-trip times; a round trip is the measured ping RTT plus each
full queue the data or its ACKs cross, each tbf's latency plus burst over rate as `tc` reports
them). Printed per pattern: the median over pairs of measured and simulated (max-min) Mbit/s and
their error, the aggregate of each and its error, the worst pair, the TCP model's median and its
error, and the simulator's own hashing over the same next hops (median over 20 seeds of the pairs'
median). Target: within 10 %.

Usage::

    sudo python benchmarks/sim_vs_lab.py [--seconds 10] [--scale 0.5] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpunet.api import plan_spec
from gpunet.lab.build import lab_down, lab_up, node_argv
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.state import LabState
from gpunet.model.plan import Plan
from gpunet.sim.fabric import SimFabric, read_fabric
from gpunet.sim.pairs import pair_rates, tcp_pair_rates
from gpunet.sim.routing import Path as SimPath

SMALL = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "lab" / "small.yaml"
OVERSUBSCRIBED = "      switch: {model: eth-8x100G, radix: 8, port_speed: 100G}\n"
TWO_TO_ONE = OVERSUBSCRIBED + "      oversubscription: {leaf: 2, spine: 1}\n      nodes_per_leaf: 4\n"
RING = ["gpu1", "gpu5", "gpu2", "gpu6", "gpu3", "gpu7", "gpu4", "gpu8"]
TARGET = 0.10
HASH_SEEDS = 20
FIRST_PORT, FIRST_CPORT = 5301, 40100
OMIT = 4  # seconds left out at the start, while slow start and the shares settle


@dataclass
class Pattern:
    name: str
    lab: str  # "1:1" or "2:1"
    flows: list[tuple[str, str]]
    down: str | None = None
    result: dict[str, float] = field(default_factory=dict)


def patterns() -> list[Pattern]:
    ring = [(a, b) for a, b in zip(RING, RING[1:] + RING[:1], strict=True)]
    four = ["gpu1", "gpu2", "gpu5", "gpu6"]
    jobs = [("gpu1", "gpu5"), ("gpu5", "gpu1"), ("gpu2", "gpu6"), ("gpu6", "gpu2"), *[("gpu3", "gpu7")] * 3,
            *[("gpu4", "gpu8")] * 3]
    return [Pattern("ring across leaves", "1:1", ring),
            Pattern("all-to-all", "1:1", [(a, b) for a in four for b in four if a != b]),
            Pattern("two jobs sharing spines", "1:1", jobs),
            Pattern("one spine link down", "1:1", ring, down="comp-leaf001:5"),
            Pattern("2:1 oversubscription", "2:1", [(f"gpu{i}", f"gpu{i + 4}") for i in range(1, 5)])]


def plans() -> dict[str, Plan]:
    text = SMALL.read_text()
    assert OVERSUBSCRIBED in text
    with tempfile.TemporaryDirectory(prefix="gpunet-sim-vs-lab-") as where:
        two = Path(where) / "small-2to1.yaml"
        two.write_text(text.replace(OVERSUBSCRIBED, TWO_TO_ONE))
        return {"1:1": plan_spec(SMALL), "2:1": plan_spec(two)}


def address(state: LabState, node: str) -> str:
    return state.address_map[f"{node}/ens1"].lab.split("/")[0]


def resources(fabric: SimFabric) -> dict[tuple[str, str], int]:
    """(from device:port, to device:port) -> the simulator's resource for that cable direction."""
    found = {}
    for i, link in enumerate(fabric.links):
        a, b = f"{link.a.device}:{link.a.port}", f"{link.b.device}:{link.b.port}"
        found[a, b], found[b, a] = 2 * i, 2 * i + 1
    return found


def kernel_path(state: LabState, fabric: SimFabric, flow: tuple[str, str, int, int]) -> SimPath:
    """The cables a TCP 5-tuple crosses, asked of each switch's kernel hop by hop."""
    src, dst, sport, dport = flow
    src_ip, dst_ip = address(state, src), address(state, dst)
    by_end = {(v.a_ns, v.a_if): v for v in state.veths} | {(v.b_ns, v.b_if): v for v in state.veths}
    names = resources(fabric)
    first = next(v for v in state.veths if v.a_end == f"{src}:ens1")
    path: SimPath = {names[first.a_end, first.b_end]: 1.0}
    ns, iif = first.b_ns, first.b_if
    for _ in range(8):
        out = subprocess.run(["ip", "-n", ns, "-j", "route", "get", dst_ip, "from", src_ip, "iif", iif, "ipproto",
                              "tcp", "sport", str(sport), "dport", str(dport)],
                             capture_output=True, text=True, check=True).stdout
        dev = json.loads(out)[0]["dev"]
        cable = by_end[ns, dev]
        here, there = (cable.a_end, cable.b_end) if cable.a_ns == ns else (cable.b_end, cable.a_end)
        path[names[here, there]] = 1.0
        ns, iif = (cable.b_ns, cable.b_if) if cable.a_ns == ns else (cable.a_ns, cable.a_if)
        if there == f"{dst}:ens1":
            return path
    raise RuntimeError(f"no path from {src} to {dst} in 8 hops")


def queue_delays(state: LabState, fabric: SimFabric) -> np.ndarray:
    """Seconds a full queue holds, per cable direction: each veth end's tbf, read from the kernel
    (its latency plus its burst over its rate)."""
    names = resources(fabric)
    delay = np.zeros(fabric.capacity.size)
    for v in state.veths:
        for ns, dev, here, there in ((v.a_ns, v.a_if, v.a_end, v.b_end), (v.b_ns, v.b_if, v.b_end, v.a_end)):
            if (here, there) not in names or not ns:
                continue
            shown = subprocess.run(["tc", "-n", ns, "-j", "qdisc", "show", "dev", dev], capture_output=True,
                                   text=True, check=True).stdout
            tbf = next(q for q in json.loads(shown) if q["kind"] == "tbf")["options"]
            # tc derives the byte limit from the latency: rate x lat + burst; held that long when full
            delay[names[here, there]] = tbf["lat"] / 1e6 + tbf["burst"] / tbf["rate"]
    return delay


def base_rtt(lab_id: str, state: LabState) -> float:
    """The lab's round trip with no queue, measured: the median of 5 pings across the leaves, in s."""
    done = subprocess.run(node_argv(lab_id, "gpu1", ["ping", "-c", "5", "-i", "0.2", "-q", address(state, "gpu5")]),
                          capture_output=True, text=True, check=True).stdout
    found = re.search(r"= [\d.]+/([\d.]+)/", done)
    if not found:
        raise RuntimeError(f"no rtt in ping's output: {done[-200:]}")
    return float(found.group(1)) / 1000


def measure(lab_id: str, state: LabState, flows: list[tuple[str, str, int, int]], seconds: int) -> list[float]:
    """Every flow at once, one iperf3 client and server each (killed by PID); receiver Mbit/s per flow."""
    servers = [_start(lab_id, dst, ["iperf3", "-s", "-1", "-B", address(state, dst), "-p", str(dport)])
               for _, dst, _, dport in flows]
    try:
        time.sleep(max(1.0, 0.05 * len(flows)))  # every server listening before the first client
        start = time.monotonic() + 1.0 + 0.1 * len(flows)  # every client spawned by then, all begin together
        clients = [_start(lab_id, src, ["sh", "-c", 'sleep "$1"; shift; exec "$@"', "sh",
                                        f"{max(0.0, start - time.monotonic()):.3f}",
                                        "iperf3", "-c", address(state, dst), "-B", address(state, src), "-p",
                                        str(dport), "--cport", str(sport), "-t", str(seconds), "-O", str(OMIT), "-C",
                                        "cubic", "-J"])
                   for src, dst, sport, dport in flows]
        done = [json.loads(c.communicate(timeout=seconds + 60)[0] or "{}") for c in clients]
        failed = [d.get("error", "no output") for d in done if "sum_received" not in d.get("end", {})]
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(done)} iperf3 clients failed: {failed[0]}")
        return [d["end"]["sum_received"]["bits_per_second"] / 1e6 for d in done]
    finally:
        for proc in servers:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _start(lab_id: str, node: str, command: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(node_argv(lab_id, node, command), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)


def one(lab_id: str, state: LabState, plan: Plan, pattern: Pattern, args: argparse.Namespace) -> None:
    fabric = read_fabric(plan, "compute")
    if pattern.down:
        apply_fault(lab_id, pattern.down, "down")
        fabric = fabric.with_down([pattern.down])
    try:
        streams = [(s, d) for s, d in pattern.flows for _ in range(args.streams)]
        flows = [(s, d, FIRST_CPORT + i, FIRST_PORT + i) for i, (s, d) in enumerate(streams)]
        paths = [[kernel_path(state, fabric, f)] for f in flows]
        acks = [[kernel_path(state, fabric, (d, s, dport, sport))] for s, d, sport, dport in flows]
        delays, rtt = queue_delays(state, fabric), base_rtt(lab_id, state)
        try:
            measured = measure(lab_id, state, flows, args.seconds)
        except RuntimeError as exc:  # a client that could not connect on a host this loaded: once more
            print(f"  {pattern.name}: {exc}; measuring again", file=sys.stderr)
            measured = measure(lab_id, state, flows, args.seconds)
    finally:
        if pattern.down:
            heal(lab_id, pattern.down)
    mtu = next(p.mtu for p in plan.planes if p.name == "compute")
    to_mbit = args.scale * (mtu - 52) / (mtu + 14)  # plan Gb/s -> lab Mbit/s of TCP payload
    each = [(s, d, 0) for s, d in streams]  # every connection on its own, then summed per pair
    simulated = by_pair(streams, [r * to_mbit for r in pair_rates(fabric, each, paths=paths).pairs])
    tcp = by_pair(streams, [r * to_mbit for r in tcp_pair_rates(fabric, each, paths, acks, queue_delay=delays,
                                                                base_rtt=rtt).pairs])
    unique = list(dict.fromkeys(streams))
    counts = [streams.count(pair) for pair in unique]
    hashed = [statistics.median(r * to_mbit for r in pair_rates(fabric, [(s, d, 0) for s, d in unique], counts,
                                                                 seed=seed).pairs) for seed in range(HASH_SEEDS)]
    measured = by_pair(streams, measured)
    pattern.result = {
        "flows": len(measured), "connections": len(flows), "measured_median": statistics.median(measured),
        "simulated_median": statistics.median(simulated), "measured_sum": sum(measured),
        "simulated_sum": sum(simulated), "tcp_model_median": statistics.median(tcp), "tcp_model_sum": sum(tcp),
        "hash_model_median": statistics.median(hashed), "base_rtt_ms": rtt * 1000,
        "worst_flow_error": max(abs(s - m) / m for s, m in zip(simulated, measured, strict=True) if m),
        "measured": measured, "simulated": simulated,
    }
    r = pattern.result
    r["median_error"] = abs(r["simulated_median"] - r["measured_median"]) / r["measured_median"]
    r["sum_error"] = abs(r["simulated_sum"] - r["measured_sum"]) / r["measured_sum"]
    r["tcp_model_median_error"] = abs(r["tcp_model_median"] - r["measured_median"]) / r["measured_median"]


def by_pair(streams: list[tuple[str, str]], values: list[float]) -> list[float]:
    """Connection values summed per pair (source, destination), pairs in order of first appearance."""
    sums: dict[tuple[str, str], float] = {}
    for pair, value in zip(streams, values, strict=True):
        sums[pair] = sums.get(pair, 0.0) + value
    return list(sums.values())


def run_lab(lab_id: str, plan: Plan, chosen: list[Pattern], args: argparse.Namespace) -> None:
    taken = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    if any(line.startswith(f"gn{lab_id}-") for line in taken.splitlines()):
        raise SystemExit(f"lab {lab_id} is already up (ip netns list): not touching it")
    try:
        state = lab_up(plan, lab_id, scale=args.scale)
        for pattern in chosen:
            one(lab_id, state, plan, pattern, args)
            print(f"  {pattern.name}: done", file=sys.stderr)
    finally:
        lab_down(lab_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=16)
    parser.add_argument("--streams", type=int, default=4, help="TCP connections per pair (each its own 5-tuple)")
    parser.add_argument("--scale", type=float, default=0.5, help="Mbit/s per plan Gbit/s (lab up --scale)")
    parser.add_argument("--only", default="", help="run the patterns whose name holds this text")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: it builds labs s1 and s2")
    chosen, built = [p for p in patterns() if args.only in p.name], plans()
    started = time.monotonic()
    for lab_id, shape in (("s1", "1:1"), ("s2", "2:1")):
        if any(p.lab == shape for p in chosen):
            run_lab(lab_id, built[shape], [p for p in chosen if p.lab == shape], args)
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"patterns": [{"name": p.name, **p.result} for p in chosen], "load": load,
                          "seconds": time.monotonic() - started}, indent=1))
        return
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; {args.seconds} s a "
          f"pattern at {args.scale:g} Mbit/s per plan Gbit/s; Mbit/s of TCP payload")
    print(f"{'pattern':<26} {'pairs':>5} {'median meas':>11} {'median sim':>10} {'err':>6} {'sum meas':>9} "
          f"{'sum sim':>8} {'err':>6} {'worst pair':>10} {'tcp model':>9} {'err':>6} {'hash model':>10}")
    for p in chosen:
        r = p.result
        print(f"{p.name:<26} {r['flows']:>5.0f} {r['measured_median']:>11.1f} {r['simulated_median']:>10.1f} "
              f"{r['median_error']:>6.1%} {r['measured_sum']:>9.1f} {r['simulated_sum']:>8.1f} {r['sum_error']:>6.1%} "
              f"{r['worst_flow_error']:>10.1%} {r['tcp_model_median']:>9.1f} {r['tcp_model_median_error']:>6.1%} "
              f"{r['hash_model_median']:>10.1f}")
    met = all(p.result["median_error"] <= TARGET and p.result["sum_error"] <= TARGET for p in chosen)
    print(f"within {TARGET:.0%} (median over flows and aggregate): {'yes' if met else 'NO'}; "
          f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
