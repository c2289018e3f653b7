"""One plane of a Plan as the simulator sees it: every cable direction a capacity of its own
(a cable carries its speed each way at once), each node's NICs in rail order with the leaf they
plug into, and the switch-to-switch cables by switch, so routing can walk them.

Elements can be taken down by the names `compare` and `localize` use: a switch by name, a cable by
one end (`comp-leaf001:33`) or both (`gpu001:ib0 comp-leaf001:1`, or `a <-> b`). A NIC whose cable
is down is gone from its node; a switch that is down takes every cable of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from gpunet.errors import UsageError
from gpunet.model.plan import Link, Plan

SWITCH_TIERS = ("leaf_spine", "spine_core")


@dataclass(frozen=True, slots=True)
class Nic:
    """A node's NIC on the plane: the cable direction out of it and into it, and the device at the far end."""

    node: str
    interface: str
    rail: int
    gbps: int
    up: int  # resource: node -> switch (or the peer node on a direct cable); capacity 0 while down
    down: int  # resource: switch -> node
    attached: str  # leaf switch, or the peer node of a direct cable


@dataclass
class SimFabric:
    plane: str
    capacity: np.ndarray  # Gb/s per resource (a cable direction): resource 2i is cable i from a to b, 2i+1 back
    links: list[Link]  # the plane's cables
    tier: list[str]  # resource -> cable tier
    nics: dict[str, list[Nic]]  # node -> its NICs, in rail order
    neighbours: dict[str, list[tuple[int, str]]]  # switch -> (resource out, switch at its far end)
    switch_tier: dict[str, str]
    down: tuple[str, ...] = ()
    gpus: dict[str, int] = field(default_factory=dict)
    gpu_model: dict[str, str | None] = field(default_factory=dict)
    # Built once when first asked, shared by the what-if copies (the cables do not change)
    indexes: dict[str, object] = field(default_factory=dict)

    def with_down(self, names: Sequence[str]) -> SimFabric:
        """The same fabric with more switches or cables down (the plan is not read again: a what-if
        on a 100k-GPU plane costs a pass over its cables, not a new fabric)."""
        if not names:
            return self
        gone_switches, gone_cables = resolve_down(self.cable_ends(), self.switch_tier, names)
        capacity = self.capacity.copy()
        touched = set(gone_switches)
        for i in gone_cables:
            capacity[2 * i:2 * i + 2] = 0.0
            touched |= {self.links[i].a.device, self.links[i].b.device}
        if gone_switches:
            for i, link in enumerate(self.links):
                if link.a.device in gone_switches or link.b.device in gone_switches:
                    capacity[2 * i:2 * i + 2] = 0.0
                    touched |= {link.a.device, link.b.device}
        neighbours = dict(self.neighbours)  # only the switches at a lost cable change
        for switch in touched & neighbours.keys():
            neighbours[switch] = [(r, n) for r, n in neighbours[switch] if capacity[r] > 0]
        for switch in gone_switches:
            neighbours.pop(switch, None)
        return replace(self, capacity=capacity, neighbours=neighbours, down=(*self.down, *names))

    @property
    def nodes(self) -> list[str]:
        return list(self.nics)

    def cable_ends(self) -> dict[tuple[str, str], int]:
        """(device, port) -> the cable it ends, for every cable end of the plane."""
        if "ends" not in self.indexes:
            self.indexes["ends"] = {end: i for i, link in enumerate(self.links)
                                    for end in ((link.a.device, link.a.port), (link.b.device, link.b.port))}
        found = self.indexes["ends"]
        assert isinstance(found, dict)
        return found

    def spine_cables(self) -> frozenset[int]:
        """Resources on leaf-spine cables (a byte on one has crossed into the spines)."""
        if "spine" not in self.indexes:
            self.indexes["spine"] = frozenset(r for r, tier in enumerate(self.tier) if tier == "leaf_spine")
        found = self.indexes["spine"]
        assert isinstance(found, frozenset)
        return found

    def ends(self, resource: int) -> tuple[str, str]:
        """(from device:port, to device:port) of a cable direction."""
        link = self.links[resource // 2]
        a, b = f"{link.a.device}:{link.a.port}", f"{link.b.device}:{link.b.port}"
        return (a, b) if resource % 2 == 0 else (b, a)

    def cable_name(self, resource: int) -> str:
        """The cable as cabling.csv names it, a end first ('gpu001:ib0 comp-leaf001:1')."""
        return " ".join(self.ends(resource - resource % 2))

    def direction(self, resource: int) -> str:
        return " -> ".join(self.ends(resource))


def default_plane(plan: Plan) -> str:
    """The plane jobs communicate over: compute if present, else the deepest (as Slurm's topology)."""
    names = [c.plane for c in plan.capacity]
    if "compute" in names:
        return "compute"
    if not plan.capacity:
        raise UsageError("the plan has no switched plane to simulate")
    return max(plan.capacity, key=lambda c: (c.tiers, c.endpoints)).plane


def read_fabric(plan: Plan, plane: str | None = None, down: Sequence[str] = ()) -> SimFabric:
    """The plane's cables as resources, with `down` (switch or cable names) taken out."""
    plane = plane or default_plane(plan)
    planes = [p.name for p in plan.planes]
    if plane not in planes:
        raise UsageError(f"no plane {plane!r} in the plan; planes: {', '.join(planes)}")
    links = [c for c in plan.links if c.plane == plane]
    switches: dict[str, str] = {s.name: s.tier for s in plan.switches if s.plane == plane}
    fabric = SimFabric(plane=plane, capacity=np.zeros(2 * len(links)), links=links, tier=[], nics={},
                       neighbours={s: [] for s in switches}, switch_tier=switches)
    rails = _rails(plan, plane)
    fabric.tier = [link.tier for link in links for _ in (0, 1)]
    for i, link in enumerate(links):
        fabric.capacity[2 * i:2 * i + 2] = link.gbps
        _add_cable(fabric, i, link, switches=switches, rails=rails)
    for nics in fabric.nics.values():
        nics.sort(key=lambda n: (n.rail, n.interface))
    for node in plan.nodes:
        if node.name in fabric.nics:
            fabric.gpus[node.name] = node.gpus
            fabric.gpu_model[node.name] = node.gpu_model
    return fabric.with_down(down)


def _rails(plan: Plan, plane: str) -> dict[tuple[str, str], int]:
    """(node, interface) -> rail: the plan's rail where it has one, else the NIC's order on the plane."""
    rails = {}
    for node in plan.nodes:
        cabled = [i for i in node.interfaces if i.plane == plane and i.cabled]
        for order, iface in enumerate(cabled):
            rails[node.name, iface.name] = iface.rail if iface.rail is not None else order
    return rails


def _add_cable(fabric: SimFabric, i: int, link: Link, *, switches: dict[str, str],
               rails: dict[tuple[str, str], int]) -> None:
    if link.tier in SWITCH_TIERS:
        fabric.neighbours[link.a.device].append((2 * i, link.b.device))
        fabric.neighbours[link.b.device].append((2 * i + 1, link.a.device))
        return
    for end, peer, up, down in ((link.a, link.b, 2 * i, 2 * i + 1), (link.b, link.a, 2 * i + 1, 2 * i)):
        if end.device not in switches:
            rail = rails.get((end.device, end.port), 0)
            fabric.nics.setdefault(end.device, []).append(
                Nic(end.device, end.port, rail, link.gbps, up, down, peer.device))


def resolve_down(ends: dict[tuple[str, str], int], switches: dict[str, str],
                 names: Sequence[str]) -> tuple[set[str], set[int]]:
    """Switch names and cable positions that `names` take down (a switch; a cable by one end
    `device:port`, or both ends, space or `<->` between); an unknown name is a UsageError that shows
    what names look like."""
    gone_switches: set[str] = set()
    gone_cables: set[int] = set()
    for name in names:
        words = name.replace("<->", " ").split()
        cables = {_cable_at(ends, word) for word in words}
        if len(words) == 1 and words[0] in switches:
            gone_switches.add(words[0])
        elif len(words) in (1, 2) and len(cables) == 1 and (cable := cables.pop()) is not None:
            gone_cables.add(cable)
        else:
            raise UsageError(_unknown_element(name, switches, next(iter(ends), ("", ""))))
    return gone_switches, gone_cables


def _cable_at(ends: dict[tuple[str, str], int], word: str) -> int | None:
    device, _, port = word.rpartition(":")
    return ends.get((device, port)) if device else None


def _unknown_element(name: str, switches: dict[str, str], end: tuple[str, str]) -> str:
    examples = {tier: next((s for s, t in switches.items() if t == tier), None) for tier in ("leaf", "spine", "core")}
    shown = ", ".join(s for s in examples.values() if s)
    ends = ":".join(end)
    return (f"no switch or cable {name!r} on this plane; name a switch ({shown}, ... of {len(switches)}), "
            f"or a cable by one end or both as cabling.csv has them ({ends})")
