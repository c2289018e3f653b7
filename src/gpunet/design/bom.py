"""The bill of materials: every switch, every NIC and every cable of the plan, each cable once under
the media of its plane and tier (design/media.py).

Cable assemblies (DAC, ACC, AEC, AOC, BASE-T) count one per cable, except on switches whose cages
hold several ports (`breakout`): one assembly then serves a whole cage, a twin cable between two
cages or a splitter from a cage to single NIC ports. Optical links count one fiber per cable and a
transceiver per end: one per NIC port, one per used switch cage (a twin-port module serves both
ports of a 2x400G cage)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from math import ceil

from gpunet.design.media import OPTICAL, cable_model, media_of, nic_model, transceiver_model
from gpunet.model.base import bulk_objects
from gpunet.model.plan import BomLine, Link, NicCard, Node, Plan, Plane, Port, Switch
from gpunet.model.spec import Media

LineKey = tuple[str, str, str, str, str | None]  # item, plane, tier, model, media


@dataclass
class _Tally:
    count: int = 0
    cables: int = 0
    ports: int = 0
    units: set[tuple[str, int, str, int]] = field(default_factory=set)  # shared assemblies

    @property
    def total(self) -> int:
        return self.count + len(self.units)


def plan_bom(plan: Plan) -> list[BomLine]:
    """The full bill of materials of a plan (also of a plan.json written before it was stored)."""
    with bulk_objects():  # design() holds this pause already; a loaded plan's 10^6 objects need it too
        return bill_of_materials(plan.planes, plan.nodes, plan.switches, plan.links)


def bill_of_materials(planes: Sequence[Plane], nodes: Sequence[Node], switches: Sequence[Switch],
                      links: Iterable[Link]) -> list[BomLine]:
    """Switches by plane, tier and model; NICs by plane, group and model; cables and transceivers by
    plane, tier and model."""
    counts = Counter((s.plane, s.tier, s.model) for s in switches)
    lines = [BomLine(item="switch", plane=p, tier=t, model=m, count=n) for (p, t, m), n in counts.items()]
    lines += _nic_lines(planes, nodes)
    return lines + _media_lines(planes, links, {s.name for s in switches})


def _nic_lines(planes: Sequence[Plane], nodes: Sequence[Node]) -> list[BomLine]:
    """Per plane and node group: cards (ports_per_card NICs each, whole cards per node) and ports."""
    cards: dict[tuple[str, str, str], list[int]] = {}
    for plane in planes:
        for node in nodes:
            cabled = [i.speed_gbps for i in node.interfaces if i.plane == plane.name and i.cabled]
            if not cabled:
                continue
            card = plane.nics.get(node.group) or NicCard(model=nic_model(plane.technology, cabled[0]))
            tally = cards.setdefault((plane.name, node.group, card.model), [0, 0])
            tally[0] += ceil(len(cabled) / card.ports_per_card)
            tally[1] += len(cabled)
    return [BomLine.model_validate({"item": "nic", "plane": p, "tier": "node", "model": m, "group": g, "count": n,
                                    "ports": ports}) for (p, g, m), (n, ports) in cards.items()]


class _MediaCounter:
    """Walks the cables once, tallying assemblies, fibers and transceivers per BOM line."""

    def __init__(self, planes: Sequence[Plane], switch_names: set[str]) -> None:
        self.planes = {p.name: p for p in planes}
        self.switches = switch_names
        self.tally: dict[LineKey, _Tally] = {}
        self.cages: set[tuple[str, int]] = set()  # switch cages that have their transceiver
        self.media: dict[tuple[str, str, int], Media] = {}

    def add(self, link: Link) -> None:
        plane = self.planes[link.plane]
        key = (link.plane, link.tier, link.gbps)
        media = self.media.get(key)
        if media is None:
            media = self.media[key] = media_of(plane.technology, plane.cabling.media.get(link.tier), link.tier,
                                                      link.gbps)
        if media in OPTICAL:
            self._optical(plane, link, media)
        else:
            self._assembly(plane, link, media)

    def _line(self, item: str, link: Link, model: str, media: Media) -> _Tally:
        key = (item, link.plane, link.tier, model, media)
        found = self.tally.get(key)
        if found is None:
            found = self.tally[key] = _Tally()
        return found

    def _assembly(self, plane: Plane, link: Link, media: Media) -> None:
        legs = plane.cabling.breakout if media != "rj45" and link.tier != "direct" else 1
        tech, gbps = plane.technology, link.gbps
        if legs == 1:
            line = self._line("cable", link, cable_model(tech, media, gbps), media)
            line.count += 1
        elif link.a.device in self.switches:  # switch to switch: a twin assembly per pair of cages
            line = self._line("cable", link, cable_model(tech, media, gbps, legs), media)
            line.units.add((link.a.device, _cage(link.a, legs), link.b.device, _cage(link.b, legs)))
        else:  # node to leaf: one splitter per leaf cage
            line = self._line("cable", link, cable_model(tech, media, gbps, legs, split=True), media)
            line.units.add((link.b.device, _cage(link.b, legs), "", 0))
        line.cables += 1

    def _optical(self, plane: Plane, link: Link, media: Media) -> None:
        fiber = self._line("cable", link, cable_model(plane.technology, media, link.gbps), media)
        fiber.count += 1
        fiber.cables += 1
        for end in (link.a, link.b):
            legs = plane.cabling.breakout if end.device in self.switches else 1
            line = self._line("transceiver", link, transceiver_model(plane.technology, media, link.gbps, legs), media)
            line.ports += 1
            cage = (end.device, _cage(end, legs)) if legs > 1 else None
            if cage is None or cage not in self.cages:
                line.count += 1
                if cage is not None:
                    self.cages.add(cage)

    def repeat(self, link: Link, times: int) -> None:
        """`times` more cables like `link` (already added) on a plane without breakout: every count
        of theirs grows alike, one fiber and two transceivers, or one assembly, each."""
        plane, media = self.planes[link.plane], self.media[link.plane, link.tier, link.gbps]
        cable = self._line("cable", link, cable_model(plane.technology, media, link.gbps), media)
        cable.count += times
        cable.cables += times
        if media in OPTICAL:
            ends = self._line("transceiver", link, transceiver_model(plane.technology, media, link.gbps, 1), media)
            ends.ports += 2 * times
            ends.count += 2 * times

    def lines(self) -> list[BomLine]:
        return [BomLine.model_validate({"item": item, "plane": plane, "tier": tier, "model": model, "media": media,
                                        "count": t.total, "cables": t.cables, "ports": t.ports})
                for (item, plane, tier, model, media), t in self.tally.items()]


def _cage(end: Port, legs: int) -> int:
    return (int(end.port) - 1) // legs


def _media_lines(planes: Sequence[Plane], links: Iterable[Link], switch_names: set[str]) -> list[BomLine]:
    """On a plane without breakout every end is one port: cables of the same plane, tier, speed and
    kind of ends (switch or node) count alike, so each such class is counted in full once and its
    other cables added by number (a 1M-GPU plan has 2.3M cables and a dozen classes). Lines keep
    the order of the cables that first needed them."""
    counter = _MediaCounter(planes, switch_names)
    single_port = {p.name for p in planes if p.cabling.breakout == 1}
    first: dict[tuple[str, str, int, bool, bool], Link] = {}
    more: Counter[tuple[str, str, int, bool, bool]] = Counter()
    for link in links:
        if link.plane not in single_port:
            counter.add(link)
            continue
        key = (link.plane, link.tier, link.gbps, link.a.device in switch_names, link.b.device in switch_names)
        if key in first:
            more[key] += 1
        else:
            first[key] = link
            counter.add(link)
    for kind, link in first.items():
        counter.repeat(link, more[kind])
    return counter.lines()
