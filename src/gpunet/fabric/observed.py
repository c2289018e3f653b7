"""What the fabric reports, in the Plan's names: links between (device, port) ends, from LLDP
neighbour tables or an ibnetdiscover topology. Names the Plan does not know stay as reported,
marked unknown, so a cable to them is "cannot tell", not a wrong cable."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from gpunet.fabric.ibnetdiscover import IbNode, IbTopology
from gpunet.model.base import bulk_objects
from gpunet.model.plan import Link, Plan
from gpunet.probe.lldp import LldpNeighbor

UNKNOWN = "?"  # prefix of a device name the Plan does not have
TRAILING_NUMBER = re.compile(r"(?<![0-9])([0-9]{1,4})$")  # swp33, Ethernet33, Eth1/33, p33 -> 33
MELLANOX_DESCRIPTION = re.compile(r"^MF0;([^:]+):")  # "MF0;leaf01:MQM9700/U1"
new_end = tuple.__new__  # new_end(End, (device, port)): see End


class End(NamedTuple):
    """A device's port. Made as new_end(End, (device, port)) where there are millions: the same tuple
    without the Python-level __new__ of a named tuple, half the time."""

    device: str
    port: str

    def __str__(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def known(self) -> bool:
        return not self.device.startswith(UNKNOWN)


class Seen(NamedTuple):
    """One link the fabric reported; width and speed where the tool tells them. A named tuple,
    as End: a frozen dataclass takes three times as long to make, for each of a 1M-GPU fabric's
    10^6 links."""

    a: End
    b: End
    width: int | None = None  # InfiniBand lanes (4 for 4xNDR)
    speed: str | None = None  # InfiniBand speed name
    gbps: float | None = None  # Ethernet: from LLDP's MAU type

    def other(self, end: tuple[str, str]) -> End:  # an End, or the same as a plain tuple
        return self.b if end == self.a else self.a


@dataclass
class Observation:
    source: str  # "LLDP", "ibnetdiscover"
    links: list[Seen]
    looked: set[str]  # devices whose ports the tool read: silence there means no link
    notes: list[str] = field(default_factory=list)
    speed_cap: str | None = None  # the fastest InfiniBand speed the source can show


def cables_by_end(plan: Plan) -> dict[End, Link]:
    """Every planned cable under each of its two ends."""
    return {End(p.device, p.port): link for link in plan.links for p in (link.a, link.b)}


class Names:
    """Plan names for what tools report: hosts without their domain, switch ports by number."""

    def __init__(self, plan: Plan) -> None:
        self.switch_radix = {s.name: s.radix for s in plan.switches}
        self.hcas = {(n.name, i.hca): i.name for n in plan.nodes for i in n.interfaces if i.hca}
        self.lower = {name.lower(): name for name in [*self.switch_radix, *(n.name for n in plan.nodes)]}
        self._plan = plan

    @cached_property
    def interfaces(self) -> dict[str, set[str]]:
        """node -> its interface names, for ports reported by name (LLDP): an InfiniBand fabric names
        its ports by HCA and number, and needs none of a 1M-GPU plan's 125 000 sets."""
        return {n.name: {i.name for i in n.interfaces} for n in self._plan.nodes}

    @cached_property
    def planned_far(self) -> dict[End, End]:
        """Only for switches to be named by their neighbours: built when the first is met (two
        tuples a cable, millions in a 1M-GPU plan, and a fabric with its names set needs none)."""
        return {End(a.device, a.port): End(b.device, b.port)
                for link in self._plan.links for a, b in ((link.a, link.b), (link.b, link.a))}

    def device(self, reported: str | None) -> str | None:
        if not reported:
            return None
        text = reported.strip().lower()
        return self.lower.get(text) or self.lower.get(text.split(".")[0])

    def port(self, device: str, names: Sequence[str]) -> str | None:
        """The Plan's port of `device` that one of the reported names means."""
        if device in self.switch_radix:
            for name in names:
                number = TRAILING_NUMBER.search(name)
                if number and 1 <= int(number[1]) <= self.switch_radix[device]:
                    return str(int(number[1]))
            return None
        return next((n for n in names if n in self.interfaces.get(device, ())), None)


def from_lldp(plan: Plan, tables: Mapping[str, Sequence[LldpNeighbor]]) -> Observation:
    """Neighbour tables by the device that reported them (its Plan name)."""
    names, links = Names(plan), dict[frozenset[End], Seen]()
    for reporter, neighbours in tables.items():
        for neighbour in neighbours:
            local = End(reporter, names.port(reporter, [neighbour.local_port]) or neighbour.local_port)
            seen = Seen(local, _lldp_remote(names, neighbour), gbps=neighbour.speed_gbps)
            links.setdefault(frozenset((seen.a, seen.b)), seen)
    return Observation("LLDP", list(links.values()), set(tables))


