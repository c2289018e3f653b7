"""What plan.json must hold together before anything reads it (the Plan's own validator): one owner
per name, cables between known ports, addresses inside their plane, switch addresses each once.

A 1M-GPU plan has 1.5 million interfaces and 2.35 million cables, scattered in memory: each walk
over them is seconds of cache misses. So every interface is visited once (_Interfaces) and every
cable once (_link_problems, which keeps the /31 problems for their turn), and the problems are
still told in the order of the checks."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from socket import inet_aton
from typing import TYPE_CHECKING

from gpunet.model.nodeset import parse_nodeset

if TYPE_CHECKING:
    from gpunet.model.plan import Link, Plan, Port, Switch


def cross_reference_problems(plan: Plan) -> Iterator[str]:
    names = [n.name for n in plan.nodes] + [s.name for s in plan.switches]
    for name in _repeated(names):
        yield f"device name {name!r} is used twice (nodes and switches need names of their own)"
    interfaces = _Interfaces.of(plan)
    for hostname in _repeated(interfaces.hostnames):
        yield f"hostname {hostname!r} is given twice"
    p2p: list[str] = []  # the /31 problems, met on the one walk over the cables, told after the addresses'
    routed: set[str] = {p.name for p in plan.planes if p.routing is not None}
    yield from _link_problems(plan, interfaces.ports, routed, p2p)
    yield from _gateway_problems(plan)
    yield from interfaces.outside
    yield from _switch_address_problems(plan, routed, interfaces.switch_held)
    yield from p2p
    yield from _flow_problems(plan)


@dataclass
class _Interfaces:
    """What the checks need of every node's interfaces, in one walk over them."""

    hostnames: list[str] = field(default_factory=list)  # in order, each as often as given
    # node -> its interface names (a later node of the same name over an earlier one's: a name
    # given twice, reported first)
    ports: dict[str, Collection[str]] = field(default_factory=dict)
    # the nodes' addresses (without their prefix) that are also a switch's: all _switch_address_problems
    # asks of them, without a set of a 1M-GPU plan's 1.5 million
    switch_held: set[str] = field(default_factory=set)
    outside: list[str] = field(default_factory=list)  # the problems of interfaces off their plane, in order

    @classmethod
    def of(cls, plan: Plan) -> _Interfaces:
        found = cls()
        subnets = {p.name: IPv4Network(p.subnet) for p in plan.planes}
        # by integer and mask: the addresses are the Interface's own, already validated and normal
        # (dotted quads inet_aton reads as IPv4Address would), and a million IPv4Address objects
        # would take seconds
        masks = {name: (int(net.network_address), int(net.netmask)) for name, net in subnets.items()}
        hostnames, held, outside = found.hostnames, found.switch_held, found.outside
        switch_addresses = set(_switch_addresses(plan))
        for node in plan.nodes:
            names = set()
            for iface in node.interfaces:
                names.add(iface.name)
                if iface.hostname is not None:
                    hostnames.append(iface.hostname)
                subnet = masks.get(iface.plane)
                if subnet is None:
                    outside.append(f"{node.name}/{iface.name} is on plane {iface.plane!r}, which the plan "
                                   "does not have")
                elif iface.address is not None:
                    address = iface.address.partition("/")[0]
                    if address in switch_addresses:
                        held.add(address)
                    if int.from_bytes(inet_aton(address), "big") & subnet[1] != subnet[0]:
                        outside.append(f"{node.name}/{iface.name}: address {iface.address} is outside plane "
                                       f"{iface.plane}'s {subnets[iface.plane]}")
            found.ports[node.name] = names
        return found


def _repeated(values: list[str]) -> Iterator[str]:
    """Each value met again, in order (as often as it is met again): one set of all of them where
    there is none (every plan gpunet writes), the walk only where there is."""
    if len(set(values)) == len(values):
        return
    seen: set[str] = set()
    for value in values:
        if value in seen:
            yield value
        seen.add(value)


MAX_NUMBERED_PORTS = 512  # the largest radix whose port names are listed: a 64-port switch's 128 lanes and more


