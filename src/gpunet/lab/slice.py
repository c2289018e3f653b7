"""A faithful slice of a large plan: a few nodes under a few leaves, every tier and plane kept."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from gpunet.model.flows import Flow
from gpunet.model.nodeset import fold, parse_nodeset
from gpunet.model.plan import Link, Plan, Switch

SPINES_PER_POD = 2  # enough for ECMP to have a choice
CORES_PER_GROUP = 2


def slice_plan(plan: Plan, max_nodes: int) -> Plan:
    """The plan itself when small enough; else chosen nodes with the switches that join them."""
    if len(plan.nodes) <= max_nodes:
        return plan
    return _sliced(plan, _choose_nodes(plan, max_nodes))


def even_slice(plan: Plan, units_per_pod: int) -> Plan:
    """A slice that keeps a fat tree regular: every server of the first `units_per_pod` leaf
    groups of the first pod and of the last, so that switches of one tier all have the same
    number of port groups, as opensm's ftree routing requires (an uneven slice is refused)."""
    leaf_of = _leaf_of(plan)
    by_unit = _units(plan, leaf_of)
    pods = sorted({pod for pod, _ in by_unit})
    wanted = [u for pod in dict.fromkeys(pods[:1] + pods[-1:]) for u in sorted(u for u in by_unit if u[0] == pod)
              [:units_per_pod]]
    return _sliced(plan, _unfabricated(plan, leaf_of) | {n for u in wanted for n in by_unit[u]})


def units_per_pod(plan: Plan) -> int:
    """Leaf groups (scalable units) in the fullest pod."""
    pods: dict[int, int] = defaultdict(int)
    for pod, _ in _units(plan, _leaf_of(plan)):
        pods[pod] += 1
    return max(pods.values(), default=0)


def _sliced(plan: Plan, nodes: set[str]) -> Plan:
    keep_switches = _switches_to_keep(plan, nodes)
    links = tuple(
        c for c in plan.links
        if {c.a.device, c.b.device} <= nodes | keep_switches
    )
    return plan.model_copy(update={
        "nodes": tuple(n for n in plan.nodes if n.name in nodes),
        "switches": tuple(s for s in plan.switches if s.name in keep_switches),
        "links": links,
        "flows": tuple(_sliced_flows(plan.flows, nodes)),
    })


def _sliced_flows(flows: tuple[Flow, ...], kept: set[str]) -> Iterator[Flow]:
    """Each flow between the kept nodes only; one left with no destination is gone."""
    for flow in flows:
        to_nodes = fold([n for n in parse_nodeset(flow.to_nodes) if n in kept]) if flow.to_nodes else ""
        from_nodes = fold([n for n in parse_nodeset(flow.from_nodes) if n in kept]) if flow.from_nodes else ""
        if to_nodes or (flow.to_hosts and (from_nodes or not flow.from_nodes)):
            yield flow.model_copy(update={"to_nodes": to_nodes, "from_nodes": from_nodes})


def _leaf_of(plan: Plan) -> dict[str, Switch]:
    """Each node's leaf on the plane with the most tiers (the fabric worth exercising)."""
    switches = {s.name: s for s in plan.switches}
    deepest = max(plan.capacity, key=lambda c: (c.tiers, c.endpoints)).plane
    return {c.a.device: switches[c.b.device] for c in plan.links
            if c.plane == deepest and c.tier == "node_leaf"}


def _choose_nodes(plan: Plan, max_nodes: int) -> set[str]:
    """Nodes spread over the first two leaf groups of the first pod and the first of the last
    pod (intra-leaf, inter-leaf and inter-pod paths), plus one node of every other group."""
    leaf_of = _leaf_of(plan)
    by_unit = _units(plan, leaf_of)
    units = sorted(by_unit)
    wanted = units[:2] + [u for u in units if u[0] == units[-1][0]][:1] if units else []
    chosen = _unfabricated(plan, leaf_of)
    pools = [by_unit[u] for u in dict.fromkeys(wanted)]
    while len(chosen) < max_nodes and any(pools):
        for pool in pools:
            if pool and len(chosen) < max_nodes:
                chosen.add(pool.pop(0))
    return chosen


def _units(plan: Plan, leaf_of: dict[str, Switch]) -> dict[tuple[int, str], list[str]]:
    """Nodes by (pod, leaf group): a scalable unit's leaves, or one leaf where there are no units."""
    by_unit: dict[tuple[int, str], list[str]] = defaultdict(list)
    for node in plan.nodes:
        leaf = leaf_of.get(node.name)
        if leaf is not None:
            by_unit[leaf.pod or 0, str(leaf.su if leaf.su is not None else leaf.name)].append(node.name)
    return by_unit


def _unfabricated(plan: Plan, leaf_of: dict[str, Switch]) -> set[str]:
    """One node of every group with no node on the deepest fabric (login, storage)."""
    return {next(n.name for n in plan.nodes if n.group == g) for g in {n.group for n in plan.nodes}
            if not any(n.group == g and n.name in leaf_of for n in plan.nodes)}


def _switches_to_keep(plan: Plan, nodes: set[str]) -> set[str]:
    """Leaves of the chosen nodes, the first spines of their pods, the first cores of those
    spines' groups (and every switch of a plane that is a single switch)."""
    leaves = {c.b.device for c in plan.links if c.a.device in nodes and c.tier == "node_leaf"}
    spines = _first_uplinks(plan.links, leaves, "leaf_spine", SPINES_PER_POD)
    cores = _first_uplinks(plan.links, spines, "spine_core", CORES_PER_GROUP)
    return leaves | spines | cores


def _first_uplinks(links: tuple[Link, ...], lower: set[str], tier_name: str, per_lower: int) -> set[str]:
    """The first `per_lower` distinct upper switches each lower switch is cabled to."""
    ups: dict[str, list[str]] = defaultdict(list)
    for c in links:
        if c.tier == tier_name and c.a.device in lower and c.b.device not in ups[c.a.device]:
            ups[c.a.device].append(c.b.device)
    return {u for found in ups.values() for u in found[:per_lower]}
