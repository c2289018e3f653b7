"""Measure the pairs of a pattern, round by round, pairs of a round at once; compare each with
what the Plan says it should carry; keep everything in SQLite."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpunet.bench.expected import BELOW_EXPECTED, expected_gbps, plane_interface
from gpunet.bench.iperf3 import parse_iperf3_json
from gpunet.bench.schedule import Pair, Round
from gpunet.bench.store import Measurement
from gpunet.errors import ParseError
from gpunet.model.plan import Plan

NodeArgv = Callable[[str, Sequence[str]], list[str]]  # node, command -> argv that runs it there
Progress = Callable[[int, int], None]  # (rounds done, rounds)


@dataclass(frozen=True)
class BenchSetup:
    plan: Plan
    on_node: NodeArgv
    plane: str = "compute"
    seconds: int = 3
    scale: float | None = None  # lab Mbit/s per plan Gbit/s; None on real hardware
    # Parallel TCP streams per pair: one flow rides one ECMP path, and two flows hashed onto one
    # uplink halve each other; several streams per pair measure the fabric, not one hash.
    streams: int = 8


def run_rounds(setup: BenchSetup, rounds: list[Round], progress: Progress = lambda d, n: None) -> list[Measurement]:
    results: list[Measurement] = []
    for done, pairs in enumerate(rounds):
        progress(done, len(rounds))
        with ThreadPoolExecutor(max_workers=max(1, len(pairs))) as pool:
            results += list(pool.map(lambda p: measure_pair(setup, p), pairs))
    progress(len(rounds), len(rounds))
    return results


def measure_pair(setup: BenchSetup, pair: Pair) -> Measurement:
    """iperf3 source -> target on the plane: a one-off server (-1) on the target, the client's JSON."""
    source, target = pair
    address = plane_interface(setup.plan, target, setup.plane).address or ""
    server_ip = address.split("/")[0]
    server = subprocess.Popen(setup.on_node(target, ["iperf3", "-s", "-1", "-B", server_ip]),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)  # the server binds before the client connects
        command = ["iperf3", "-c", server_ip, "-t", str(setup.seconds), "-P", str(setup.streams), "-J"]
        client = subprocess.run(setup.on_node(source, command), capture_output=True, text=True,
                                timeout=setup.seconds + 30, check=False)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=10)
    return _measurement(setup, pair, client.stdout)


def _measurement(setup: BenchSetup, pair: Pair, raw: str) -> Measurement:
    expected = expected_gbps(setup.plan, pair[0], pair[1], setup.plane, setup.scale)
    try:
        result = parse_iperf3_json(raw)
    except ParseError:
        result = None
    value = result.received_gbps if result and not result.error else 0.0
    status = "failed" if result is None or result.error else "low" if value < BELOW_EXPECTED * expected else "ok"
    return Measurement(source=pair[0], destination=pair[1], plane=setup.plane, metric="throughput", value=value,
                       unit="Gb/s", expected=round(expected, 6), status=status, raw=raw)
