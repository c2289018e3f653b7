"""Benchmarks against the Plan: patterns of pairs, measured, compared with what each path should
carry, stored in SQLite."""

from __future__ import annotations

from ClusterShell.NodeSet import NodeSet

from gpunet.bench.schedule import Round, all_pair_rounds, incast, one_pair, topology_rounds
from gpunet.errors import UsageError
from gpunet.model.plan import Plan

PATTERNS = ("all-pairs", "topo", "incast", "pair")


def bench_nodes(plan: Plan, plane: str, nodes: str | None) -> list[str]:
    """The nodes with an address on the plane (all, or those of the NodeSet)."""
    on_plane = [n.name for n in plan.nodes if any(i.plane == plane and i.address for i in n.interfaces)]
    if nodes is None:
        return on_plane
    wanted = list(NodeSet(nodes))
    missing = [n for n in wanted if n not in on_plane]
    if missing:
        raise UsageError(f"no address on the {plane} plane: {NodeSet.fromlist(missing)}")
    return wanted


def pattern_rounds(plan: Plan, plane: str, pattern: str, nodes: list[str]) -> list[Round]:
    if len(nodes) < 2:
        raise UsageError("a benchmark needs at least two nodes")
    if pattern == "all-pairs":
        return all_pair_rounds(nodes)
    if pattern == "topo":
        leaf_of = {c.a.device: c.b.device for c in plan.links if c.plane == plane and c.tier == "node_leaf"}
        return topology_rounds(nodes, leaf_of.__getitem__, uplink_flows(plan, plane))
    if pattern == "incast":
        return incast(nodes, nodes[0])
    if pattern == "pair":
        return one_pair(nodes[0], nodes[1])
    raise UsageError(f"unknown pattern {pattern!r}; known: {', '.join(PATTERNS)}")


def uplink_flows(plan: Plan, plane: str) -> int:
    """How many NIC-speed flows the thinnest leaf's uplinks carry at once."""
    nic = max((c.gbps for c in plan.links if c.plane == plane and c.tier == "node_leaf"), default=1)
    up: dict[str, int] = {}
    for c in plan.links:
        if c.plane == plane and c.tier == "leaf_spine":
            up[c.a.device] = up.get(c.a.device, 0) + c.gbps
    return max(1, min(up.values(), default=nic) // nic)
