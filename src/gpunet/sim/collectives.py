"""The transfers of NCCL's collectives, per phase, as fractions of the message size.

A job is its nodes in rank order (node k holds ranks k*g .. k*g+g-1) with g GPUs and R NICs on the
plane each. NCCL opens one channel per NIC (rail) here, and on a rail-optimized fabric with
NCCL_CROSS_NIC=0 a channel enters and leaves every node on the same rail: channel c's ring crosses
the network from node k's NIC c to node k+1's NIC c, and inside the node runs through the GPUs
over NVLink. Every step of a ring moves one chunk per rank at once, so all steps load the fabric
alike: one phase of identical steps. Trees are NCCL's double binary tree over the nodes per
channel (ncclGetDtree: the second tree mirrored, or shifted for an odd count), reduce and
broadcast pipelined: every tree edge busy both ways. All-to-all sends every peer its share at once,
data for GPU j of another node leaving on rail j (PXN). Latencies are NCCL's tuning model's
(tuning.cc, Simple protocol: 8.4 us a collective; per step 6.6 us over the network and 5.7 us
over NVLink for rings, 50 and 28 us for tree levels).

`fraction` is the share of the message size S one connection of a transfer carries per step."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Literal

Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
Algorithm = Literal["ring", "tree"]
COLLECTIVES: tuple[Collective, ...] = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
ALGORITHMS: tuple[Algorithm, ...] = ("ring", "tree")
BASE_LATENCY_US = 8.4
RING_NET_US, RING_NVLINK_US = 6.6, 5.7
TREE_NET_US, TREE_NVLINK_US = 50.0, 28.0
MAX_ALLTOALL_FLOWS = 2_000_000


@dataclass(frozen=True)
class Job:
    nodes: tuple[str, ...]
    gpus: int  # per node
    rails: int  # NICs per node on the plane

    @property
    def ranks(self) -> int:
        return len(self.nodes) * self.gpus


@dataclass(frozen=True)
class Send:
    """One transfer across the network: from a node's rail to another node's rail."""

    src: int  # node position in the job
    src_rail: int
    dst: int
    dst_rail: int
    fraction: float  # of S, the transfer as a whole (split over its connections)


@dataclass
class Phase:
    steps: int
    latency_us: float
    sends: list[Send] = field(default_factory=list)
    local: list[tuple[int, int, float]] = field(default_factory=list)  # GPU -> GPU in every node, fraction


@dataclass
class Pattern:
    collective: str
    algorithm: str
    bus_factor: float  # nccl-tests: busbw = algbw * bus_factor
    phases: list[Phase]


def bus_factor(collective: str, ranks: int) -> float:
    """nccl-tests' busbw formulas: all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; sendrecv 1."""
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (ranks - 1) / ranks
    return 1.0


def pattern(job: Job, collective: str, algorithm: str) -> Pattern:
    if collective == "alltoall":
        phases = [_alltoall(job)]
    elif algorithm == "tree" and collective == "all_reduce":
        phases = [_tree(job)]
    else:
        steps = 2 * (job.ranks - 1) if collective == "all_reduce" else job.ranks - 1
        phases = [_ring(job, max(steps, 1))]
    return Pattern(collective, "tree" if collective == "all_reduce" and algorithm == "tree" else
                   "direct" if collective == "alltoall" else "ring", bus_factor(collective, job.ranks), phases)


def _ring(job: Job, steps: int) -> Phase:
    """One ring per rail; a chunk of S / (channels * ranks) per rank and step."""
    nodes, channels = len(job.nodes), job.rails
    chunk = 1.0 / (channels * job.ranks)
    phase = Phase(steps, RING_NET_US if nodes > 1 else RING_NVLINK_US)
    if nodes > 1:
        phase.sends = [Send(k, c, (k + 1) % nodes, c, chunk) for c in range(channels) for k in range(nodes)]
    for c in range(channels):
        order = [(c + i) % job.gpus for i in range(job.gpus)]
        hops = list(itertools.pairwise(order)) + ([(order[-1], order[0])] if nodes == 1 else [])
        phase.local += [(a, b, chunk) for a, b in hops if a != b]
    return phase


