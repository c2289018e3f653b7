"""A run's measurements folded per pair class (plane, path class, rail), per rail and per leaf–spine
group: what stays once raw outputs are pruned, what the exporter serves and baselines are set from.
Inconclusive measurements (an end saturated) count, but never into a median: they say nothing of
the link."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import NamedTuple

from gpunet.bench.store import Measurement
from gpunet.model.base import Frozen

CLASS_KIND, RAIL_KIND, GROUP_KIND = "class", "rail", "group"
FLAGGED = ("low", "failed", "congested")


class AggregateKey(NamedTuple):
    """What an aggregate is of: a pair class (path, rail), a rail, or a leaf–spine group (leaf, spine)."""

    kind: str
    plane: str
    metric: str
    path: str = ""
    rail: int = -1  # -1: none (SQLite compares NULLs badly in keys)
    leaf: str = ""
    spine: str = ""

    @property
    def label(self) -> str:
        if self.kind == CLASS_KIND:
            return f"{self.plane}/{self.path or '-'}/" + ("-" if self.rail < 0 else f"rail{self.rail}")
        if self.kind == RAIL_KIND:
            return f"{self.plane}/rail{self.rail}"
        return f"{self.plane}/{self.leaf}>{self.spine}"


class Aggregate(Frozen):
    kind: str
    plane: str
    metric: str
    path: str = ""
    rail: int = -1
    leaf: str = ""
    spine: str = ""
    pairs: int
    judged: int  # conclusive: ok, low, congested, failed
    inconclusive: int
    flagged: int  # low, failed or congested
    median_value: float | None  # of the judged (Gb/s); None when none was
    median_percent: float | None  # of expected, of the judged that had an expectation

    @property
    def key(self) -> AggregateKey:
        return AggregateKey(self.kind, self.plane, self.metric, self.path, self.rail, self.leaf, self.spine)


GroupsOf = Callable[[Measurement], Iterable[tuple[str, str]]]  # a pair's leaf–spine groups (none: not known)


def class_key(m: Measurement) -> AggregateKey:
    return AggregateKey(CLASS_KIND, m.plane, m.metric, m.path or "", -1 if m.rail is None else m.rail)


def keys_of(m: Measurement, groups_of: GroupsOf) -> list[AggregateKey]:
    """Every aggregate a measurement counts in: its class, both ends' rails, the groups it crosses."""
    keys = [class_key(m)]
    rails = {r for r in (m.rail, m.rail if m.to_rail is None else m.to_rail) if r is not None}
    keys += [AggregateKey(RAIL_KIND, m.plane, m.metric, rail=r) for r in sorted(rails)]
    keys += [AggregateKey(GROUP_KIND, m.plane, m.metric, leaf=leaf, spine=spine)
             for leaf, spine in sorted(set(groups_of(m)))]
    return keys


def aggregate(measurements: Iterable[Measurement], groups_of: GroupsOf = lambda m: ()) -> list[Aggregate]:
    """Per class, rail and group, in key order."""
    folded: dict[AggregateKey, list[Measurement]] = defaultdict(list)
    for m in measurements:
        for key in keys_of(m, groups_of):
            folded[key].append(m)
    return [_fold(key, ms) for key, ms in sorted(folded.items())]


def _fold(key: AggregateKey, ms: list[Measurement]) -> Aggregate:
    judged = [m for m in ms if m.status != "inconclusive"]
    percents = [p for m in judged if (p := m.percent_of_expected) is not None]
    return Aggregate(**key._asdict(), pairs=len(ms), judged=len(judged), inconclusive=len(ms) - len(judged),
                     flagged=sum(m.status in FLAGGED for m in judged),
                     median_value=statistics.median(m.value for m in judged) if judged else None,
                     median_percent=statistics.median(percents) if percents else None)