def _link_problems(plan: Plan, node_ports: dict[str, Collection[str]], routed: set[str],
                   p2p: list[str]) -> Iterator[str]:
    """Each cable end a port of its device: an interface of a node (`node_ports`), or a numbered
    port of a switch (1 to its radix). Looked up in one set of port names a device (a switch's
    shared by every switch of its radix): no tuple made and hashed for each of a 1M-GPU plan's 4.7
    million ends. An end not found there ("01" is a switch's port 1 too) is judged by the rule
    itself. `p2p` gets the /31 problems, in order."""
    switches = {s.name: s.radix for s in plan.switches}
    # a radix is input: past any switch's port count, every end is judged by the rule itself
    numbered = {radix: frozenset(map(str, range(1, radix + 1))) if radix <= MAX_NUMBERED_PORTS else frozenset()
                for radix in set(switches.values())}
    # a switch's entry over a node's of the same name: a name given twice, reported first
    ports = node_ports | {name: numbered[radix] for name, radix in switches.items()}
    planes = {p.name for p in plan.planes}
    cables: set[str] = set()
    for link in plan.links:
        if link.plane not in planes:
            yield f"cable {link.a.device}:{link.a.port} is on plane {link.plane!r}, which the plan does not have"
        a, b = link.a, link.b
        if a.port not in ports.get(a.device, ()):
            yield from _end_problem(a, switches)
        if b.port not in ports.get(b.device, ()):
            yield from _end_problem(b, switches)
        if link.p2p is not None:
            p2p.extend(_p2p_problems(link, routed, cables))


def _end_problem(end: Port, switches: dict[str, int]) -> Iterator[str]:
    """The problem of a cable end its device's port names do not hold, if it has one."""
    if end.device in switches:
        if not end.port.isdigit() or not 1 <= int(end.port) <= switches[end.device]:
            yield f"cable end {end.device}:{end.port} is not a port of that switch"
    else:
        yield f"cable end {end.device}:{end.port} is not an interface of a node or a switch of the plan"


def _addresses_of(switch: Switch) -> list[str]:
    """Its loopback and management addresses, without their prefix."""
    return [a for a in (switch.loopback, switch.management.split("/")[0] if switch.management else None) if a]


def _switch_addresses(plan: Plan) -> Iterator[str]:
    for switch in plan.switches:
        yield from _addresses_of(switch)


def _p2p_problems(link: Link, routed: set[str], cables: set[str]) -> Iterator[str]:
    """/31s only on switch-to-switch cables of routed planes, each its own (`cables`: those met before)."""
    if link.tier not in ("leaf_spine", "spine_core") or link.plane not in routed:
        yield f"cable {link.a.device}:{link.a.port} has a /31 but is not a switch-to-switch cable of a routed plane"
    if link.p2p in cables or not str(link.p2p).endswith("/31"):
        yield f"cable {link.a.device}:{link.a.port}: {link.p2p} is not a /31 of its own"
    cables.add(str(link.p2p))


def _switch_address_problems(plan: Plan, routed: set[str], taken: set[str]) -> Iterator[str]:
    """Each switch address once (loopbacks, management), none a node's (`taken`: the nodes'
    addresses that are a switch's too, without their prefix); ASNs and loopbacks only on routed
    planes (`routed`)."""
    for s in plan.switches:
        if (s.asn is not None or s.loopback is not None) and s.plane not in routed:
            yield f"switch {s.name} has an ASN or loopback on plane {s.plane}, which is not routed"
        for address in _addresses_of(s):
            if address in taken:
                yield f"switch {s.name}: address {address} is used twice"
            taken.add(address)


def _flow_problems(plan: Plan) -> Iterator[str]:
    planes = {p.name for p in plan.planes}
    strangers: dict[str, list[str]] = {}  # NodeSet text -> its names not in the plan: each text read once
    for flow in plan.flows:
        unknown = [n for text in (flow.from_nodes, flow.to_nodes) if text for n in _strangers(plan, text, strangers)]
        if unknown or flow.plane not in planes:
            yield f"flow {flow.service}: names {unknown[0] if unknown else 'plane ' + flow.plane}, not in the plan"


def _strangers(plan: Plan, text: str, known: dict[str, list[str]]) -> list[str]:
    """The names `text` holds that are no node of the plan (most flows name the same few sets: all
    GPU nodes, every node on a plane; a 1M-GPU plan's each expand to 125 000 names)."""
    if text not in known:
        known[text] = [n for n in parse_nodeset(text) if n not in plan.nodes_by_name]
    return known[text]


def _gateway_problems(plan: Plan) -> Iterator[str]:
    subnets = {p.name: IPv4Network(p.subnet) for p in plan.planes}  # a name given twice: its last plane's
    for plane in plan.planes:
        if plane.gateway is not None and IPv4Address(plane.gateway) not in subnets[plane.name]:
            yield f"plane {plane.name}: gateway {plane.gateway} is outside its subnet {plane.subnet}"
