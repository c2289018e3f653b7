"""Every planned cable against what the fabric reports: a verdict per cable, and findings that say
what to do (one per fault: two swapped cables are one finding, "swap the cables in X and Y").

A cable nobody could look at (neither end's device reported) is `unchecked`, and one linked to a
device the Plan cannot name is `unknown`: neither is a finding, because neither is known wrong."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from typing import Literal

from gpunet.fabric.observed import End, Observation, Seen, new_end
from gpunet.model.base import Frozen, bulk_objects, trusted, updated
from gpunet.model.plan import Link, Plan
from gpunet.model.units import INFINIBAND_SPEEDS_GBPS

Verdict = Literal["ok", "missing", "miswired", "swapped", "speed", "width", "unchecked", "unknown"]
FindingKind = Literal["missing", "miswired", "swapped", "speed", "width", "unplanned", "rail"]
IB_SPEED_BY_GBPS = {gbps: name for name, gbps in INFINIBAND_SPEEDS_GBPS.items()}
IB_SPEED_RANK = {name: rank for rank, name in enumerate(["SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR",
                                                          "XDR"])}
IB_LANES = 4  # every InfiniBand port gpunet plans is 4x


class CableVerdict(Frozen):
    plane: str
    a: str  # "gpu001:ib0"
    b: str  # "comp-leaf001:1"
    verdict: Verdict
    observed: str = ""  # what the fabric showed where it is not the plan


class CablingFinding(Frozen):
    kind: FindingKind
    plane: str | None
    cables: tuple[str, ...]  # the planned cables involved, "a b" as in cabling.csv
    observed: str
    fix: str


class CablingReport(Frozen):
    source: str
    planes: tuple[str, ...]
    cables: tuple[CableVerdict, ...]
    findings: tuple[CablingFinding, ...]
    notes: tuple[str, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(c.verdict for c in self.cables))


def cable_name(link: Link) -> str:
    return f"{link.a.device}:{link.a.port} {link.b.device}:{link.b.port}"


def ends(link: Link) -> tuple[End, End]:
    a, b = link.a, link.b
    return new_end(End, (a.device, a.port)), new_end(End, (b.device, b.port))


class _Fabric:
    """The plan's cables and the reported links, indexed by end."""

    def __init__(self, plan: Plan, observation: Observation, planes: Iterable[str]) -> None:
        self.observation = observation
        self.planes = set(planes)
        self.checked = [link for link in plan.links if link.plane in self.planes]
        self.names = [cable_name(link) for link in self.checked]
        # The reported links some checked cable was seen as (by id: the links are held by the
        # observation): planned at both ends, so _unplanned needs no cable_at for them.
        self.shown: set[int] = set()
        # The first link reported at each end, and any further ones apart: a list for each of
        # the millions of ends that have one link (every end, on a healthy fabric) is most of the time.
        self.first_at: dict[tuple[str, str], Seen] = {}  # End keys, found by plain tuples too
        self.more_at: dict[tuple[str, str], list[Seen]] = defaultdict(list)
        for seen in observation.links:
            if self.first_at.setdefault(seen.a, seen) is not seen:
                self.more_at[seen.a].append(seen)
            if self.first_at.setdefault(seen.b, seen) is not seen or seen.b == seen.a:  # a loop: there twice
                self.more_at[seen.b].append(seen)
        self.switches = {s.name for s in plan.switches}
        self.infiniband = {p.name for p in plan.planes if p.technology == "infiniband"}
        self.plan = plan
        self.rail_of_leaf = {s.name: s.rail for s in plan.switches if s.rail is not None}
        self.rail_of_nic: dict[tuple[str, str], int] = {  # plain tuples, as cable_at's
            (n.name, i.name): i.rail for n in plan.nodes for i in n.interfaces if i.rail is not None}

    @cached_property
    def cable_at(self) -> dict[tuple[str, str], Link]:
        """Every planned cable under each of its ends, for links no checked cable was seen as and
        for findings: none on a healthy fabric whose planes are all checked (two entries a cable, 4.7
        million in a 1M-GPU plan). Keyed by plain (device, port) tuples: equal to an End and hashed
        the same, so every End finds its cable, at a fraction of an End's making."""
        return {(port.device, port.port): link for link in self.plan.links for port in (link.a, link.b)}

    @cached_property
    def plane_of(self) -> Mapping[str, str]:
        """Only for links off the plan or off their rail: none on a healthy fabric."""
        return {s.name: s.plane for s in self.plan.switches} | {
            f"{n.name}:{i.name}": i.plane for n in self.plan.nodes for i in n.interfaces}

    def seen_at(self, end: End) -> list[Seen]:
        """The links reported at the end, in the order reported."""
        first = self.first_at.get(end)
        if first is None:
            return []
        return [first, *self.more_at[end]] if end in self.more_at else [first]

    def far(self, end: End) -> list[End]:
        return [seen.other(end) for seen in self.seen_at(end)]

    def looked(self, end: End) -> bool:
        return end.device in self.observation.looked

    def end_plane(self, end: End) -> str | None:
        return self.plane_of.get(end.device) or self.plane_of.get(str(end))


