"""Benchmarks against the Plan: patterns of pairs, measured, compared with what each path should
carry, stored in SQLite."""

from __future__ import annotations

from gpunet.bench.schedule import Pair, Round, all_pair_rounds, incast, one_pair, rail_of, rail_rounds, topology_rounds
from gpunet.errors import UsageError
from gpunet.fleet.groups import resolve_nodes
from gpunet.model.nodeset import describe
from gpunet.model.plan import Interface, Plan

PATTERNS = ("all-pairs", "topo", "incast", "pair", "rail")


def bench_nodes(plan: Plan, plane: str, nodes: str | None) -> list[str]:
    """The nodes with an address on the plane (all, or those of the NodeSet)."""
    on_plane = [n.name for n in plan.nodes if any(i.plane == plane and i.address for i in n.interfaces)]
    if nodes is None:
        return on_plane
    wanted = list(resolve_nodes(nodes, plan))
    missing = [n for n in wanted if n not in on_plane]
    if missing:
        raise UsageError(f"no address on the {plane} plane: {describe(missing)}")
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
    if pattern == "rail":
        return rail_rounds(node_rails(plan, plane, nodes))
    raise UsageError(f"unknown pattern {pattern!r}; known: {', '.join(PATTERNS)}")


def uplink_flows(plan: Plan, plane: str) -> int:
    """How many NIC-speed flows the thinnest leaf's uplinks carry at once."""
    nic = max((c.gbps for c in plan.links if c.plane == plane and c.tier == "node_leaf"), default=1)
    up: dict[str, int] = {}
    for c in plan.links:
        if c.plane == plane and c.tier == "leaf_spine":
            up[c.a.device] = up.get(c.a.device, 0) + c.gbps
    return max(1, min(up.values(), default=nic) // nic)


def node_rails(plan: Plan, plane: str, nodes: list[str]) -> dict[str, list[int]]:
    """node -> the rails it has an address on, on the plane; a plane without rails is refused."""
    wanted = set(nodes)
    rails = {n.name: sorted({i.rail for i in n.interfaces if i.plane == plane and i.address and i.rail is not None})
             for n in plan.nodes if n.name in wanted}
    if not any(rails.values()):
        raise UsageError(f"the {plane} plane has no rails (the rail pattern needs a rail-optimized plane)")
    return {n: rails[n] for n in nodes if rails.get(n)}


def pair_interfaces(plan: Plan, plane: str, pair: Pair) -> tuple[Interface, Interface]:
    """The interfaces a pair is measured between: on the pair's rail when it has one (a RailPair),
    else each node's first addressed interface on the plane. A runner binds to their addresses."""
    return _interface(plan, pair[0], plane, rail_of(pair)), _interface(plan, pair[1], plane, rail_of(pair))


def _interface(plan: Plan, node: str, plane: str, rail: int | None) -> Interface:
    interfaces = found_node.interfaces if (found_node := plan.node(node)) else ()
    found = next((i for i in interfaces if i.plane == plane and i.address and (rail is None or i.rail == rail)), None)
    if found is None:
        raise UsageError(f"{node} has no address on the {plane} plane" + (f" rail {rail}" if rail is not None else ""))
    return found
