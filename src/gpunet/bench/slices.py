"""The fabric's cover cut into slices a scheduled run can afford: by pair class (plane, path class,
rail), by a number of pairs, or by time; what each slice crosses (rails, leaf pairs, leaf–spine
groups), so a rotation of slices can be shown to cross the whole fabric within a period."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from gpunet.bench import CROSS_POD, Fabric, fabric_rounds
from gpunet.bench.aggregate import CLASS_KIND, GROUP_KIND, RAIL_KIND, AggregateKey
from gpunet.bench.schedule import RailPair, Round, RoundPacker
from gpunet.bench.store import Measurement
from gpunet.errors import UsageError

CLASS = "class"
ROUND_OVERHEAD_S = 4  # beyond the tool's seconds: the server's start, both ends' CPU and counters read twice
OMIT_S = 1  # iperf3's -O the run adds to each measurement (BenchSetup.omit)
SIZE_TEXT = re.compile(r"(?:(?P<pairs>[0-9]{1,7})|(?P<time>[0-9]{1,5})(?P<unit>[smh]))")
SLICE_TEXT = re.compile(r"(?P<index>[0-9]{1,6}|next)/(?P<count>[0-9]{1,6})")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


class PairClass(NamedTuple):
    """What a pair's result is judged and reported by: its plane, its path class in the Plan and
    its source's rail (None on a plane without rails)."""

    plane: str
    path: str
    rail: int | None

    @property
    def label(self) -> str:
        return f"{self.plane}/{self.path}/" + ("-" if self.rail is None else f"rail{self.rail}")


@dataclass(frozen=True)
class SliceSize:
    """One pair class a slice (`class`), at most `pairs` pairs, or at most `seconds` estimated."""

    kind: str  # class | pairs | time
    pairs: int = 0
    seconds: int = 0

    @classmethod
    def parse(cls, text: str) -> SliceSize:
        if text == CLASS:
            return cls(CLASS)
        found = SIZE_TEXT.fullmatch(text)
        if found is None or int(found.group("pairs") or found.group("time")) < 1:
            raise UsageError(f"--slice-size {text[:40]!r}: 'class' (one pair class a run), a number of pairs "
                             "(40), or a time (90s, 30m, 2h)")
        if found.group("pairs"):
            return cls("pairs", pairs=int(found.group("pairs")))
        return cls("time", seconds=int(found.group("time")) * UNIT_SECONDS[found.group("unit")])

    @property
    def text(self) -> str:
        return CLASS if self.kind == CLASS else str(self.pairs) if self.kind == "pairs" else f"{self.seconds}s"


@dataclass(frozen=True)
class Crossed:
    """What some pairs measure of the fabric."""

    rails: frozenset[int] = frozenset()
    leaf_pairs: frozenset[tuple[str, str]] = frozenset()
    groups: frozenset[tuple[str, str]] = frozenset()  # (leaf, spine): a bundle of uplinks
    classes: frozenset[PairClass] = frozenset()

    def __or__(self, other: Crossed) -> Crossed:
        return Crossed(self.rails | other.rails, self.leaf_pairs | other.leaf_pairs, self.groups | other.groups,
                       self.classes | other.classes)

    def __sub__(self, other: Crossed) -> Crossed:
        return Crossed(self.rails - other.rails, self.leaf_pairs - other.leaf_pairs, self.groups - other.groups,
                       self.classes - other.classes)

    def counts(self) -> dict[str, int]:
        return {"rails": len(self.rails), "leaf_pairs": len(self.leaf_pairs), "leaf_spine_groups": len(self.groups),
                "pair_classes": len(self.classes)}


@dataclass(frozen=True)
class Slice:
    index: int  # 1-based
    pairs: list[RailPair]
    rounds: list[Round]
    crossed: Crossed
    seconds: int  # estimated


@dataclass
class Cover:
    """The plane's cover cut into slices, and all it crosses."""

    plane: str
    size: SliceSize
    slices: list[Slice] = field(default_factory=list)
    whole: Crossed = Crossed()


def pair_class(plane: str, pair: RailPair) -> PairClass:
    return PairClass(plane, pair.path or "", pair.rail)


def _class_order(key: PairClass) -> tuple[str, int]:
    return key.path, -1 if key.rail is None else key.rail


