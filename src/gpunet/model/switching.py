"""One switch of the Plan as its neighbours see it: its cabled ports, its eBGP sessions (one per
switch-to-switch cable), the host addresses a leaf routes to its ports, and how many equal-cost
next hops it has toward each leaf. Read by the switch renders (FRR, SONiC, NVUE) and the switch
checks, so a rendered session and a checked one are the same session."""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from typing import Literal

from gpunet.model.plan import Link, Plan, Plane, Switch

SWITCH_TIERS = ("leaf_spine", "spine_core")


@dataclass(frozen=True)
class SwitchPort:
    """A cabled port of a switch and what is on the other end of its cable."""

    port: str  # "17": switch ports are numbered 1..radix
    cable: Link
    far_device: str
    far_port: str
    kind: Literal["fabric", "host"]  # to another switch, or to a node

    @property
    def number(self) -> int:
        return int(self.port)

    @property
    def far_end(self) -> str:
        """`device:port`, as cabling.csv and the port descriptions name it."""
        return f"{self.far_device}:{self.far_port}"


@dataclass(frozen=True)
class Session:
    """The eBGP session over one switch-to-switch cable."""

    port: SwitchPort
    peer_asn: int
    local_address: str | None  # None where the cable has no /31 (unnumbered only)
    peer_address: str | None


@dataclass(frozen=True)
class HostRoute:
    """A node address a leaf routes to its own ports (a bond's members: several ports)."""

    address: str
    node: str
    interface: str  # the addressed interface: the NIC, or the bond over the members
    ports: tuple[str, ...]


def plane_of(plan: Plan, switch: Switch) -> Plane:
    return next(p for p in plan.planes if p.name == switch.plane)


def switch_ports(plan: Plan, switch: Switch) -> list[SwitchPort]:
    """Every cabled port of the switch, by port number."""
    ports = []
    for cable in plan.links_at.get(switch.name, ()):
        here, far = (cable.a, cable.b) if cable.a.device == switch.name else (cable.b, cable.a)
        kind: Literal["fabric", "host"] = "fabric" if cable.tier in SWITCH_TIERS else "host"
        ports.append(SwitchPort(here.port, cable, far.device, far.port, kind))
    return sorted(ports, key=lambda p: p.number)


def speaks_bgp(plan: Plan, switch: Switch) -> bool:
    """eBGP is expected of a switch the Plan gives an ASN on a routed plane. A plane numbered
    without ASNs (a lab's plane routed statically, an InfiniBand plane's Ethernet stand-in) has
    loopbacks and /31s, so hops map to cables, but no session to look for."""
    return plane_of(plan, switch).routing is not None and switch.asn is not None


def sessions(plan: Plan, switch: Switch) -> list[Session]:
    """One eBGP session per switch-to-switch cable of a switch that speaks BGP (none elsewhere)."""
    if not speaks_bgp(plan, switch):
        return []
    found = []
    for port in (p for p in switch_ports(plan, switch) if p.kind == "fabric"):
        peer = plan.switches_by_name[port.far_device]
        local, remote = _p2p_ends(port)
        found.append(Session(port, peer.asn or 0, local, remote))
    return found


def _p2p_ends(port: SwitchPort) -> tuple[str | None, str | None]:
    if port.cable.p2p is None:
        return None, None
    low = IPv4Network(port.cable.p2p).network_address
    even, odd = str(low), str(IPv4Address(int(low) + 1))
    return (even, odd) if port.cable.a.device != port.far_device else (odd, even)


def host_routes(plan: Plan, switch: Switch) -> list[HostRoute]:
    """The node addresses behind a leaf's host ports, a bond's once with all its member ports."""
    routes: dict[tuple[str, str], list[str]] = {}
    for port in (p for p in switch_ports(plan, switch) if p.kind == "host"):
        node = plan.node(port.far_device)
        iface = next((i for i in node.interfaces if i.name == port.far_port), None) if node else None
        if node is None or iface is None:
            continue
        addressed = iface.master or iface.name
        routes.setdefault((node.name, addressed), []).append(port.port)
    found = []
    for (node_name, ifname), ports in routes.items():
        node = plan.node(node_name)
        address = next((i.address for i in node.interfaces if i.name == ifname and i.address), None) if node else None
        if address is not None:
            found.append(HostRoute(address.split("/")[0], node_name, ifname, tuple(ports)))
    return found


def widest_ecmp(plan: Plan, switch: Switch) -> int:
    """The most equal-cost next hops the switch has toward any destination: its uplinks (a leaf
    reaches every remote leaf over all of them; a spine every other pod over its core links), or
    the parallel cables to one neighbour below it. BGP's maximum-paths must be at least this."""
    fabric = [p for p in switch_ports(plan, switch) if p.kind == "fabric"]
    up = sum(1 for p in fabric if p.cable.a.device == switch.name)
    per_neighbour = Counter(p.far_device for p in fabric)
    return max([up, *per_neighbour.values(), 1])


def switch_graph(plan: Plan, plane: str) -> dict[str, set[str]]:
    """The plane's switches and, for each, the switches it is cabled to. A breadth-first walk of
    it is all the routing needs: networkx, for that, was a tenth of a second of every render's
    and plan's start-up."""
    graph: dict[str, set[str]] = {s.name: set() for s in plan.switches if s.plane == plane}
    for c in plan.links:
        if c.plane == plane and c.tier in SWITCH_TIERS:
            graph.setdefault(c.a.device, set()).add(c.b.device)
            graph.setdefault(c.b.device, set()).add(c.a.device)
    return graph


def hops_from(graph: dict[str, set[str]], start: str) -> dict[str, int]:
    """The fewest cables from `start` to each switch it reaches (itself at 0)."""
    distance = {start: 0}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        for neighbour in graph.get(here, ()):
            if neighbour not in distance:
                distance[neighbour] = distance[here] + 1
                queue.append(neighbour)
    return distance


def ecmp_next_hops(plan: Plan, switch: Switch) -> dict[str, list[Session]]:
    """Per other leaf of the plane: the sessions (cables) of this switch that start a shortest path
    to it. Their count is the ECMP width of that leaf's routes here."""
    graph = switch_graph(plan, switch.plane)
    if switch.name not in graph:
        return {}
    here = hops_from(graph, switch.name)
    mine = sessions(plan, switch)
    from_neighbour = {n: hops_from(graph, n) for n in {s.port.far_device for s in mine}}
    found = {}
    for leaf in (s.name for s in plan.switches if s.plane == switch.plane and s.tier == "leaf"):
        if leaf != switch.name and leaf in here:
            found[leaf] = [s for s in mine if from_neighbour[s.port.far_device].get(leaf) == here[leaf] - 1]
    return found


def ecmp_widths(plan: Plan, switch: Switch) -> dict[str, int]:
    """Per other leaf of the plane: the ECMP width of its routes here."""
    return {leaf: len(hops) for leaf, hops in ecmp_next_hops(plan, switch).items()}


def sonic_lanes(gbps: int) -> int:
    """SerDes lanes per SONiC port at this speed: its interface names step by them (Ethernet0,
    Ethernet8 ... at 400G), what gpunet renders and what `portstat` reports."""
    return 8 if gbps >= 400 else 4 if gbps >= 40 else 1
