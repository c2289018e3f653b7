"""Benchmarks against the Plan: patterns of pairs, measured, compared with what each path should
carry, stored in SQLite."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gpunet.bench.schedule import (
    Nic,
    Pair,
    RailPair,
    Round,
    all_pair_rounds,
    fabric_pairs,
    incast,
    one_pair,
    packed_rounds,
    rail_of,
    rail_rounds,
    spanning_sample,
    to_rail_of,
    topology_rounds,
)
from gpunet.errors import UsageError
from gpunet.fleet.groups import resolve_nodes
from gpunet.model.nodeset import describe
from gpunet.model.plan import Interface, Plan

PATTERNS = ("fabric", "all-pairs", "topo", "incast", "pair", "rail")
SAME_LEAF, CROSS_LEAF, CROSS_POD, DIRECT = "same-leaf", "cross-leaf", "cross-pod", "direct"


@dataclass(frozen=True)
class Selection:
    """Which of the pattern's pairs to measure: only one rail's NICs, at most so many pairs."""

    rail: int | None = None
    pairs: int | None = None


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


def pattern_rounds(plan: Plan, plane: str, pattern: str, nodes: list[str],
                   selection: Selection = Selection()) -> list[Round]:
    if len(nodes) < 2:
        raise UsageError("a benchmark needs at least two nodes")
    _check_selection(pattern, selection)
    if pattern == "fabric":
        return fabric_rounds(Fabric.of(plan, plane), nodes, selection)
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
        return rail_rounds(_on_rail(node_rails(plan, plane, nodes), selection.rail))
    raise UsageError(f"unknown pattern {pattern!r}; known: {', '.join(PATTERNS)}")


def _on_rail(rails: dict[str, list[int]], rail: int | None) -> dict[str, list[int]]:
    """Each node's rails, or only `rail` of each."""
    return rails if rail is None else {node: [r for r in on if r == rail] for node, on in rails.items()}


def _check_selection(pattern: str, selection: Selection) -> None:
    if selection.rail is not None and pattern not in ("fabric", "rail"):
        raise UsageError(f"--rail picks the NICs of the fabric and rail patterns, not {pattern}'s")
    if selection.pairs is not None and pattern != "fabric":
        raise UsageError(f"--pairs samples the fabric pattern's pairs, not {pattern}'s")
    if selection.pairs is not None and selection.pairs < 1:
        raise UsageError("--pairs: at least 1")


@dataclass(frozen=True)
class Fabric:
    """A plane as the fabric pattern sees it: each NIC's leaf, each leaf's spines, and how many
    NIC-speed flows each leaf's uplinks carry."""

    nics: tuple[Nic, ...]
    spines: dict[str, frozenset[str]]
    uplinks: dict[str, int]
    leaf_of: dict[tuple[str, int | None], str]  # (node, rail) -> its NIC's leaf

    @classmethod
    def of(cls, plan: Plan, plane: str) -> Fabric:
        cabled = {(c.a.device, c.a.port): c.b.device for c in plan.links if c.plane == plane and c.tier == "node_leaf"}
        leaf_of: dict[tuple[str, int | None], str] = {}
        for node in plan.nodes:  # a node's first addressed NIC per rail: the one pair_interfaces binds
            for i in node.interfaces:
                if i.plane == plane and i.address and (node.name, i.rail) not in leaf_of:
                    leaf_of[node.name, i.rail] = _leaf(i, cabled, node.name)
        spines: dict[str, set[str]] = defaultdict(set)
        for c in plan.links:
            if c.plane == plane and c.tier == "leaf_spine":
                spines[c.a.device].add(c.b.device)
        flows = leaf_uplink_flows(plan, plane)  # one pass over the cables: a large plan has thousands of leaves
        uplinks = {leaf: flows.get(leaf, 1) for leaf in set(leaf_of.values())}
        return cls(tuple(Nic(node, rail, leaf) for (node, rail), leaf in leaf_of.items()),
                   {leaf: frozenset(found) for leaf, found in spines.items()}, uplinks, leaf_of)

    def path_class(self, a: str, b: str) -> str:
        """same-leaf; cross-leaf (up to a spine both leaves reach, and down); cross-pod (no spine
        in common: up through the tier above the spines); direct where an end hangs from no leaf."""
        if not a or not b:
            return DIRECT
        if a == b:
            return SAME_LEAF
        up_a, up_b = self.spines.get(a, frozenset()), self.spines.get(b, frozenset())
        return CROSS_POD if up_a and up_b and not up_a & up_b else CROSS_LEAF

    def leaves(self, pair: RailPair) -> tuple[str, str]:
        return self.leaf_of[pair[0], pair.rail], self.leaf_of[pair[1], pair.to_rail]


