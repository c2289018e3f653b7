"""A collective's phases run over the fabric: every transfer split over its connections, each
connection routed, the rates shared max-min fairly over every cable direction, the node inside
(NVLink per GPU, PCIe per NIC) as capacities of its own; a step lasts its latency plus its chunk
over the slowest connection's rate, and the collective its steps.

time(S) = base + sum over phases of steps * (latency + S * max over connections of fraction / rate)"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gpunet.sim.collectives import BASE_LATENCY_US, Job, Pattern, Phase
from gpunet.sim.fabric import Nic, SimFabric
from gpunet.sim.hardware import NodeLimits
from gpunet.sim.maxmin import Incidence, bottlenecks, max_min_rates
from gpunet.sim.report import Bottleneck
from gpunet.sim.routing import Path, mix

Route = Callable[[Nic, Nic, int], Path | None]  # src NIC, dst NIC, connection key
TOP_BOTTLENECKS = 5


@dataclass
class PhaseResult:
    steps: int
    latency_us: float
    seconds_per_byte: float  # of S, for the slowest connection (inf: a transfer has no path)
    network_spb: float
    local_spb: float
    spine_bytes: float = 0.0
    network_bytes: float = 0.0
    disconnected: int = 0
    bottlenecks: list[Bottleneck] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    """What every phase of one simulation shares."""

    fabric: SimFabric
    job: Job
    route: Route
    connections: int
    limits: NodeLimits
    seed: int


def run_phases(run: Run, pattern: Pattern) -> list[PhaseResult]:
    capacity = run.limits.capped(run.fabric, run.job.nodes)
    return [_phase(run, phase, capacity) for phase in pattern.phases]


def collective_seconds(results: Sequence[PhaseResult], size: int) -> float:
    return BASE_LATENCY_US * 1e-6 + sum(r.steps * (r.latency_us * 1e-6 + size * r.seconds_per_byte) for r in results)


def nic_of(fabric: SimFabric, node: str, rail: int) -> Nic | None:
    """The node's NIC on `rail`; where it is down, the next one (NCCL falls back to another NIC,
    reached over NVLink)."""
    nics = fabric.nics.get(node, [])
    for nic in nics:
        if nic.rail == rail and fabric.capacity[nic.up] > 0:
            return nic
    alive = [n for n in nics if fabric.capacity[n.up] > 0]
    return alive[rail % len(alive)] if alive else None


def connection_key(seed: int, src: tuple[int, int], dst: tuple[int, int], connection: int) -> int:
    """A connection's 5-tuple stand-in: its ends (node, rail), its index and the seed, hashed."""
    return mix(mix(mix(seed) ^ (src[0] << 24) ^ src[1]) ^ (dst[0] << 24) ^ (dst[1] << 8) ^ connection)


@dataclass
class _Routed:
    """A phase's connections on their paths: the incidence, each one's fraction of S, and totals."""

    flows: list[int] = field(default_factory=list)
    resources: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    fractions: list[float] = field(default_factory=list)
    spine_bytes: float = 0.0
    network_bytes: float = 0.0
    disconnected: int = 0

    def add(self, path: Path, fraction: float, spine: frozenset[int]) -> None:
        flow = len(self.fractions)
        self.fractions.append(fraction)
        for resource, weight in path.items():
            self.flows.append(flow)
            self.resources.append(resource)
            self.weights.append(weight)
        self.network_bytes += fraction
        crossing = sum(w for r, w in path.items() if r in spine) / 2  # up and down
        self.spine_bytes += min(1.0, crossing) * fraction

    def incidence(self) -> Incidence:
        return Incidence(np.asarray(self.flows, dtype=np.int64), np.asarray(self.resources, dtype=np.int64),
                         np.asarray(self.weights, dtype=np.float64), len(self.fractions))


def _route(run: Run, phase: Phase) -> _Routed:
    """Every connection of every transfer on its path (or counted as disconnected)."""
    fabric, routed, spine = run.fabric, _Routed(), run.fabric.spine_cables()
    index = {name: i for i, name in enumerate(fabric.nics)}
    for send in phase.sends:
        src = nic_of(fabric, run.job.nodes[send.src], send.src_rail)
        dst = nic_of(fabric, run.job.nodes[send.dst], send.dst_rail)
        for c in range(run.connections):
            path = None
            if src is not None and dst is not None:
                key = connection_key(run.seed, (index[src.node], src.rail), (index[dst.node], dst.rail), c)
                path = run.route(src, dst, key)
            if path is None:
                routed.disconnected += 1
            else:
                routed.add(path, send.fraction / run.connections, spine)
    return routed


def _phase(run: Run, phase: Phase, capacity: np.ndarray) -> PhaseResult:
    routed = _route(run, phase)
    incidence = routed.incidence()
    rates = max_min_rates(incidence, capacity) if routed.fractions else np.zeros(0)
    frac = np.asarray(routed.fractions)
    network_spb = float(np.max(frac * 8 / (rates * 1e9))) if routed.fractions else 0.0
    local_spb = run.limits.local_seconds_per_byte(phase.local)
    result = PhaseResult(phase.steps, phase.latency_us, max(network_spb, local_spb), network_spb, local_spb,
                         routed.spine_bytes, routed.network_bytes, routed.disconnected)
    if routed.disconnected:
        result.seconds_per_byte = float("inf")
    elif routed.fractions and network_spb >= local_spb:
        result.bottlenecks = _bottlenecks(run.fabric, incidence, capacity, rates, fractions=frac, slowest=network_spb)
    return result


def _bottlenecks(fabric: SimFabric, incidence: Incidence, capacity: np.ndarray, rates: np.ndarray, *,
                 fractions: np.ndarray, slowest: float) -> list[Bottleneck]:
    """The full cable directions the slowest connections are bound by, most bound first."""
    spb = fractions * 8 / (rates * 1e9)
    critical = spb >= slowest * (1 - 1e-6)
    bound = bottlenecks(incidence, capacity, rates)
    counts = Counter(int(r) for r in bound[critical] if r >= 0)
    return [Bottleneck(cable=fabric.cable_name(r), direction=fabric.direction(r), tier=fabric.tier[r],
                       gbps=float(capacity[r]), connections=n) for r, n in counts.most_common(TOP_BOTTLENECKS)]
