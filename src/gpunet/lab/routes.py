"""Static routes for routed lab switches: a /32 per endpoint, ECMP over every shortest path."""

from __future__ import annotations

from collections import defaultdict
from ipaddress import IPv4Interface
from typing import TYPE_CHECKING

from gpunet.model.plan import Plan

if TYPE_CHECKING:
    import networkx as nx

Endpoint = tuple[str, str, str]  # (leaf, leaf port interface, address)


def port_if(port: str) -> str:
    """A switch port's interface name in the lab: port 33 is swp33, as a Linux switch (Cumulus, FRR
    on Linux) names it and the rendered frr.conf and the switch checks expect (host ports keep their name)."""
    return port if not port.isdigit() else f"swp{port}"


def port_number(interface: str) -> str | None:
    """The Plan's port of a lab switch interface (swp33 -> "33"); None for other interfaces."""
    number = interface.removeprefix("swp")
    return number if interface.startswith("swp") and number.isdigit() else None


def switch_graph(plan: Plan, plane: str) -> nx.MultiGraph:
    # imported here: every command that reaches a lab server (exec, doctor, apply) imports this
    # module for its port names, and networkx took a fifth of their start-up (0.2-0.8 s) for a
    # graph only `lab up` builds
    import networkx as nx  # noqa: PLC0415

    graph = nx.MultiGraph()
    graph.add_nodes_from(s.name for s in plan.switches if s.plane == plane)
    for c in plan.links:
        if c.plane == plane and c.tier in ("leaf_spine", "spine_core"):
            graph.add_edge(c.a.device, c.b.device, ports={c.a.device: c.a.port, c.b.device: c.b.port})
    return graph


def endpoints(plan: Plan, plane: str, lab_addr: dict[tuple[str, str], IPv4Interface]) -> list[Endpoint]:
    return [(c.b.device, port_if(c.b.port), str(lab_addr[c.a.device, c.a.port].ip))
            for c in plan.links
            if c.plane == plane and c.tier == "node_leaf" and (c.a.device, c.a.port) in lab_addr]


def host_routes(
    plan: Plan, lab_addr: dict[tuple[str, str], IPv4Interface], p2p: dict[tuple[str, str], IPv4Interface],
    extra: dict[str, list[Endpoint]], bgp_planes: frozenset[str] = frozenset(),
) -> dict[str, list[str]]:
    """`ip route` lines per switch. `extra` adds endpoints per plane (the host's veth); on
    `bgp_planes` BGP routes the servers (the switches' frr.conf), so only `extra`'s are here."""
    routes: dict[str, list[str]] = defaultdict(list)
    for plane in {s.plane for s in plan.switches}:
        graph = switch_graph(plan, plane)
        by_leaf: dict[str, list[Endpoint]] = defaultdict(list)
        servers = [] if plane in bgp_planes else endpoints(plan, plane, lab_addr)
        for ep in servers + extra.get(plane, []):
            by_leaf[ep[0]].append(ep)
        for leaf, eps in by_leaf.items():
            routes[leaf] += [f"route add {ip}/32 dev {port}" for _, port, ip in eps]
            for switch, hops in _next_hops(graph, leaf, p2p).items():
                routes[switch] += [f"route add {ip}/32 {hops}" for _, _, ip in eps]
    return routes


def _interleaved(hops: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """Next hops round-robin across neighbours (spine1 link a, spine2 link a, spine1 link b, ...):
    where a kernel hashes the same value at every hop, each spine's share of the hash range then
    still spreads over all its links down."""
    position: dict[str, int] = {}
    ranked = []
    for neighbour, via, dev in hops:
        position[neighbour] = position.get(neighbour, -1) + 1
        ranked.append((position[neighbour], neighbour, via, dev))
    return [(via, dev) for _, _, via, dev in sorted(ranked)]


def _next_hops(graph: nx.MultiGraph, leaf: str, p2p: dict[tuple[str, str], IPv4Interface]) -> dict[str, str]:
    """For every other switch, the ECMP next-hop clause toward `leaf`."""
    import networkx as nx  # noqa: PLC0415  (see switch_graph)

    distance = nx.single_source_shortest_path_length(graph, leaf)
    result = {}
    for switch, dist in distance.items():
        if switch == leaf:
            continue
        hops = _interleaved([
            (neighbour, str(p2p[neighbour, data["ports"][neighbour]].ip), port_if(data["ports"][switch]))
            for _, neighbour, data in graph.edges(switch, data=True)
            if distance.get(neighbour) == dist - 1
        ])
        if len(hops) == 1:
            result[switch] = f"via {hops[0][0]} dev {hops[0][1]}"
        else:
            result[switch] = " ".join(f"nexthop via {via} dev {dev}" for via, dev in hops)
    return result