def crossed_by(fabric: Fabric, plane: str, pairs: Iterable[RailPair]) -> Crossed:
    """The rails, leaf pairs and leaf–spine groups the pairs cross: a pair between two leaves is
    spread over every spine both reach (its streams hash over the equal-cost paths), a cross-pod
    pair over every spine of each."""
    rails: set[int] = set()
    leaf_pairs: set[tuple[str, str]] = set()
    groups: set[tuple[str, str]] = set()
    classes: set[PairClass] = set()
    for pair in pairs:
        rails |= {r for r in (pair.rail, pair.to_rail) if r is not None}
        classes.add(pair_class(plane, pair))
        a, b = fabric.leaves(pair)
        if a and b and a != b:
            leaf_pairs.add((min(a, b), max(a, b)))
            groups |= _groups(fabric, a, b, pair.path == CROSS_POD)
    return Crossed(frozenset(rails), frozenset(leaf_pairs), frozenset(groups), frozenset(classes))


def _groups(fabric: Fabric, a: str, b: str, cross_pod: bool) -> set[tuple[str, str]]:
    up_a, up_b = fabric.spines.get(a, frozenset()), fabric.spines.get(b, frozenset())
    shared = up_a & up_b
    return ({(a, s) for s in (up_a if cross_pod else shared)} | {(b, s) for s in (up_b if cross_pod else shared)})


def cover(fabric: Fabric, plane: str, nodes: list[str], size: SliceSize, seconds: int) -> Cover:
    """The fabric pattern's pairs among the nodes, by pair class, cut into slices of `size`."""
    pairs = [p for r in fabric_rounds(fabric, nodes) for p in r if isinstance(p, RailPair)]  # every one: typed as plain
    ordered = sorted(pairs, key=lambda p: _class_order(pair_class(plane, p)))  # stable: the cover's order kept
    round_s = seconds + OMIT_S + ROUND_OVERHEAD_S
    groups = _by_class(plane, ordered) if size.kind == CLASS else _by_budget(fabric, ordered, size, round_s)
    found = Cover(plane, size, whole=crossed_by(fabric, plane, ordered))
    for index, chunk in enumerate(groups, start=1):
        rounds = _packed(fabric, chunk)
        found.slices.append(Slice(index, chunk, rounds, crossed_by(fabric, plane, chunk), len(rounds) * round_s))
    return found


def _by_class(plane: str, pairs: list[RailPair]) -> list[list[RailPair]]:
    chunks: dict[PairClass, list[RailPair]] = {}
    for pair in pairs:
        chunks.setdefault(pair_class(plane, pair), []).append(pair)
    return list(chunks.values())


