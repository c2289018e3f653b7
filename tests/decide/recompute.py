"""The failure figures recomputed by brute force on the Plan with the element removed: a networkx
multigraph of the plane's cables, shortest paths counted per node pair (hosts never forward), the
bisection by design/capacity.py's own function on the cables that are left."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import networkx as nx

from gpunet.design.capacity import bisection_gbps
from gpunet.model.plan import Link, Plan


@dataclass(frozen=True)
class Recomputed:
    nodes_cut_off: int
    nics_cut_off: int
    bisection_lost_pct: float
    rail_lost_pct: float | None
    pairs_losing_paths: int
    pairs_disconnected: int


def _name(link: Link) -> str:
    return f"{link.a.device}:{link.a.port} {link.b.device}:{link.b.port}"


def without(plan: Plan, plane: str, element: str) -> tuple[list[Link], list[Link]]:
    """The plane's cables, and those left when the switch or the cable named `element` is gone."""
    links = [c for c in plan.links if c.plane == plane]
    if " " in element:
        gone = next(i for i, c in enumerate(links) if _name(c) == element)
        return links, links[:gone] + links[gone + 1:]
    return links, [c for c in links if element not in (c.a.device, c.b.device)]


def recompute(plan: Plan, plane: str, element: str) -> Recomputed:
    before, after = without(plan, plane, element)
    switches = {s.name for s in plan.switches if s.plane == plane}
    nodes = sorted({end.device for c in before for end in (c.a, c.b)} - switches)
    ends_after = Counter(end.device for c in after for end in (c.a, c.b))
    tiers = {c.tier for c in before}
    bisection = bisection_gbps(before, tiers)
    lost, disconnected = _pair_changes(_graph(before), _graph(after), nodes, switches)
    return Recomputed(
        nodes_cut_off=sum(ends_after[n] == 0 for n in nodes),
        nics_cut_off=_node_ends(before, switches) - _node_ends(after, switches),
        bisection_lost_pct=100 * (1 - bisection_gbps(after, tiers) / bisection) if bisection else 0.0,
        rail_lost_pct=_rail_lost(plan, plane, before, after),
        pairs_losing_paths=lost, pairs_disconnected=disconnected,
    )


def _node_ends(links: list[Link], switches: set[str]) -> int:
    return sum(end.device not in switches for c in links for end in (c.a, c.b))


def _graph(links: list[Link]) -> nx.MultiGraph:
    graph = nx.MultiGraph()
    graph.add_edges_from((c.a.device, c.b.device) for c in links)
    return graph


def _counts_from(graph: nx.MultiGraph, source: str, switches: set[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Distance and number of shortest paths from `source` to every switch (and itself); only
    switches forward."""
    dist, count, frontier = {source: 0}, {source: 1}, [source]
    while frontier:
        following = []
        for x in frontier:
            for y, edges in graph.adj[x].items():
                if y not in switches:
                    continue
                if y not in dist:
                    dist[y], count[y] = dist[x] + 1, 0
                    following.append(y)
                if dist[y] == dist[x] + 1:
                    count[y] += count[x] * len(edges)
        frontier = following
    return dist, count


def _paths(graph: nx.MultiGraph, nodes: list[str], switches: set[str]) -> dict[tuple[str, str], tuple[float, int]]:
    """(shortest length, number of shortest paths) for every node pair; (inf, 0) when none."""
    result = {}
    for i, u in enumerate(nodes):
        dist, count = _counts_from(graph, u, switches) if u in graph else ({}, {})
        for v in nodes[i + 1:]:
            near = [(dist[w] + 1, count[w] * len(edges)) for w, edges in graph.adj[v].items()
                    if w in dist] if v in graph else []
            best = min((d for d, _ in near), default=float("inf"))
            result[u, v] = (best, sum(c for d, c in near if d == best))
    return result


def _pair_changes(before: nx.MultiGraph, after: nx.MultiGraph, nodes: list[str], switches: set[str]) -> tuple[int, int]:
    old, new = _paths(before, nodes, switches), _paths(after, nodes, switches)
    losing = sum(new[p] != old[p] for p in old)
    disconnected = sum(new[p][1] == 0 and old[p][1] > 0 for p in old)
    return losing, disconnected


def _rail_lost(plan: Plan, plane: str, before: list[Link], after: list[Link]) -> float | None:
    if next(p.style for p in plan.planes if p.name == plane) != "rail-optimized":
        return None
    rail = {s.name: s.rail for s in plan.switches if s.plane == plane and s.tier == "leaf" and s.rail is not None}
    if not rail:  # one NIC a node: a single rail, no rail leaves
        return None
    old, new = _rail_gbps(before, rail), _rail_gbps(after, rail)
    return max((100 * (1 - new[r] / old[r]) for r in old if old[r]), default=0.0)


def _rail_gbps(links: list[Link], rail: dict[str, int]) -> Counter[int]:
    down: Counter[str] = Counter()
    up: Counter[str] = Counter()
    for c in links:
        if c.tier == "node_leaf":
            down[c.b.device] += c.gbps
        elif c.tier == "leaf_spine":
            up[c.a.device] += c.gbps
    result: Counter[int] = Counter(dict.fromkeys(rail.values(), 0))
    for leaf, r in rail.items():
        result[r] += min(down[leaf], up[leaf])
    return result