def check_cabling(plan: Plan, observation: Observation, planes: Iterable[str]) -> CablingReport:
    with bulk_objects():  # a verdict for each of a 1M-GPU plan's 10^6 cables: no collector passes over them
        fabric = _Fabric(plan, observation, planes)
        verdicts = {name: _verdict(fabric, link) for link, name in zip(fabric.checked, fabric.names, strict=True)}
        findings = list(_findings(fabric, verdicts))
        swapped = {c for f in findings if f.kind == "swapped" for c in f.cables}
        cables = tuple(updated(v, {"verdict": "swapped"}) if v.verdict == "miswired" and name in swapped else v
                       for name, v in verdicts.items()) if swapped else tuple(verdicts.values())
        return CablingReport(source=observation.source, planes=tuple(sorted(fabric.planes)), cables=cables,
                             findings=tuple(findings), notes=tuple(observation.notes))


VERDICT_SET = {"plane", "a", "b", "verdict"}  # the fields a verdict is made with: `observed` is left to its default


def _verdict(fabric: _Fabric, link: Link) -> CableVerdict:
    a, b = link.a, link.b
    # Built as trusted: every value is the Plan's or one of the verdicts above (a million validations at 1M GPUs).
    base = trusted(CableVerdict, VERDICT_SET, {"plane": link.plane, "a": f"{a.device}:{a.port}",
                                               "b": f"{b.device}:{b.port}", "verdict": "ok", "observed": ""})
    near, far = (a.device, a.port), (b.device, b.port)  # plain tuples, as first_at's keys
    first = fabric.first_at.get(near)
    # _direct's common case inline (every end of a healthy fabric: one link, the planned one)
    direct = first if first is None or (first.b if near == first.a else first.a) == far else _direct(fabric, near, far)
    if direct is not None:
        fabric.shown.add(id(direct))
        return _rate(fabric, link, direct, base)
    return _not_seen(fabric, link, base)


def _not_seen(fabric: _Fabric, link: Link, base: CableVerdict) -> CableVerdict:
    """A cable the fabric does not show between its planned ends: missing, unchecked, unknown or miswired."""
    a, b = ends(link)
    far_a, far_b = fabric.far(a), fabric.far(b)
    if not far_a and not far_b:
        return updated(base, {"verdict": "missing" if fabric.looked(a) or fabric.looked(b) else "unchecked"})
    shown = "; ".join([f"{a}–{x}" for x in far_a] + [f"{b}–{y}" for y in far_b])
    unknown = any(not x.known for x in [*far_a, *far_b])
    return updated(base, {"verdict": "unknown" if unknown else "miswired", "observed": shown})


def _direct(fabric: _Fabric, a: tuple[str, str], b: tuple[str, str]) -> Seen | None:
    """The reported link of A to B, if any."""
    first = fabric.first_at.get(a)
    if first is None or first.other(a) == b:  # every end of a healthy fabric: one link, the planned one
        return first
    return next((seen for seen in fabric.more_at.get(a, ()) if seen.other(a) == b), None)


def _rate(fabric: _Fabric, link: Link, seen: Seen, base: CableVerdict) -> CableVerdict:
    if seen.width is not None and seen.width < IB_LANES:
        return updated(base, {"verdict": "width", "observed": f"{seen.width}x{seen.speed or ''}"})
    expected = _expected_speed(fabric.observation, link.gbps)
    if seen.speed is not None and expected is not None and seen.speed != expected:
        return updated(base, {"verdict": "speed", "observed": f"{seen.width or ''}x{seen.speed}"})
    if seen.gbps is not None and seen.gbps < link.gbps:
        return updated(base, {"verdict": "speed", "observed": f"{seen.gbps:g} Gbit/s"})
    return base


