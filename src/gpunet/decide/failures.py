"""What a failure costs, per plane: the worst single leaf, spine, core and cable to lose (the
most nodes cut off, then the most bisection, per-rail bandwidth and node pairs with paths lost).

For each, read off the Plan's cables: the nodes cut off (every cable of theirs on the plane lost:
a single-homed node under a failed leaf; a dual-homed one keeps its other leaf), the NIC ports cut
off, the bisection lost (design/capacity.py's measure on what is left), the per-rail bandwidth
lost (a rail's leaves carry min(node side, uplinks) each; the worst rail), the node pairs that
lose paths and those left with none.

A pair's paths are its shortest switch paths, hosts never forwarding: through a leaf both share,
else up to the spines of their pod, else through the cores. A failure takes paths from a pair when
it lies on one of them. Counting runs on classes of nodes with the same leaves, so a 12 500-node
plane takes well under a second per element kind; tests/decide recomputes each figure on the Plan
with the element removed (networkx)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from gpunet.decide.fabric import Cable, Fabric, connected_pairs, pairs_of
from gpunet.decide.memo import last_plan
from gpunet.model.base import Frozen, bulk_objects
from gpunet.model.plan import Link, Plan

Element = Literal["leaf", "spine", "core", "cable"]


class FailureImpact(Frozen):
    element: Element
    name: str  # the worst of its kind; a cable as 'a:port b:port'
    of: int  # how many of this kind the plane has
    nodes_cut_off: int
    nics_cut_off: int
    bisection_lost_pct: float
    rail_lost_pct: float | None  # None: the plane has no rails
    pairs_losing_paths: int
    pairs_disconnected: int
    pairs: str  # which pairs lose paths, in words


class PlaneFailures(Frozen):
    plane: str
    nodes: int
    pairs: int
    impacts: tuple[FailureImpact, ...]

    def impact(self, element: str) -> FailureImpact | None:
        return next((i for i in self.impacts if i.element == element), None)


@dataclass(frozen=True, slots=True)
class _Candidate:
    """One element's figures before its disconnected pairs are counted (only the worst's are)."""

    name: str
    lost: dict[str, int]  # Gb/s per cable tier
    removed: str | Cable  # a switch, or a cable
    cut: int = 0
    nics: int = 0
    rail_lost: dict[int, int] = field(default_factory=dict)  # Gb/s of min(down, up) per rail
    losing: int = 0
    pairs: str = ""


@last_plan
def plan_failures(plan: Plan) -> tuple[PlaneFailures, ...]:
    by_plane: dict[str, list[Link]] = {p.name: [] for p in plan.planes}
    for link in plan.links:
        by_plane[link.plane].append(link)
    with bulk_objects():  # counting allocates 10^5 small objects: no cyclic GC passes over the plan's
        return tuple(plane_failures(plan, name, links) for name, links in by_plane.items())


def plane_failures(plan: Plan, plane: str, links: list[Link] | None = None) -> PlaneFailures:
    fabric = Fabric.read(plan, plane, links)
    impacts = []
    for element, candidates in _candidates(fabric):
        if candidates:
            worst = max(candidates, key=lambda c: (c.cut, _bisection_pct(fabric, c), _rail_pct(fabric, c), c.losing))
            count = fabric.cables if element == "cable" else len(candidates)
            impacts.append(_impact(fabric, element, worst, count))
    return PlaneFailures(plane=plane, nodes=fabric.node_count, pairs=pairs_of(fabric.node_count),
                         impacts=tuple(impacts))


def _candidates(f: Fabric) -> Iterator[tuple[Element, list[_Candidate]]]:
    if f.direct:
        yield "cable", list(_direct_cables(f))
        return
    yield "leaf", [_leaf(f, leaf) for leaf in f.tier_switches("leaf")]
    yield "spine", [_spine(f, spine) for spine in f.tier_switches("spine")]
    yield "core", [_core(f, core) for core in f.tier_switches("core")]
    yield "cable", [*_node_cables(f), *_leaf_spine_cables(f), *_spine_core_cables(f)]


def _impact(f: Fabric, element: Element, c: _Candidate, count: int) -> FailureImpact:
    return FailureImpact(
        element=element, name=c.name, of=count, nodes_cut_off=c.cut, nics_cut_off=c.nics,
        bisection_lost_pct=_bisection_pct(f, c), rail_lost_pct=_rail_pct(f, c) if f.rails else None,
        pairs_losing_paths=c.losing, pairs_disconnected=pairs_of(f.node_count) - _still_connected(f, c),
        pairs=c.pairs,
    )


def _bisection_pct(f: Fabric, c: _Candidate) -> float:
    return f.bisection_lost(c.lost)


def _rail_pct(f: Fabric, c: _Candidate) -> float:
    return f.rail_lost(c.rail_lost)


def _still_connected(f: Fabric, c: _Candidate) -> int:
    if f.direct:  # two nodes: connected while a cable is left
        return int(len(f.direct) > 1)
    if isinstance(c.removed, str):
        return connected_pairs(f, switch=c.removed)
    return connected_pairs(f, cable=c.removed)


def _leaf(f: Fabric, leaf: str) -> _Candidate:
    on = f.classes_at.get(leaf, [])
    attached = sum(f.class_size[k] for k in on)
    cut = sum(f.class_size[k] for k in on if len(k) == 1)
    sharing_elsewhere = sum(f.class_size[k] * (f.shared[k] - attached) for k in on)
    losing = pairs_of(attached) + attached * (f.node_count - attached) - sharing_elsewhere
    nics = sum(f.class_size[k] * dict(k)[leaf] for k in on)
    return _Candidate(name=leaf, cut=cut, nics=nics, losing=losing, removed=leaf,
                      lost={"node_leaf": f.down[leaf], "leaf_spine": f.up[leaf]},
                      rail_lost=f.rail_drop(leaf, 0, 0, whole=True), pairs=f"pairs with a node on {leaf}")


def _spine(f: Fabric, spine: str) -> _Candidate:
    pod = f.pod_of[spine]
    within = pairs_of(f.pod_nodes[pod]) - f.pod_sharing[pod]
    losing = within + f.pod_nodes[pod] * f.reach(spine)
    rail_lost = f.rail_drops(f.below[spine].items())
    return _Candidate(name=spine, losing=losing, removed=spine, rail_lost=rail_lost,
                      lost={"leaf_spine": f.down[spine], "spine_core": f.up[spine]},
                      pairs="pairs under different leaves" + (" of its pod, and from its pod to others"
                                                              if f.cores else ""))


def _core(f: Fabric, core: str) -> _Candidate:
    nodes = [f.pod_nodes[pod] for pod in f.core_pods[core]]
    losing = (sum(nodes) ** 2 - sum(n * n for n in nodes)) // 2
    return _Candidate(name=core, losing=losing, removed=core, lost={"spine_core": f.down[core]},
                      pairs="pairs in different pods")


def _node_cables(f: Fabric) -> Iterator[_Candidate]:
    """One cable of each node class and leaf: every node of a class loses alike."""
    for key, node in f.class_node.items():
        for leaf, count in key:
            link = f.cable_of(node, leaf)
            gbps = f.node_gbps[node]
            losing = (sum(f.class_size[k] for k in f.classes_at[leaf]) - 1) + (f.node_count - f.shared[key])
            yield _Candidate(name=f.cable_name(link), cut=int(len(key) == 1 and count == 1),
                             nics=1, lost={"node_leaf": gbps}, rail_lost=f.rail_drop(leaf, gbps, 0), losing=losing,
                             removed=link, pairs=f"pairs of {node}")


def _leaf_spine_cables(f: Fabric) -> Iterator[_Candidate]:
    """Per leaf, its worst uplink (by the same key as every candidate): uplinks differ only in the
    spine's reach, and their speed were it mixed."""
    for leaf in f.tier_switches("leaf"):
        inside = f.pod_nodes[f.pod_of[leaf]]
        attached = [(f.class_size[k], f.shared[k]) for k in f.classes_at.get(leaf, [])]
        # Uplinks differ only in their speed and their spine's reach: each such class is scored once
        # (a 1M-GPU plane has 500 000 leaf-spine pairs and a few classes per leaf), the first
        # uplink of the worst class named.
        scored: dict[tuple[int, int], tuple[float, float, int]] = {}
        options = []
        for spine in f.above.get(leaf, ()):
            one = f.pair_gbps[leaf, spine] // f.adjacency[leaf, spine]
            reach = f.reach(spine)
            score = scored.get((one, reach))
            if score is None:
                score = scored[one, reach] = _uplink_score(f, leaf, one, inside + reach, attached)
            options.append((score, spine, one))
        if options:
            score, spine, one = max(options, key=lambda o: o[0])
            cable = f.first_cable[leaf, spine]
            yield _Candidate(name=f.cable_name(cable), lost={"leaf_spine": one}, rail_lost=f.rail_drop(leaf, 0, one),
                             losing=score[2], removed=cable, pairs=f"pairs across leaves from {leaf}")


