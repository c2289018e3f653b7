"""Baselines per pair class: the median over chosen runs of each class's median (saturated ends
left out, as in every median here), and the latest result of each class judged against it by the
compare rules (default: warn 5 % below, fail 10 % below)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

from gpunet.bench.aggregate import CLASS_KIND, Aggregate, AggregateKey
from gpunet.bench.compare import Rules, Verdict
from gpunet.bench.history import Baseline, Latest
from gpunet.model.base import Frozen


class ClassVerdict(Frozen):
    label: str
    plane: str
    metric: str
    path: str
    rail: int
    baseline: float | None
    current: float | None
    variance: float | None
    verdict: Verdict
    run_id: int | None = None  # the latest run that measured the class
    started: str | None = None
    reason: str | None = None


def baselines_from(per_run: Iterable[tuple[int, Aggregate]], now: datetime | None = None) -> list[Baseline]:
    """A baseline for each class some run judged: the median of those runs' class medians."""
    values: dict[tuple[str, str, str, int], list[float]] = defaultdict(list)
    percents: dict[tuple[str, str, str, int], list[float]] = defaultdict(list)
    runs: dict[tuple[str, str, str, int], set[int]] = defaultdict(set)
    for run_id, a in per_run:
        if a.kind != CLASS_KIND or a.median_value is None:
            continue
        key = (a.plane, a.metric, a.path, a.rail)
        values[key].append(a.median_value)
        runs[key].add(run_id)
        if a.median_percent is not None:
            percents[key].append(a.median_percent)
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    return [Baseline(plane=k[0], metric=k[1], path=k[2], rail=k[3], value=statistics.median(v),
                     percent=statistics.median(percents[k]) if percents[k] else None,
                     runs=",".join(map(str, sorted(runs[k]))), set_at=when) for k, v in sorted(values.items())]


def judge(latest: Iterable[Latest], baselines: Iterable[Baseline], rules: Rules) -> list[ClassVerdict]:
    """Each class with a baseline or a latest result: its verdict. missing: a baseline class no run
    measured; inconclusive: every pair of its latest run had a saturated end; fail: every judged
    pair failed, or a pair of the latest run was flagged (low, failed, congested) whatever the
    median; new: no baseline (or a zero one)."""
    newest = {(f.aggregate.plane, f.aggregate.metric, f.aggregate.path, f.aggregate.rail): f
              for f in latest if f.aggregate.kind == CLASS_KIND}
    base = {(b.plane, b.metric, b.path, b.rail): b for b in baselines}
    return [_verdict(key, newest.get(key), base.get(key), rules) for key in sorted(newest.keys() | base.keys())]


def _verdict(key: tuple[str, str, str, int], found: Latest | None, base: Baseline | None,
             rules: Rules) -> ClassVerdict:
    plane, metric, path, rail = key
    current = found.aggregate.median_value if found else None
    old = base.value if base else None
    variance = (current - old) / old if current is not None and old else None
    verdict: Verdict
    reason = None
    if found is None:
        verdict = "missing"
    elif current is None:
        verdict, reason = "inconclusive", f"all {found.aggregate.pairs} pairs of run {found.run_id} had a saturated end"
    elif found.aggregate.judged and current == 0:
        verdict = "fail"
    else:
        verdict = "new" if variance is None else rules.verdict(metric, plane, variance)
    if found is not None and found.aggregate.flagged and verdict in ("ok", "warn", "new"):
        # A slow path under a fast median: the pair's other streams fill its NIC, its own verdict says it.
        verdict = "fail"
        reason = (f"{found.aggregate.flagged} of {found.aggregate.pairs} pairs of run {found.run_id} low, failed or "
                  "congested (bench show RUN says why)")
    return ClassVerdict(label=AggregateKey(CLASS_KIND, plane, metric, path, rail).label, plane=plane, metric=metric,
                        path=path, rail=rail, baseline=old, current=current, variance=variance, verdict=verdict,
                        run_id=found.run_id if found else None, started=found.started if found else None,
                        reason=reason)
