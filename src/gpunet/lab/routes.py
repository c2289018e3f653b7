"""Static routes for routed lab switches: a /32 per endpoint, ECMP over every shortest path."""

from __future__ import annotations

from collections import defaultdict
from ipaddress import IPv4Interface

from gpunet.model.plan import Plan
from gpunet.model.switching import SWITCH_TIERS, hops_from

Endpoint = tuple[str, str, str]  # (leaf, leaf port interface, address)


def port_if(port: str) -> str:
    """A switch port's interface name in the lab: port 33 is swp33, as a Linux switch (Cumulus, FRR
    on Linux) names it and the rendered frr.conf and the switch checks expect (host ports keep their name)."""
    return port if not port.isdigit() else f"swp{port}"


def port_number(interface: str) -> str | None:
    """The Plan's port of a lab switch interface (swp33 -> "33"); None for other interfaces."""
    number = interface.removeprefix("swp")
    return number if interface.startswith("swp") and number.isdigit() else None


# (neighbour, this switch's port, the neighbour's port): one a switch-to-switch cable
Cable = tuple[str, str, str]


def switch_cables(plan: Plan, plane: str) -> dict[str, list[Cable]]:
    """Each switch of the plane and its cables to other switches, in the plan's order (parallel
    cables to one neighbour each their own)."""
    cables: dict[str, list[Cable]] = {s.name: [] for s in plan.switches if s.plane == plane}
    for c in plan.links:
        if c.plane == plane and c.tier in SWITCH_TIERS:
            cables.setdefault(c.a.device, []).append((c.b.device, c.a.port, c.b.port))
            cables.setdefault(c.b.device, []).append((c.a.device, c.b.port, c.a.port))
    return cables


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
        cables = switch_cables(plan, plane)
        graph = {switch: {far for far, _, _ in mine} for switch, mine in cables.items()}
        by_leaf: dict[str, list[Endpoint]] = defaultdict(list)
        servers = [] if plane in bgp_planes else endpoints(plan, plane, lab_addr)
        for ep in servers + extra.get(plane, []):
            by_leaf[ep[0]].append(ep)
        for leaf, eps in by_leaf.items():
            routes[leaf] += [f"route add {ip}/32 dev {port}" for _, port, ip in eps]
            for switch, hops in _next_hops(cables, hops_from(graph, leaf), p2p).items():
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


def _next_hops(cables: dict[str, list[Cable]], distance: dict[str, int],
               p2p: dict[tuple[str, str], IPv4Interface]) -> dict[str, str]:
    """For every other switch, the ECMP next-hop clause toward the leaf `distance` counts from:
    each of its cables to a neighbour one hop nearer."""
    result = {}
    for switch, dist in distance.items():
        if dist == 0:
            continue
        hops = _interleaved([(far, str(p2p[far, far_port].ip), port_if(port))
                             for far, port, far_port in cables[switch] if distance.get(far) == dist - 1])
        if len(hops) == 1:
            result[switch] = f"via {hops[0][0]} dev {hops[0][1]}"
        else:
            result[switch] = " ".join(f"nexthop via {via} dev {dev}" for via, dev in hops)
    return result