def btree(nranks: int, rank: int) -> int:
    """The parent of `rank` in NCCL's binary tree (ncclGetBtree; -1 for the root)."""
    if rank == 0:
        return -1
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    up = (rank ^ bit) | (bit << 1)
    return rank ^ bit if up >= nranks else up


def dtree_parents(nranks: int) -> tuple[list[int], list[int]]:
    """Parents in NCCL's two trees: the btree, and its mirror (even count) or shift by one (odd)."""
    first = [btree(nranks, r) for r in range(nranks)]
    if nranks % 2:
        second = [-1 if (u := btree(nranks, (r - 1) % nranks)) == -1 else (u + 1) % nranks for r in range(nranks)]
    else:
        second = [-1 if (u := btree(nranks, nranks - 1 - r)) == -1 else nranks - 1 - u for r in range(nranks)]
    return first, second


def _tree(job: Job) -> Phase:
    """Per rail, the double binary tree over nodes, each tree half the rail's data, every edge busy
    both ways (reduce up, broadcast down, pipelined); inside a node a chain of GPUs."""
    nodes, channels = len(job.nodes), job.rails
    depth = max(1, math.ceil(math.log2(nodes))) if nodes > 1 else 0
    latency = 2 * (depth * TREE_NET_US + (job.gpus - 1) * TREE_NVLINK_US)
    phase = Phase(1, latency)
    share = 1.0 / (channels * 2)
    for c in range(channels):
        for parents in dtree_parents(nodes) if nodes > 1 else ():
            for child, parent in enumerate(parents):
                if parent >= 0:
                    phase.sends += [Send(child, c, parent, c, share), Send(parent, c, child, c, share)]
        chain = [(c + i) % job.gpus for i in range(job.gpus)]
        for a, b in itertools.pairwise(chain):
            phase.local += [(a, b, 1.0 / channels), (b, a, 1.0 / channels)]
    return phase


def _alltoall(job: Job) -> Phase:
    """Every rank sends S/ranks to every other at once; node a's data for GPU j of node b leaves on
    rail j (PXN relays it over NVLink to the GPU beside that NIC)."""
    nodes = len(job.nodes)
    flows = nodes * (nodes - 1) * job.rails
    if flows > MAX_ALLTOALL_FLOWS:
        raise ValueError(f"alltoall over {nodes} nodes is {flows:,} network transfers; at most "
                         f"{MAX_ALLTOALL_FLOWS:,} ({math.isqrt(MAX_ALLTOALL_FLOWS // max(job.rails, 1))} nodes of "
                         f"{job.rails} rails)")
    phase = Phase(1, RING_NET_US if nodes > 1 else RING_NVLINK_US)
    per_rail = job.gpus * (job.gpus / job.rails) / job.ranks  # all of a's GPUs, to b's GPUs beside rail c
    phase.sends = [Send(a, c, b, c, per_rail) for a in range(nodes) for b in range(nodes) if a != b
                   for c in range(job.rails)]
    phase.local = [(i, j, nodes / job.ranks) for i in range(job.gpus) for j in range(job.gpus) if i != j]
    return phase


def point_to_point(job: Job, pairs: list[tuple[int, int, int | None]]) -> Pattern:
    """A custom job: each (src, dst, rail) sends S at once (rail None: spread over every rail)."""
    phase = Phase(1, RING_NET_US)
    for src, dst, rail in pairs:
        rails = [rail] if rail is not None else list(range(job.rails))
        phase.sends += [Send(src, r, dst, r, 1.0 / len(rails)) for r in rails]
    return Pattern("sendrecv", "p2p", 1.0, [phase])
