"""Throughput of concurrent point-to-point transfers (iperf3 pairs, a custom pattern): each pair
opens `connections` connections (TCP streams, QPs) that are routed like any other and share every
cable direction max-min fairly; a pair's throughput is the sum of its connections'. This is what a
benchmark round measures, so measured and simulated can be set side by side pair by pair.

A connection's path can also be given (read from the fabric itself: the lab asks each switch's
kernel which next hop a 5-tuple takes), instead of hashed here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpunet.errors import UsageError
from gpunet.model.base import Frozen
from gpunet.sim.engine import connection_key, nic_of
from gpunet.sim.fabric import SimFabric
from gpunet.sim.maxmin import Incidence, max_min_rates
from gpunet.sim.routing import Path, Router, Routing

Pair = tuple[str, str, int]  # source node, destination node, rail


class PairRates(Frozen):
    pairs: tuple[float, ...]  # Gb/s per pair (0: no path)
    connections: tuple[tuple[float, ...], ...]  # Gb/s per connection of each pair
    spine_share: float  # of the connections, the part whose path crosses a spine


def pair_rates(fabric: SimFabric, pairs: Sequence[Pair], connections: int | Sequence[int] = 1, *,
               routing: Routing = "hash", seed: int = 0,
               paths: Sequence[Sequence[Path | None]] | None = None) -> PairRates:
    """Every pair at once, max-min fair, with `connections` each (one count, or one per pair);
    `paths[p][c]` (resources) replaces routing where given."""
    counts = _counts(pairs, connections)
    incidence, owner, crossing = _incidence(fabric, pairs, counts, routing=routing, seed=seed, paths=paths)
    rates = max_min_rates(incidence, fabric.capacity) if owner else np.zeros(0)
    return _rates(counts, owner, rates, crossing)


def _counts(pairs: Sequence[Pair], connections: int | Sequence[int]) -> list[int]:
    counts = [connections] * len(pairs) if isinstance(connections, int) else list(connections)
    if len(counts) != len(pairs) or min(counts, default=1) < 1:
        raise UsageError("give one connection count (1 or more), or one per pair")
    return counts


def tcp_pair_rates(fabric: SimFabric, pairs: Sequence[Pair], paths: Sequence[Sequence[Path]],
                   ack_paths: Sequence[Sequence[Path]], *, queue_delay: np.ndarray, base_rtt: float) -> PairRates:
    """As TCP (Reno-like, as cubic behaves where queues dwarf the path's own delay) shares: flows
    on a bottleneck get rates in inverse proportion to their round-trip times, and a round trip is
    the base RTT plus the delay of every full queue the data or its ACKs cross (`queue_delay`:
    seconds per resource when full). Fixed point: rates, then which queues are full, then RTTs."""
    counts = [len(p) for p in paths]
    incidence, owner, crossing = _incidence(fabric, pairs, counts, routing="hash", seed=0, paths=paths)
    acks = [ack_paths[p][c] for p, c in owner]
    rates = max_min_rates(incidence, fabric.capacity)
    for _ in range(10):
        load = np.bincount(incidence.resource, weights=incidence.weight * rates[incidence.flow],
                           minlength=fabric.capacity.size)
        full = np.where(load >= fabric.capacity * (1 - 1e-6), queue_delay, 0.0)
        data = np.bincount(incidence.flow, weights=full[incidence.resource], minlength=len(owner))
        rtt = base_rtt + data + np.asarray([sum(full[r] for r in path) for path in acks])
        again = max_min_rates(incidence, fabric.capacity, speed=1.0 / rtt)
        if np.allclose(again, rates, rtol=1e-6):
            break
        rates = again
    return _rates(counts, owner, rates, crossing)


def _incidence(fabric: SimFabric, pairs: Sequence[Pair], counts: list[int], *, routing: Routing, seed: int,
               paths: Sequence[Sequence[Path | None]] | None) -> tuple[Incidence, list[tuple[int, int]], int]:
    router = Router(fabric, routing, seed)
    index = {name: i for i, name in enumerate(fabric.nics)}
    flows: list[int] = []
    resources: list[int] = []
    weights: list[float] = []
    owner: list[tuple[int, int]] = []
    crossing = 0
    for p, (src_name, dst_name, rail) in enumerate(pairs):
        for name in (src_name, dst_name):
            if name not in fabric.nics:
                raise UsageError(f"node {name!r} is not on plane {fabric.plane}")
        src, dst = nic_of(fabric, src_name, rail), nic_of(fabric, dst_name, rail)
        for c in range(counts[p]):
            given = paths[p][c] if paths is not None else None
            path = given if given is not None else (
                router.path(src, dst, connection_key(seed, (index[src.node], src.rail), (index[dst.node], dst.rail), c))
                if src is not None and dst is not None else None)
            owner.append((p, c))
            for resource, weight in (path or {}).items():
                flows.append(len(owner) - 1)
                resources.append(resource)
                weights.append(weight)
            crossing += any(fabric.tier[r] == "leaf_spine" for r in path or {})
    incidence = Incidence(np.asarray(flows, dtype=np.int64), np.asarray(resources, dtype=np.int64),
                          np.asarray(weights), len(owner))
    return incidence, owner, crossing


def _rates(counts: list[int], owner: list[tuple[int, int]], rates: np.ndarray, crossing: int) -> PairRates:
    rates[np.isinf(rates)] = 0.0  # a connection with no path carries nothing
    per = [[0.0] * n for n in counts]
    for (p, c), rate in zip(owner, rates, strict=True):
        per[p][c] = float(rate)
    return PairRates(pairs=tuple(sum(r) for r in per), connections=tuple(tuple(r) for r in per),
                     spine_share=crossing / len(owner) if owner else 0.0)
