"""The Prometheus text format (0.0.4) and OpenMetrics 1.0.0, byte for byte what prometheus_client's
generate_latest functions write, in a fifth of the time. A 200-interface scrape is ~2 500 samples,
and prometheus_client escapes, sorts and checks every sample's labels and name on its own (its
OpenMetrics writer rewrites each name a character at a time); here each label set (an interface's
12 series share one dict) and each name is rendered once per scrape. The helpers that decide the
bytes (escaping, floatToGoString) are prometheus_client's own; a family with exemplars, native
histograms or a sample without a value is left to prometheus_client whole.
tests/monitor/test_exposition.py holds both pairs of writers to the same output."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.openmetrics.exposition import escape_label_name, escape_metric_name
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

GO_FLOAT = cast(Callable[[float], str], floatToGoString)  # the number as Go writes it ("1.5e+06")
SHORT_INT = 1_000_000  # below this, Go writes an integer as "N.0"; from it on, as "N.NNNe+06"
OPENMETRICS_ONLY = ("_created", "_gsum", "_gcount")  # the text format moves them to a gauge of their own
TEXT_TYPES = {"counter": "counter", "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram",
              "unknown": "untyped"}  # OpenMetrics type -> text format type; others are the same
OPENMETRICS_EOF = "# EOF\n"
PROMETHEUS_CLIENT_OPENMETRICS = cast(Callable[[Collector], bytes], openmetrics.generate_latest)


class _Rendered:
    """What one scrape has rendered: label sets by their dict (held, so its id is not reused) and
    sample names, escaped the way the format wants."""

    def __init__(self, escape_name: Callable[[str], str]) -> None:
        self.labels: dict[int, tuple[dict[str, str], str]] = {}
        self.names: dict[str, str] = {}
        self.escape_name = escape_name


def generate_text(registry: Collector) -> bytes:
    """What prometheus_client's generate_latest(registry) returns (default escaping, underscores)."""
    output: list[str] = []
    rendered = _Rendered(escape_metric_name)
    for metric in registry.collect():
        try:
            _text_family(metric, output, rendered)
        except Exception as exception:  # as generate_latest does: say which family broke
            exception.args = (exception.args or ("",)) + (metric,)
            raise
    return "".join(output).encode("utf-8")


def generate_openmetrics(registry: Collector) -> bytes:
    """What prometheus_client's openmetrics generate_latest(registry) returns (underscores, 1.0.0)."""
    output: list[str] = []
    rendered = _Rendered(_openmetrics_sample_name)
    for metric in registry.collect():
        if any(s.exemplar or s.native_histogram or s.value is None for s in metric.samples):
            output.append(PROMETHEUS_CLIENT_OPENMETRICS(_One(metric)).decode("utf-8")[:-len(OPENMETRICS_EOF)])
            continue
        try:
            _openmetrics_family(metric, output, rendered)
        except Exception as exception:
            exception.args = (exception.args or ("",)) + (metric,)
            raise
    output.append(OPENMETRICS_EOF)
    return "".join(output).encode("utf-8")


def _text_family(metric: Metric, output: list[str], rendered: _Rendered) -> None:
    name, kind = _text_name_and_type(metric.name, metric.type)
    documentation = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
    escaped = escape_metric_name(name)
    output.append(f"# HELP {escaped} {documentation}\n# TYPE {escaped} {kind}\n")
    moved = {metric.name + suffix: suffix for suffix in OPENMETRICS_ONLY}
    later: dict[str, list[str]] = {}
    for sample_name, line in _lines(metric, rendered, _milliseconds):
        suffix = moved.get(sample_name)
        if suffix is None:
            output.append(line)
        else:
            later.setdefault(suffix, []).append(line)
    for suffix, lines in sorted(later.items()):
        escaped = escape_metric_name(metric.name + suffix)
        output.append(f"# HELP {escaped} {documentation}\n# TYPE {escaped} gauge\n")
        output.extend(lines)


def _openmetrics_family(metric: Metric, output: list[str], rendered: _Rendered) -> None:
    escaped = escape_metric_name(metric.name)
    output.append(f"# HELP {escaped} {_escape_value(metric.documentation)}\n# TYPE {escaped} {metric.type}\n")
    if metric.unit:
        output.append(f"# UNIT {escaped} {metric.unit}\n")
    output.extend(line for _, line in _lines(metric, rendered, _as_given))


def _lines(metric: Metric, rendered: _Rendered, stamp: Callable[[Any], str]) -> list[tuple[str, str]]:
    """(sample name, its line) for each sample: the hot loop, ~2 500 a scrape."""
    lines = []
    for sample in metric.samples:
        labels = ""
        if sample.labels:
            known = rendered.labels.get(id(sample.labels))
            if known is None or known[0] is not sample.labels:
                known = rendered.labels[id(sample.labels)] = (sample.labels, _labels(sample.labels))
            labels = known[1]
        name = rendered.names.get(sample.name) or rendered.names.setdefault(
            sample.name, rendered.escape_name(sample.name))
        timestamp = "" if sample.timestamp is None else stamp(sample.timestamp)
        lines.append((sample.name, f"{name}{labels} {_number(sample.value)}{timestamp}\n"))
    return lines


def _text_name_and_type(name: str, kind: str) -> tuple[str, str]:
    """The text format's family name and type: counters get _total, info _info."""
    if kind == "counter":
        return name + "_total", kind
    if kind == "info":
        return name + "_info", "gauge"
    return name, TEXT_TYPES.get(kind, kind)


def _number(value: float) -> str:
    """floatToGoString, without its float(), repr and exponent checks for the small integers most
    counters hold (exact: below 2**53 repr(float(n)) is "n.0", and Go keeps it under 1e6)."""
    if type(value) is int and -SHORT_INT < value < SHORT_INT:
        return f"{value}.0"
    return GO_FLOAT(value)


def _labels(labels: dict[str, str]) -> str:
    pairs = (f'{escape_label_name(k)}="{_escape_value(v)}"' for k, v in sorted(labels.items()))
    return "{" + ",".join(pairs) + "}"


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _milliseconds(timestamp: Any) -> str:
    return f" {int(float(timestamp) * 1000):d}"


def _as_given(timestamp: Any) -> str:
    return f" {timestamp}"


def _openmetrics_sample_name(name: str) -> str:
    """prometheus_client's OpenMetrics writer maps a sample name through label-name characters
    (a ':' becomes '_'), unlike the family name in HELP and TYPE."""
    escape = cast(Callable[[str, str, Callable[[str, int], bool]], str], openmetrics._escape)
    return escape(name, openmetrics.UNDERSCORES, openmetrics._is_legacy_labelname_rune)


class _One:
    """One family as a collector, for prometheus_client's writer."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> list[Metric]:
        return [self.metric]