def _uplink_score(f: Fabric, leaf: str, one: int, outside: int, attached: list[tuple[int, int]]
                  ) -> tuple[float, float, int]:
    losing = sum(n * (outside - shared) for n, shared in attached)
    return f.bisection_lost({"leaf_spine": one}), f.rail_lost(f.rail_drop(leaf, 0, one)), losing


def _spine_core_cables(f: Fabric) -> Iterator[_Candidate]:
    """Per spine, its worst uplink: they differ in the pods their core joins."""
    for spine in f.tier_switches("spine"):
        inside = f.pod_nodes[f.pod_of[spine]]
        options = []
        for core in f.above.get(spine, ()):
            one = f.pair_gbps[spine, core] // f.adjacency[spine, core]
            losing = inside * (f.core_nodes[core] - inside)
            options.append(((f.bisection_lost({"spine_core": one}), losing), core, one, losing))
        if options:
            _, core, one, losing = max(options, key=lambda o: o[0])
            cable = f.first_cable[spine, core]
            yield _Candidate(name=f.cable_name(cable), lost={"spine_core": one}, losing=losing, removed=cable,
                             pairs=f"pairs across pods through {spine}")


def _direct_cables(f: Fabric) -> Iterator[_Candidate]:
    """Two nodes joined by their own cables: the last one gone cuts both off."""
    for link in f.direct:
        alone = len(f.direct) == 1
        yield _Candidate(name=f.cable_name((link.a.device, link.a.port, link.b.device, link.b.port)),
                         lost={"direct": link.gbps}, removed=(link.a.device, link.a.port, link.b.device, link.b.port),
                         cut=2 if alone else 0, nics=2, losing=1, pairs="the one pair")