def _expected_speed(observation: Observation, gbps: int) -> str | None:
    """The InfiniBand speed the plan's rate means, no faster than the source can show."""
    planned = IB_SPEED_BY_GBPS.get(gbps)
    cap = observation.speed_cap
    if planned is not None and cap is not None and IB_SPEED_RANK[planned] > IB_SPEED_RANK[cap]:
        return cap
    return planned


def _findings(fabric: _Fabric, verdicts: dict[str, CableVerdict]) -> Iterator[CablingFinding]:
    used: set[str] = set()
    rails = list(_off_rail(fabric))
    # The cables not ok: the loops over the cables pass every other one (all but a few) with one set
    # lookup, and are not run where there is none (a healthy fabric).
    faulty = {name for name, verdict in verdicts.items() if verdict.verdict != "ok"}
    if faulty:
        yield from _cable_findings(fabric, verdicts, faulty, {f.cables[0]: f for f in rails if f.cables}, used)
    yield from _unplanned(fabric)
    yield from (f for f in rails if not set(f.cables) & used)


def _cable_findings(fabric: _Fabric, verdicts: dict[str, CableVerdict], faulty: set[str],
                    off_rail: dict[str, CablingFinding], used: set[str]) -> Iterator[CablingFinding]:
    """The findings of the cables not ok (`faulty`): miswirings first, then the rest; `used` gets
    the cables each one names."""
    for link, name in zip(fabric.checked, fabric.names, strict=True):
        if name not in faulty or name in used or verdicts[name].verdict != "miswired":
            continue
        finding = (_swap(fabric, link, verdicts) or _moved(fabric, link, verdicts) or _into_free_port(fabric, link)
                   or _miswired(link, verdicts[name]))
        used.update(finding.cables)
        yield _with_rails(finding, [off_rail[c] for c in finding.cables if c in off_rail])
    for link, name in zip(fabric.checked, fabric.names, strict=True):
        if name not in faulty:
            continue
        verdict = verdicts[name]
        if name not in used and verdict.verdict in ("missing", "speed", "width"):
            used.add(name)
            yield _simple(fabric, link, verdict)


def _with_rails(finding: CablingFinding, rails: list[CablingFinding]) -> CablingFinding:
    """A miswiring that also takes NICs off their rails says so in its own words: its fix puts them
    back, so the rail predicate is not a finding of its own there."""
    if not rails:
        return finding
    said = "; ".join(r.observed for r in rails)
    return finding.model_copy(update={"observed": f"{finding.observed}; off its rail: {said}"})


def _crossings(fabric: _Fabric, link: Link, verdicts: dict[str, CableVerdict]
               ) -> Iterator[tuple[End, End, End, Link, End]]:
    """For planned A–B seen at A linked to X, the end of another checked cable Y–X:
    (A, B, X, that cable, Y), from both ends of the link."""
    for near, planned_far in (ends(link), ends(link)[::-1]):
        for x in fabric.far(near):
            other = fabric.cable_at.get(x)
            if other is not None and other is not link and cable_name(other) in verdicts:
                yield near, planned_far, x, other, next(e for e in ends(other) if e != x)


def _swap(fabric: _Fabric, link: Link, verdicts: dict[str, CableVerdict]) -> CablingFinding | None:
    """Planned A–B and Y–X, seen A–X and Y–B: one swap, at X and B."""
    for near, planned_far, x, other, y in _crossings(fabric, link, verdicts):
        if planned_far in fabric.far(y):
            first, second = sorted((x, planned_far))
            near_first, near_second = sorted((near, y))
            return CablingFinding(
                kind="swapped", plane=link.plane, cables=(cable_name(link), cable_name(other)),
                observed=f"{near}–{x} and {y}–{planned_far}",
                fix=f"swap the cables in {first} and {second} (or, the same, in {near_first} and {near_second})")
    return None


def _moved(fabric: _Fabric, link: Link, verdicts: dict[str, CableVerdict]) -> CablingFinding | None:
    """Planned A–B and Y–X, seen A–X and nothing at Y or B: one cable in the wrong port. Told as
    the move at the switch end (from X to B), whichever of the two cables is looked at first."""
    for crossing in _crossings(fabric, link, verdicts):
        near, planned_far, x, other, y = crossing
        if fabric.far(y) or fabric.far(planned_far):
            continue
        cables = (cable_name(link), cable_name(other))
        if near.device in fabric.switches and x.device not in fabric.switches:  # seen from the other cable
            near, planned_far, x, y, cables = x, y, near, planned_far, cables[::-1]
        return CablingFinding(kind="miswired", plane=link.plane, cables=cables,
                              observed=f"{near}–{x}; nothing at {planned_far} or {y}",
                              fix=f"move the cable in {x} to {planned_far}; {y} then goes into {x}")
    return None