def _leaf(iface: Interface, cabled: dict[tuple[str, str], str], node: str) -> str:
    """The leaf an addressed interface is cabled to (a bond's: its first member's)."""
    ports = [iface.name, *iface.members]
    return next((cabled[node, port] for port in ports if (node, port) in cabled), "")


def fabric_rounds(fabric: Fabric, nodes: list[str], selection: Selection = Selection()) -> list[Round]:
    """The fabric's cover among the nodes (schedule.fabric_pairs: every NIC under its leaf, every
    two leaves crossed), one rail's NICs with `selection.rail`, a spanning sample of
    `selection.pairs`, in rounds where a NIC measures once and no leaf's uplinks are oversubscribed."""
    wanted = set(nodes)
    nics = [n for n in fabric.nics if n.node in wanted and (selection.rail is None or n.rail == selection.rail)]
    if not nics and selection.rail is not None:
        raise UsageError(f"no NIC on rail {selection.rail} among the nodes")
    pairs = fabric_pairs(_by_node_order(nics, nodes), fabric.path_class)
    if selection.pairs is not None:
        pairs = spanning_sample(pairs, lambda p: _covers(p, fabric.leaves(p)), selection.pairs)
    if not pairs:
        raise UsageError("no two NICs of different nodes to measure between")
    return packed_rounds(pairs, fabric.leaves, lambda leaf: fabric.uplinks.get(leaf, 1))


def _by_node_order(nics: list[Nic], nodes: list[str]) -> list[Nic]:
    """The NICs in the order their nodes were given (then by rail): the same nodes, the same pairs."""
    rank = {node: i for i, node in enumerate(nodes)}
    return sorted(nics, key=lambda n: (rank[n.node], -1 if n.rail is None else n.rail))


def _covers(pair: RailPair, leaves: tuple[str, str]) -> frozenset[object]:
    """What a pair measures of the fabric: the leaves and rails of its ends, its path class."""
    return frozenset({("leaf", leaves[0]), ("leaf", leaves[1]), ("rail", pair.rail), ("rail", pair.to_rail),
                      ("path", pair.path)})


def uplink_flows(plan: Plan, plane: str) -> int:
    """How many NIC-speed flows the thinnest leaf's uplinks carry at once."""
    return min(leaf_uplink_flows(plan, plane).values(), default=1)


def leaf_uplink_flows(plan: Plan, plane: str) -> dict[str, int]:
    """Per leaf with uplinks on the plane: how many NIC-speed flows its uplinks carry at once (at
    least 1); a leaf without uplinks is absent (1, as for a leaf of a single-switch plane)."""
    nic = max((c.gbps for c in plan.links if c.plane == plane and c.tier == "node_leaf"), default=1)
    up: dict[str, int] = defaultdict(int)
    for c in plan.links:
        if c.plane == plane and c.tier == "leaf_spine":
            up[c.a.device] += c.gbps
    return {leaf: max(1, gbps // nic) for leaf, gbps in up.items()}


def node_rails(plan: Plan, plane: str, nodes: list[str]) -> dict[str, list[int]]:
    """node -> the rails it has an address on, on the plane; a plane without rails is refused."""
    wanted = set(nodes)
    rails = {n.name: sorted({i.rail for i in n.interfaces if i.plane == plane and i.address and i.rail is not None})
             for n in plan.nodes if n.name in wanted}
    if not any(rails.values()):
        raise UsageError(f"the {plane} plane has no rails (the rail pattern needs a rail-optimized plane)")
    return {n: rails[n] for n in nodes if rails.get(n)}


def pair_interfaces(plan: Plan, plane: str, pair: Pair) -> tuple[Interface, Interface]:
    """The interfaces a pair is measured between: on each end's rail when it has one (a RailPair),
    else each node's first addressed interface on the plane. A runner binds to their addresses."""
    return _interface(plan, pair[0], plane, rail_of(pair)), _interface(plan, pair[1], plane, to_rail_of(pair))


def _interface(plan: Plan, node: str, plane: str, rail: int | None) -> Interface:
    interfaces = found_node.interfaces if (found_node := plan.node(node)) else ()
    found = next((i for i in interfaces if i.plane == plane and i.address and (rail is None or i.rail == rail)), None)
    if found is None:
        raise UsageError(f"{node} has no address on the {plane} plane" + (f" rail {rail}" if rail is not None else ""))
    return found