def _by_budget(fabric: Fabric, pairs: list[RailPair], size: SliceSize, round_s: int) -> list[list[RailPair]]:
    """Consecutive pairs while the slice holds at most size.pairs, or its rounds fit size.seconds
    (a slice holds one pair at least, whatever its time)."""
    max_rounds = max(1, size.seconds // round_s)
    chunks: list[list[RailPair]] = []
    packer = _packer(fabric)
    for pair in pairs:
        full = (len(chunks[-1]) >= size.pairs if size.kind == "pairs" else packer.round_for(pair) >= max_rounds) \
            if chunks else True
        if full:
            chunks.append([])
            packer = _packer(fabric)
        chunks[-1].append(pair)
        packer.add(pair)
    return chunks


def _packer(fabric: Fabric) -> RoundPacker:
    return RoundPacker(fabric.leaves, lambda leaf: fabric.uplinks.get(leaf, 1))


def _packed(fabric: Fabric, pairs: list[RailPair]) -> list[Round]:
    packer = _packer(fabric)
    for pair in pairs:
        packer.add(pair)
    return packer.rounds


@dataclass(frozen=True)
class SliceChoice:
    """`--slice K/N` or `next/N`: which slice of how many."""

    index: int | None  # 1-based; None: the one after the last stored
    count: int

    @classmethod
    def parse(cls, text: str) -> SliceChoice:
        found = SLICE_TEXT.fullmatch(text)
        count = int(found.group("count")) if found else 0
        index = None if found is None or found.group("index") == "next" else int(found.group("index"))
        if found is None or count < 1 or (index is not None and not 1 <= index <= count):
            raise UsageError(f"--slice {text[:40]!r}: K/N (slice K of N, 1 <= K <= N) or next/N (the one after "
                             "the last run's)")
        return cls(index, count)

    def resolve(self, last: int | None) -> int:
        """The slice to run: the one given, or the one after `last` (the first when none)."""
        if self.index is not None:
            return self.index
        return 1 if last is None else last % self.count + 1


def check_count(found: Cover, choice: SliceChoice) -> None:
    """The schedule was rendered for choice.count slices; a Plan that now cuts into another number
    means the rotation (and its coverage claim) is stale."""
    if len(found.slices) != choice.count:
        raise UsageError(f"the {found.plane} plane's cover now cuts into {len(found.slices)} slices of "
                         f"{found.size.text}, not {choice.count}: the Plan or the nodes changed; render the schedule "
                         "again (`gpunet bench schedule`) and install it")


def slots_per_period(hours: list[int], period: str) -> int:
    return len(hours) * (7 if period == "week" else 1)


def runs_to_cover(found: Cover) -> int:
    """How many runs in rotation order until the whole cover is crossed (the last slice that adds something)."""
    seen = Crossed()
    needed = 0
    for s in found.slices:
        if s.crossed - seen != Crossed():
            needed = s.index
        seen = seen | s.crossed
    return needed


def period_seconds(period: str) -> int:
    return 7 * 86400 if period == "week" else 86400


def parse_hours(text: str) -> list[int]:
    """--hours 1,3: the hours of the day (0-23) the runs start at, each once, in order."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if not words or any(not w.isdigit() or len(w) > 2 or int(w) > 23 for w in words):
        raise UsageError(f"--hours {text[:40]!r}: hours of the day, 0-23, comma-separated (1,3)")
    return sorted({int(w) for w in words})


def slot_name(slot: int, hours: list[int], period: str) -> str:
    """The k-th run of a period (0-based) as a time: `01:00`, or `day 2 03:00` in a week."""
    hour = f"{hours[slot % len(hours)]:02d}:00"
    return hour if period == "day" else f"day {slot // len(hours) + 1} {hour}"


def coverage_report(found: Cover, hours: list[int], period: str) -> dict[str, object]:
    """Which slice runs when in the period (rotation order, the first run at the first hour of day
    1), what each newly crosses, and whether every rail, leaf pair, leaf–spine group and pair class
    is crossed within the period."""
    slots = slots_per_period(hours, period)
    seen = Crossed()
    rows = []
    for s in found.slices:
        new = s.crossed - seen
        seen = seen | s.crossed
        slot = s.index - 1
        rows.append({"slice": f"{s.index}/{len(found.slices)}", "when": slot_name(slot, hours, period)
                     if slot < slots else None, "pairs": len(s.pairs), "rounds": len(s.rounds),
                     "estimated_seconds": s.seconds, "classes": sorted(c.label for c in s.crossed.classes),
                     "rails": sorted(s.crossed.rails), "leaf_spine_groups": sorted(map(list, s.crossed.groups)),
                     "crosses": s.crossed.counts(), "new": new.counts(), "cumulative": seen.counts()})
    needed = runs_to_cover(found)
    return {"plane": found.plane, "slice_size": found.size.text, "slices": len(found.slices), "period": period,
            "hours": hours, "runs_per_period": slots, "runs_to_cover": needed,
            "covered_within_period": needed <= slots, "whole": found.whole.counts(),
            "longest_slice_seconds": max((s.seconds for s in found.slices), default=0), "rotation": rows}


def measurement_groups(fabric: Fabric) -> Callable[[Measurement], list[tuple[str, str]]]:
    """A stored measurement's leaf–spine groups: those its pair crosses between two leaves (none
    for a pair under one leaf, or one whose ends the Plan no longer has)."""
    def groups(m: Measurement) -> list[tuple[str, str]]:
        a = fabric.leaf_of.get((m.source, m.rail), "")
        b = fabric.leaf_of.get((m.destination, m.rail if m.to_rail is None else m.to_rail), "")
        return sorted(_groups(fabric, a, b, m.path == CROSS_POD)) if a and b and a != b else []
    return groups


def expected_keys(found: Cover, metric: str = "throughput") -> list[AggregateKey]:
    """What the whole cover crosses, as the aggregates name it."""
    whole = found.whole
    return ([AggregateKey(CLASS_KIND, c.plane, metric, c.path, -1 if c.rail is None else c.rail)
             for c in sorted(whole.classes, key=_class_order)]
            + [AggregateKey(RAIL_KIND, found.plane, metric, rail=r) for r in sorted(whole.rails)]
            + [AggregateKey(GROUP_KIND, found.plane, metric, leaf=leaf, spine=spine)
               for leaf, spine in sorted(whole.groups)])