def _into_free_port(fabric: _Fabric, link: Link) -> CablingFinding | None:
    """Planned A–B, seen A–X where no cable is planned at X and nothing at B: plugged one port off."""
    for near, planned_far in (ends(link), ends(link)[::-1]):
        seen = fabric.far(near)
        if len(seen) == 1 and seen[0] not in fabric.cable_at and seen[0].known and not fabric.far(planned_far):
            return CablingFinding(kind="miswired", plane=link.plane, cables=(cable_name(link),),
                                  observed=f"{near}–{seen[0]}; nothing at {planned_far}",
                                  fix=f"move the cable in {seen[0]} to {planned_far}")
    return None


def _miswired(link: Link, verdict: CableVerdict) -> CablingFinding:
    a, b = ends(link)
    return CablingFinding(kind="miswired", plane=link.plane, cables=(cable_name(link),), observed=verdict.observed,
                          fix=f"re-cable so that {a} meets {b}")


FIXES = {
    "missing": "no link at either end: check that the cable is plugged in at both, then reseat or replace it",
    "speed": "runs slower than planned: check the cable or optic type and both ports' speed settings",
    "width": "lanes are down: reseat or replace the cable (a bad lane or connector), then check the port",
}


SIMPLE: dict[str, FindingKind] = {"missing": "missing", "speed": "speed", "width": "width"}


def _simple(fabric: _Fabric, link: Link, verdict: CableVerdict) -> CablingFinding:
    if verdict.verdict == "missing":
        observed = "no link"
    elif link.plane in fabric.infiniband:
        observed = f"{verdict.observed}, planned {IB_LANES}x{_expected_speed(fabric.observation, link.gbps)}"
    else:
        observed = f"{verdict.observed}, planned {link.gbps} Gbit/s"
    return CablingFinding(kind=SIMPLE[verdict.verdict], plane=link.plane, cables=(cable_name(link),),
                          observed=observed, fix=FIXES[verdict.verdict])


def _unplanned(fabric: _Fabric) -> Iterator[CablingFinding]:
    """Links between ports no planned cable uses, on a checked plane (or to a device the plan lacks)."""
    for seen in fabric.observation.links:
        if id(seen) in fabric.shown or seen.a in fabric.cable_at or seen.b in fabric.cable_at:
            continue
        planes = {fabric.end_plane(e) for e in (seen.a, seen.b)} - {None}
        if planes and not planes & fabric.planes:
            continue
        yield CablingFinding(kind="unplanned", plane=next(iter(planes & fabric.planes), None), cables=(),
                             observed=f"{seen.a}–{seen.b}", fix="a link the plan does not have: remove it, or "
                             "add it to the plan")


def _off_rail(fabric: _Fabric) -> Iterator[CablingFinding]:
    """The rail predicate: NIC i of every node lands on a leaf of rail i. A NIC seen on another rail's
    leaf puts its rank's traffic on the wrong rail (through the spines, or nowhere on a rail-only
    fabric), whatever the port."""
    for seen in fabric.observation.links:
        for nic, leaf in ((seen.a, seen.b), (seen.b, seen.a)):
            leaf_rail = fabric.rail_of_leaf.get(leaf.device)  # the few leaves first: most ends are no leaf
            rail = fabric.rail_of_nic.get(nic) if leaf_rail is not None else None
            if rail is None or leaf_rail is None or rail == leaf_rail:
                continue
            plane = fabric.end_plane(nic)
            if plane not in fabric.planes:
                continue
            planned = fabric.cable_at.get(nic)
            to = f" (the plan: {next(e for e in ends(planned) if e != nic)})" if planned else ""
            yield CablingFinding(kind="rail", plane=plane,
                                 cables=(cable_name(planned),) if planned else (),
                                 observed=f"{nic} (rail {rail}) lands on {leaf.device}, a rail {leaf_rail} leaf",
                                 fix=f"move the cable of {nic} to a rail {rail} leaf{to}")
