"""The exporter's writers, generate_text and generate_openmetrics, write the bytes
prometheus_client's generate_latest functions write: for the exporter's own registries, for every
metric type and the odd names, labels, values, timestamps and exemplars the formats must escape or
spell out, and for random ones."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import Counter, Gauge, Histogram, Info, Summary, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    Exemplar,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
    StateSetMetricFamily,
    UnknownMetricFamily,
)
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector, CollectorRegistry

from gpunet.monitor.collectors import NodeView
from gpunet.monitor.exporter import GpunetCollector, node_collectors
from gpunet.monitor.exposition import generate_openmetrics, generate_text
from tests.monitor.test_exporter import recorded_view

ODD_VALUES = [0, -0.0, 1, -1, 999_999, 1_000_000, -1_000_000, 2**53 + 1, 2**70, 1.5e-7, 123456.789, 1e21,
              math.inf, -math.inf, math.nan, True, 0.1 + 0.2]


class Families:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def assert_both_identical(registry: Collector) -> None:
    assert generate_text(registry) == generate_latest(registry)
    assert generate_openmetrics(registry) == openmetrics.generate_latest(registry)


def registry_of(families: list[Metric]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families(families))
    return registry


def test_the_recorded_node_is_byte_identical(tmp_path: Path) -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpunetCollector(node_collectors(recorded_view(tmp_path), True), clock=lambda: 0.0))
    assert_both_identical(registry)
    assert b"gpunet_plan_drift{" in generate_text(registry)


def test_this_hosts_interfaces_are_byte_identical() -> None:
    families = [f for collect in node_collectors(NodeView(include_virtual=True), False).values() for f in collect()]
    assert_both_identical(registry_of(families))


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
        GaugeMetricFamily("job:recorded:rate", "Colons: kept in HELP, not in OpenMetrics samples.", value=1),
        CounterMetricFamily("stamped", "With a timestamp.", labels=["odd-label"]),
        GaugeMetricFamily("values", "Every odd number.", labels=["n"]),
    ]
    families[5].add_metric(["x"], 5, timestamp=1700000000.123)
    for index, value in enumerate(ODD_VALUES):
        families[6].add_metric([str(index)], value)
    exemplary = CounterMetricFamily("traced", "A counter with an exemplar.", labels=["path"])
    exemplary.add_metric(["/"], 4, exemplar=Exemplar({"trace_id": 'a"b'}, 1.0, 1700000000.5))
    registry.register(Families([*families, exemplary]))
    assert_both_identical(registry)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.one_of(st.integers(), st.floats())), min_size=1, max_size=6))
def test_random_labels_and_values_are_byte_identical(rows: list[tuple[str, float]]) -> None:
    counter = CounterMetricFamily("rows", "Random rows.", labels=["device", "plane"])
    gauge = GaugeMetricFamily("rows_gauge", "The same label sets again.", labels=["device", "plane"])
    for text, value in rows:
        counter.add_metric([text, text[::-1]], value)
        gauge.add_metric([text, text[::-1]], value)
    assert_both_identical(registry_of([counter, gauge]))
