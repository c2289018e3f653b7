"""What plan.json must hold together before anything reads it (the Plan's own validator): one owner
per name, cables between known ports, addresses inside their plane, switch addresses each once."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from typing import TYPE_CHECKING

from gpunet.model.nodeset import parse_nodeset

if TYPE_CHECKING:
    from gpunet.model.plan import Plan


def cross_reference_problems(plan: Plan) -> Iterator[str]:
    yield from _name_problems(plan)
    yield from _link_problems(plan)
    yield from _address_problems(plan)
    yield from _switch_address_problems(plan)
    yield from _p2p_problems(plan)
    yield from _flow_problems(plan)


def _name_problems(plan: Plan) -> Iterator[str]:
    seen: set[str] = set()
    for name in [n.name for n in plan.nodes] + [s.name for s in plan.switches]:
        if name in seen:
            yield f"device name {name!r} is used twice (nodes and switches need names of their own)"
        seen.add(name)
    hostnames: set[str] = set()
    for node in plan.nodes:
        for iface in node.interfaces:
            if iface.hostname is not None and iface.hostname in hostnames:
                yield f"hostname {iface.hostname!r} is given twice"
            hostnames.add(iface.hostname or "")


def _link_problems(plan: Plan) -> Iterator[str]:
    ports = {(n.name, i.name) for n in plan.nodes for i in n.interfaces}
    switches = {s.name: s.radix for s in plan.switches}
    planes = {p.name for p in plan.planes}
    for link in plan.links:
        if link.plane not in planes:
            yield f"cable {link.a.device}:{link.a.port} is on plane {link.plane!r}, which the plan does not have"
        for end in (link.a, link.b):
            if end.device in switches:
                if not end.port.isdigit() or not 1 <= int(end.port) <= switches[end.device]:
                    yield f"cable end {end.device}:{end.port} is not a port of that switch"
            elif (end.device, end.port) not in ports:
                yield f"cable end {end.device}:{end.port} is not an interface of a node or a switch of the plan"


def _switch_address_problems(plan: Plan) -> Iterator[str]:
    """Each switch address once (loopbacks, management), none a node's; ASNs and loopbacks only on
    routed planes."""
    routed = {p.name for p in plan.planes if p.routing is not None}
    taken = {i.address.split("/")[0] for n in plan.nodes for i in n.interfaces if i.address}
    for s in plan.switches:
        if (s.asn is not None or s.loopback is not None) and s.plane not in routed:
            yield f"switch {s.name} has an ASN or loopback on plane {s.plane}, which is not routed"
        for address in filter(None, (s.loopback, s.management.split("/")[0] if s.management else None)):
            if address in taken:
                yield f"switch {s.name}: address {address} is used twice"
            taken.add(address)


def _p2p_problems(plan: Plan) -> Iterator[str]:
    """/31s only on switch-to-switch cables of routed planes, each its own."""
    routed = {p.name for p in plan.planes if p.routing is not None}
    cables: set[str] = set()
    for link in (c for c in plan.links if c.p2p is not None):
        if link.tier not in ("leaf_spine", "spine_core") or link.plane not in routed:
            yield f"cable {link.a.device}:{link.a.port} has a /31 but is not a switch-to-switch cable of a routed plane"
        if link.p2p in cables or not str(link.p2p).endswith("/31"):
            yield f"cable {link.a.device}:{link.a.port}: {link.p2p} is not a /31 of its own"
        cables.add(str(link.p2p))


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


def _address_problems(plan: Plan) -> Iterator[str]:
    subnets = {p.name: IPv4Network(p.subnet) for p in plan.planes}
    for plane in plan.planes:
        if plane.gateway is not None and IPv4Address(plane.gateway) not in subnets[plane.name]:
            yield f"plane {plane.name}: gateway {plane.gateway} is outside its subnet {plane.subnet}"
    # by integer and mask: the addresses are the Interface's own, already validated and normal, and
    # a million IPv4Address objects would take seconds
    masks = {name: (int(net.network_address), int(net.netmask)) for name, net in subnets.items()}
    for node in plan.nodes:
        for iface in node.interfaces:
            subnet = masks.get(iface.plane)
            if subnet is None:
                yield f"{node.name}/{iface.name} is on plane {iface.plane!r}, which the plan does not have"
            elif iface.address is not None and _as_int(iface.address) & subnet[1] != subnet[0]:
                yield (f"{node.name}/{iface.name}: address {iface.address} is outside plane {iface.plane}'s "
                       f"{subnets[iface.plane]}")


def _as_int(address: str) -> int:
    """10.0.0.5/24 -> the address as an integer."""
    a, b, c, d = address.split("/", 1)[0].split(".")
    return (int(a) << 24) | (int(b) << 16) | (int(c) << 8) | int(d)
