"""A hop's address, as an ICMP error names it, mapped to the Plan: a switch-to-switch cable's /31
names the exact cable and the end that answered; a switch's loopback names the switch only; a
node's address names the node. Where a fault lies past the hop that answered (a packet too big for
the next cable), the cable is inferred from the next hop of the same flow, and said as inferred."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network

from gpunet.model.plan import Link, Plan


@dataclass(frozen=True)
class Hop:
    device: str  # the planned switch or node that answered ("" where the Plan has no such address)
    cable: Link | None = None  # the cable whose /31 holds the address (the one the answer came from)


def shown(link: Link) -> str:
    """A cable as cabling.csv gives it: both ends, device and port."""
    return f"{link.a.device}:{link.a.port} <-> {link.b.device}:{link.b.port}"


class PlanAddresses:
    """The Plan's switch addresses (each cable's /31 ends, loopbacks) and node addresses."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.ends: dict[str, tuple[str, Link]] = {}
        for link in plan.links:
            if link.p2p:
                low = IPv4Network(link.p2p).network_address
                self.ends[str(low)] = (link.a.device, link)
                self.ends[str(low + 1)] = (link.b.device, link)
        self.loopbacks = {s.loopback.split("/")[0]: s.name for s in plan.switches if s.loopback}
        self.nodes = {i.address.split("/")[0]: n.name for n in plan.nodes for i in n.interfaces if i.address}

    def hop(self, address: str) -> Hop:
        if address in self.ends:
            device, link = self.ends[address]
            return Hop(device, link)
        return Hop(self.loopbacks.get(address) or self.nodes.get(address) or "")

    def cables_between(self, a: str, b: str) -> list[Link]:
        return [link for link in self.plan.links if {link.a.device, link.b.device} == {a, b}]

    def next_cable(self, refuser: str, path: Sequence[str], target: str) -> tuple[list[Link], bool]:
        """The cable(s) out of `refuser` toward `target` on a flow's traced path (hop addresses by
        TTL): (cables, exact). Exact where the next hop answered from a /31 on a cable of the
        refuser's, or is the target itself behind its leaf; else the cables between the refuser and
        the next hop's device (inferred from the next hop); none where the path does not say."""
        devices = [self.hop(a).device for a in path]
        if refuser not in devices:
            return [], False
        after = [a for a in path[devices.index(refuser) + 1:] if a]
        following = after[0] if after else target
        nxt = self.hop(following)
        if nxt.cable is not None and refuser in (nxt.cable.a.device, nxt.cable.b.device):
            return [nxt.cable], True
        between = self.cables_between(refuser, nxt.device) if nxt.device else []
        if following == target and len(between) == 1:
            return between, True
        return between, False


def switch_hop_addresses(plan: Plan) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Where the Plan puts its switches' addresses, as probing wants them: each cable's /31 end ->
    (switch, port) (the port it answers from), and every switch address (those, loopbacks,
    management) -> the switch. How a real fabric's hops are named; a lab reads its own namespaces."""
    switches = {s.name for s in plan.switches}
    ports: dict[str, tuple[str, str]] = {}
    for address, (device, link) in PlanAddresses(plan).ends.items():
        if device in switches:
            ports[address] = (device, link.a.port if device == link.a.device else link.b.port)
    devices = {address: device for address, (device, _) in ports.items()}
    devices |= {s.loopback.split("/")[0]: s.name for s in plan.switches if s.loopback}
    devices |= {s.management.split("/")[0]: s.name for s in plan.switches if s.management}
    return ports, devices
