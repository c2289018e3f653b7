"""Pingmesh-style peer probes: a background thread pings a bounded number of peers per interval
(round-robin over every peer on every shared plane) and keeps RTT histograms and loss counts; a
scrape only reads what is there, so probing never slows a scrape."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from gpunet.model.plan import Node, Plan
from gpunet.probe.peers import PeerProbe, plan_probes
from gpunet.runner import CommandRunner, run_local

# Same-leaf RTTs are tens of µs, a congested fabric reaches milliseconds, a lost probe times out
# at 1 s: buckets from 50 µs to 1 s.
RTT_BUCKETS = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0)
# rtt min/avg/max/mdev = 0.041/0.045/0.050/0.004 ms
PING_RTT = re.compile(r"= [0-9.]{1,20}/([0-9]{1,9}(?:\.[0-9]{1,9})?)/")
Ping = Callable[[PeerProbe], float | None]  # seconds, or None when lost


@dataclass
class PeerStats:
    probes: int = 0
    failures: int = 0
    consecutive_failures: int = 0  # a dead peer, however rarely a big cluster gets round to it
    rtt_sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * len(RTT_BUCKETS))

    def record(self, rtt: float | None) -> None:
        self.probes += 1
        if rtt is None:
            self.failures += 1
            self.consecutive_failures += 1
            return
        self.consecutive_failures = 0
        self.rtt_sum += rtt
        for index, bound in enumerate(RTT_BUCKETS):
            if rtt <= bound:
                self.buckets[index] += 1

    def cumulative(self) -> list[tuple[str, float]]:
        answered = self.probes - self.failures
        return [*((f"{b:g}", float(n)) for b, n in zip(RTT_BUCKETS, self.buckets, strict=True)),
                ("+Inf", float(answered))]


def ping_probes(plan: Plan, node: Node) -> list[PeerProbe]:
    """One ping per peer and shared plane (its first address there): on an 8-rail plane, eight
    series per peer would multiply the exporter's cardinality for little more information."""
    chosen: dict[tuple[str, str], PeerProbe] = {}
    for probe in plan_probes(plan, node):
        if probe.kind == "ping":
            chosen.setdefault((probe.plane, probe.peer), probe)
    return list(chosen.values())


def system_ping(run: CommandRunner = run_local) -> Ping:
    def ping(probe: PeerProbe) -> float | None:
        done = run(["ping", "-n", "-q", "-c", "1", "-W", "1", "-I", probe.source, "--", probe.target],
                   check=False, timeout=5)
        found = PING_RTT.search(done.stdout)
        return float(found.group(1)) / 1000 if done.returncode == 0 and found else None
    return ping


class PeerProber:
    """Probes `per_round` peers every `interval` seconds in a daemon thread until stopped."""

    def __init__(self, probes: list[PeerProbe], ping: Ping, interval: float = 10.0, per_round: int = 32) -> None:
        self.probes, self.ping, self.interval, self.per_round = probes, ping, interval, per_round
        self.stats: dict[tuple[str, str], PeerStats] = {(p.plane, p.peer): PeerStats() for p in probes}
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._next = 0

    def probe_round(self) -> None:
        """One round: the next `per_round` probes (wrapping around), pinged in parallel."""
        if not self.probes:
            return
        count = min(self.per_round, len(self.probes))
        chosen = [self.probes[(self._next + i) % len(self.probes)] for i in range(count)]
        self._next = (self._next + count) % len(self.probes)
        with ThreadPoolExecutor(max_workers=min(16, count)) as pool:
            rtts = list(pool.map(self.ping, chosen))
        with self._lock:
            for probe, rtt in zip(chosen, rtts, strict=True):
                self.stats[(probe.plane, probe.peer)].record(rtt)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._loop, name="gpunet-peer-prober", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.probe_round()
            self._stop.wait(self.interval)

    def collect(self) -> list[Metric]:
        labels = ["plane", "peer"]
        rtt = HistogramMetricFamily("gpunet_peer_rtt_seconds", "Round-trip time of answered probes.", labels=labels)
        sent = CounterMetricFamily("gpunet_peer_probes", "Probes sent to the peer.", labels=labels)
        lost = CounterMetricFamily("gpunet_peer_probe_failures", "Probes the peer did not answer.", labels=labels)
        run = GaugeMetricFamily("gpunet_peer_consecutive_failures", "Unanswered probes since the last answer.",
                                labels=labels)
        with self._lock:
            for (plane, peer), stats in sorted(self.stats.items()):
                rtt.add_metric([plane, peer], stats.cumulative(), stats.rtt_sum)
                sent.add_metric([plane, peer], stats.probes)
                lost.add_metric([plane, peer], stats.failures)
                run.add_metric([plane, peer], stats.consecutive_failures)
        return [rtt, sent, lost, run]
