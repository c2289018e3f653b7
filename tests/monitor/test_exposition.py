"""generate_text (the exporter's text format encoder) writes the bytes prometheus_client's
generate_latest writes: for the exporter's own registries, for every metric type and the odd
names, labels and values the format must escape or spell out, and for random ones."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import Counter, Gauge, Histogram, Info, Summary, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
    StateSetMetricFamily,
    UnknownMetricFamily,
)
from prometheus_client.registry import CollectorRegistry

from gpunet.monitor.collectors import NodeView
from gpunet.monitor.exporter import GpunetCollector, node_collectors
from gpunet.monitor.exposition import generate_text
from tests.monitor.test_exporter import recorded_view

ODD_VALUES = [0, -0.0, 1, -1, 999_999, 1_000_000, -1_000_000, 2**53 + 1, 2**70, 1.5e-7, 123456.789, 1e21,
              math.inf, -math.inf, math.nan, True, 0.1 + 0.2]


class Families:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def registry_of(families: list[Metric]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families(families))
    return registry


def test_the_recorded_node_is_byte_identical(tmp_path: Path) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpunetCollector(node_collectors(recorded_view(tmp_path), True), clock=lambda: 0.0))
    assert generate_text(registry) == generate_latest(registry)
    assert b"gpunet_plan_drift{" in generate_text(registry)


def test_this_hosts_interfaces_are_byte_identical() -> None:
    families = [f for collect in node_collectors(NodeView(include_virtual=True), False).values() for f in collect()]
    registry = registry_of(families)
    assert generate_text(registry) == generate_latest(registry)


def test_every_type_and_the_odd_texts_are_byte_identical() -> None:
    registry = CollectorRegistry()
    Counter("requests", "A counter with _created.", ["path"], registry=registry).labels('a"b\\c\nd').inc(3)
    Histogram("latency_seconds", "Buckets, sum, count, created.", registry=registry).observe(0.3)
    Summary("size_bytes", "Help with \\ and \n inside.", registry=registry).observe(7)
    Gauge("temperature", "Plain gauge.", ["zone"], registry=registry).labels("ünïcode ✓").set(-0.0)
    Info("build", "An info.", registry=registry).info({"version": "1.2", "commit": "abc"})
    families = [
        GaugeHistogramMetricFamily("queue", "gsum and gcount.", buckets=[("1.0", 4), ("+Inf", 5)], gsum_value=3),
        StateSetMetricFamily("mode", "A stateset.", {"a": True, "b": False}),
        UnknownMetricFamily("legacy", "Untyped.", value=2),
        GaugeMetricFamily("with.dot-name", "A name outside the legacy set.", value=1),
        CounterMetricFamily("stamped", "With a timestamp.", labels=["odd-label"]),
        GaugeMetricFamily("values", "Every odd number.", labels=["n"]),
    ]
    families[4].add_metric(["x"], 5, timestamp=1700000000.123)
    for index, value in enumerate(ODD_VALUES):
        families[5].add_metric([str(index)], value)
    registry.register(Families(families))
    assert generate_text(registry) == generate_latest(registry)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.one_of(st.integers(), st.floats())), min_size=1, max_size=6))
def test_random_labels_and_values_are_byte_identical(rows: list[tuple[str, float]]) -> None:
    counter = CounterMetricFamily("rows", "Random rows.", labels=["device", "plane"])
    gauge = GaugeMetricFamily("rows_gauge", "The same label sets again.", labels=["device", "plane"])
    for text, value in rows:
        counter.add_metric([text, text[::-1]], value)
        gauge.add_metric([text, text[::-1]], value)
    registry = registry_of([counter, gauge])
    assert generate_text(registry) == generate_latest(registry)