def _lldp_remote(names: Names, neighbour: LldpNeighbor) -> End:
    device = names.device(neighbour.system_name)
    shown = neighbour.system_name or neighbour.chassis_id or "unnamed"
    port_names = neighbour.port_names
    if device is None:
        return End(UNKNOWN + shown, port_names[0] if port_names else "?")
    return End(device, names.port(device, port_names) or (port_names[0] if port_names else "?"))


def from_ibnetdiscover(plan: Plan, topology: IbTopology) -> Observation:
    with bulk_objects():  # a 1M-GPU fabric's 10^6 links: no collector passes over them as they are built
        return _from_ibnetdiscover(plan, topology)


def _from_ibnetdiscover(plan: Plan, topology: IbTopology) -> Observation:
    names = Names(plan)
    ends = _ib_names(names, topology)
    links = [Seen(_ib_end(ends, link.node, link.port), _ib_end(ends, link.remote, link.remote_port),
                  link.width, link.speed) for link in topology.links]
    looked = {device for device, _ in ends.values() if not device.startswith(UNKNOWN)}
    unnamed = [n.description for n in topology.nodes if ends[n.node_id][0].startswith(UNKNOWN)]
    notes = [f"{len(unnamed)} node(s) whose description names no device of the plan, e.g. {unnamed[0]!r}: set "
             "node descriptions (\"<host> <hca>\" on hosts, the planned name on switches)"] if unnamed else []
    return Observation("ibnetdiscover", links, looked, notes)


def _ib_names(names: Names, topology: IbTopology) -> dict[str, tuple[str, str | None]]:
    """node id -> (Plan device, HCA interface or None for a switch); unknown devices prefixed."""
    found = {n.node_id: _ib_name(names, n) for n in topology.nodes}
    for _ in range(3):  # each pass can name the switches above those named before
        learned = _learn_switches(names, topology, found)
        if not learned:
            break
        found |= learned
    return found


def _ib_name(names: Names, node: IbNode) -> tuple[str, str | None]:
    if node.kind == "switch":
        mellanox = MELLANOX_DESCRIPTION.match(node.description)
        device = names.device(mellanox[1] if mellanox else node.description.split()[0] if node.description else "")
        return (device, None) if device in names.switch_radix else (UNKNOWN + node.node_id, None)
    host, _, hca = node.description.rpartition(" ")
    device = names.device(host)
    if device is None or (device, hca) not in names.hcas:
        return UNKNOWN + node.node_id, None
    return device, names.hcas[device, hca]


def _learn_switches(names: Names, topology: IbTopology, found: dict[str, tuple[str, str | None]]
                    ) -> dict[str, tuple[str, str | None]]:
    """A switch whose description names no planned switch is the planned switch that most of its
    named neighbours are cabled to at the same port numbers, if that is most of them and no other
    switch has the name already (GUIDs are learned, not required)."""
    unnamed = [node.node_id for node in topology.nodes
               if node.kind == "switch" and found[node.node_id][0].startswith(UNKNOWN)]
    if not unnamed:
        return {}
    taken = {device for device, _ in found.values()}
    learned: dict[str, tuple[str, str | None]] = {}
    ports_of = _ports_of(topology, set(unnamed))
    for node_id in unnamed:
        votes, named = Counter[str](), 0
        for port, remote, remote_port in ports_of.get(node_id, ()):
            if found.get(remote, (UNKNOWN,))[0].startswith(UNKNOWN):
                continue
            named += 1
            far = names.planned_far.get(_ib_end(found, remote, remote_port))
            if far is not None and far.port == str(port) and far.device in names.switch_radix:
                votes[far.device] += 1
        best = votes.most_common(1)
        if best and best[0][1] * 2 > named and best[0][0] not in taken:
            learned[node_id] = (best[0][0], None)
            taken.add(best[0][0])
    return learned


def _ports_of(topology: IbTopology, node_ids: set[str]) -> dict[str, list[tuple[int, str, int]]]:
    """(port, remote node, remote port) of every link at each of the nodes, in the links' order:
    one pass over the links for all of them (one per node is quadratic on an unnamed fabric)."""
    ports: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
    for link in topology.links:
        if link.node in node_ids:
            ports[link.node].append((link.port, link.remote, link.remote_port))
        if link.remote in node_ids and link.remote != link.node:  # a loop is one link at its node
            ports[link.remote].append((link.remote_port, link.node, link.port))
    return ports


PORT_TEXT = tuple(map(str, range(256)))  # a switch port's number as the Plan names it: the parser admits 0-255


def _ib_end(ends: dict[str, tuple[str, str | None]], node_id: str, port: int) -> End:
    """An HCA's port 1 is its planned interface (ib3); a second port is named interface/port."""
    found = ends.get(node_id)
    device, hca_interface = found if found is not None else (UNKNOWN + node_id, None)
    if hca_interface is not None:
        return new_end(End, (device, hca_interface if port == 1 else f"{hca_interface}/{port}"))
    return new_end(End, (device, PORT_TEXT[port] if 0 <= port < len(PORT_TEXT) else str(port)))
