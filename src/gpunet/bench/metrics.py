"""The bench database as Prometheus series (docs/metrics.md, "Regular fabric tests"): the latest
result of every pair class, rail and leaf–spine group with its age, each class's baseline and
variance, the keys the rotation should cross that no run has measured (age +Inf), and how many
runs in a row left pairs inconclusive. Read at scrape time, so every age is as of the scrape."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

from gpunet.bench.aggregate import CLASS_KIND, GROUP_KIND, RAIL_KIND, AggregateKey
from gpunet.bench.history import Baseline, Latest, baselines, inconclusive_streak, latest

BYTES_PER_GBIT = 1e9 / 8
METRIC = "throughput"
LABELS = {CLASS_KIND: ["plane", "path", "rail"], RAIL_KIND: ["plane", "rail"], GROUP_KIND: ["plane", "leaf", "spine"]}
NAMES = {CLASS_KIND: "class", RAIL_KIND: "rail", GROUP_KIND: "group"}


def _labels(key: AggregateKey) -> list[str]:
    rail = "" if key.rail < 0 else str(key.rail)
    return {CLASS_KIND: [key.plane, key.path, rail], RAIL_KIND: [key.plane, rail],
            GROUP_KIND: [key.plane, key.leaf, key.spine]}[key.kind]


def _started(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


class _Families:
    """One family of each name per kind, filled key by key."""

    def __init__(self) -> None:
        self.families: dict[str, GaugeMetricFamily] = {}

    def add(self, kind: str, name: str, help_text: str, key: AggregateKey, value: float) -> None:
        full = f"gpunet_bench_{NAMES[kind]}_{name}"
        if full not in self.families:
            self.families[full] = GaugeMetricFamily(full, help_text, labels=LABELS[kind])
        self.families[full].add_metric(_labels(key), value)


def bench_collector(db: Path, period_s: int, clock: Callable[[], float] = time.time) -> Callable[[], Iterator[Metric]]:
    """The exporter's `bench` collector over the database."""
    def collect() -> Iterator[Metric]:
        return collect_bench(db, period_s, clock())
    return collect


def collect_bench(db: Path, period_s: int, now: float) -> Iterator[Metric]:
    measured, never = latest(db)
    measured = [f for f in measured if f.aggregate.metric == METRIC]  # nccl's bus bandwidth is not a pair's
    never = [k for k in never if k.metric == METRIC]
    families = _Families()
    for found in measured:
        _add_latest(families, found, now)
    for key in never:  # in the rotation's cover, never measured: as old as can be
        families.add(key.kind, "age_seconds", "Seconds since the latest run that measured it started.", key, math.inf)
    for base in (b for b in baselines(db) if b.metric == METRIC):
        _add_baseline(families, base, measured)
    yield from families.families.values()
    period = GaugeMetricFamily("gpunet_bench_period_seconds", "Every pair class, rail and leaf–spine group should "
                               "be measured within this (the schedule's period).")
    period.add_metric([], period_s)
    yield period
    streak = GaugeMetricFamily("gpunet_bench_inconclusive_runs_in_a_row", "The plane's latest runs in a row that "
                               "left a pair inconclusive (an end saturated).", labels=["plane"])
    for plane in sorted({f.aggregate.plane for f in measured}):
        streak.add_metric([plane], inconclusive_streak(db, plane))
    yield streak


def _add_latest(families: _Families, found: Latest, now: float) -> None:
    a, key = found.aggregate, found.aggregate.key
    started = _started(found.started)
    families.add(a.kind, "age_seconds", "Seconds since the latest run that measured it started.", key,
                 math.inf if started is None else max(0.0, now - started))
    families.add(a.kind, "pairs", "Pairs measured in that run.", key, a.pairs)
    families.add(a.kind, "inconclusive_pairs", "Of those, pairs with a saturated end (not judged).", key,
                 a.inconclusive)
    families.add(a.kind, "flagged_pairs", "Of those, pairs low, failed or congested.", key, a.flagged)
    if a.median_value is not None:
        families.add(a.kind, "throughput_bytes_per_second", "Median of the judged pairs' throughput.", key,
                     a.median_value * BYTES_PER_GBIT)
    if a.median_percent is not None:
        families.add(a.kind, "expected_ratio", "Median of the judged pairs' throughput over the Plan's expectation.",
                     key, a.median_percent / 100)


def _add_baseline(families: _Families, base: Baseline, measured: list[Latest]) -> None:
    key = AggregateKey(CLASS_KIND, base.plane, base.metric, base.path, base.rail)
    families.add(CLASS_KIND, "baseline_bytes_per_second", "The class's baseline (bench baseline).", key,
                 base.value * BYTES_PER_GBIT)
    current = next((f.aggregate.median_value for f in measured if f.aggregate.key == key), None)
    if current is not None and base.value:
        families.add(CLASS_KIND, "variance_ratio", "(latest - baseline) / baseline of the class's median throughput.",
                     key, (current - base.value) / base.value)
