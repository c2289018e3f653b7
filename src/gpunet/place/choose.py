"""Choose N nodes for a job from the free ones so its collective runs fastest, and say how much
better that is than N free nodes taken at random.

Nodes that hang under the same leaves form a unit (a scalable unit of a rail-optimized plane: its
nodes share every rail leaf, so their rings never leave them; a leaf of a spine-leaf plane); units
under the same spines form a pod. The choice packs the job: one unit when one holds it (the one
with the fewest free nodes that does, keeping large free units for large jobs), else the fewest
whole units of one pod, else of the fewest pods, largest first. Ranks follow units, so a ring
crosses the spines only from one unit to the next; each node keeps NIC i on rail i (rail-aligned).
Candidate packings are simulated and the fastest is kept."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from gpunet.errors import UsageError
from gpunet.model.base import Frozen, bulk_objects
from gpunet.model.nodeset import fold
from gpunet.model.plan import Plan
from gpunet.sim.fabric import SimFabric, read_fabric
from gpunet.sim.report import SimReport
from gpunet.sim.simulate import SimOptions, check_options, simulate_on

Unit = frozenset[str]  # the leaves a node's NICs plug into


class Placement(Frozen):
    nodes: tuple[str, ...]  # in rank order
    units: int  # units the job spans
    pods: int
    chosen: SimReport
    random: SimReport  # the same count of free nodes at random, ranks in name order (as Slurm lists them)

    @property
    def folded(self) -> str:
        return fold(self.nodes)


def place(plan: Plan, count: int, free: Sequence[str] | None = None, options: SimOptions | None = None,
          seed: int = 0) -> Placement:
    """`count` of the `free` nodes (every GPU node of the plane when None) chosen to minimise the
    predicted collective time, beside a random choice of as many (drawn with `seed`)."""
    options = options or SimOptions()
    check_options(options)
    with bulk_objects():
        return _place(plan, count, free, options, seed)


def _place(plan: Plan, count: int, free: Sequence[str] | None, options: SimOptions, seed: int) -> Placement:
    fabric = read_fabric(plan, options.plane)
    pool = _free_pool(fabric, free)
    if not 0 < count <= len(pool):
        raise UsageError(f"a job of {count} nodes does not fit the {len(pool)} free node(s) of plane "
                         f"{fabric.plane} ({fold(pool) if pool else 'none'}); ask for 1 to {len(pool)}")
    reports = [(simulate_on(fabric, nodes, options, "chosen"), nodes) for nodes in _candidates(fabric, pool, count)]
    best, nodes = max(reports, key=lambda r: (r[0].busbw, -r[0].spine_share))
    picked = sorted(random.Random(seed).sample(pool, count))
    units = {unit_of(fabric, n) for n in nodes}
    return Placement(nodes=tuple(nodes), units=len(units), pods=len({pod_of(fabric, u) for u in units}),
                     chosen=best, random=simulate_on(fabric, picked, options, "random"))


def _free_pool(fabric: SimFabric, free: Sequence[str] | None) -> list[str]:
    if free is None:
        return sorted(n for n in fabric.nics if fabric.gpus.get(n, 0) > 0) or sorted(fabric.nics)
    unknown = [n for n in free if n not in fabric.nics]
    if unknown:
        raise UsageError(f"free node {unknown[0]!r} is not on plane {fabric.plane}; its nodes: "
                         f"{fold(list(fabric.nics))}")
    return sorted(set(free))


def unit_of(fabric: SimFabric, node: str) -> Unit:
    return frozenset(nic.attached for nic in fabric.nics[node])


def pod_of(fabric: SimFabric, unit: Unit) -> frozenset[str]:
    """The switches above a unit's leaves (a unit on no spine is a pod of its own)."""
    above = frozenset(n for leaf in unit for _, n in fabric.neighbours.get(leaf, ()))
    return above or unit


def _candidates(fabric: SimFabric, pool: list[str], count: int) -> list[list[str]]:
    units: dict[Unit, list[str]] = defaultdict(list)
    for node in pool:
        units[unit_of(fabric, node)].append(node)
    pods: dict[frozenset[str], list[Unit]] = defaultdict(list)
    for unit in units:
        pods[pod_of(fabric, unit)].append(unit)
    fitting = sorted((len(v), sorted(v)) for v in units.values() if len(v) >= count)
    candidates = [fitting[0][1][:count]] if fitting else []
    candidates.append(_packed(units, pods, count, smallest_fit=True))
    candidates.append(_packed(units, pods, count, smallest_fit=False))
    unique = {tuple(c): c for c in candidates}
    return list(unique.values())


def _packed(units: dict[Unit, list[str]], pods: dict[frozenset[str], list[Unit]], count: int,
            smallest_fit: bool) -> list[str]:
    """Whole units, largest first, from the pod that holds the job with the fewest free nodes to
    spare (smallest_fit) or the largest pods first."""
    def size(pod: frozenset[str]) -> int:
        return sum(len(units[u]) for u in pods[pod])

    holding = sorted((p for p in pods if size(p) >= count), key=size)
    order = holding[:1] if smallest_fit and holding else []
    order += sorted((p for p in pods if p not in order), key=size, reverse=True)
    chosen: list[str] = []
    for pod in order:
        for unit in sorted(pods[pod], key=lambda u: (-len(units[u]), min(units[u]))):
            chosen += sorted(units[unit])[:count - len(chosen)]
            if len(chosen) == count:
                return chosen
    return chosen
