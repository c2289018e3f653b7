"""The Prometheus text format (0.0.4), byte for byte what prometheus_client's generate_latest
writes, in a third of its time. A 200-interface scrape is ~2 500 samples, and generate_latest
escapes, sorts and checks every sample's labels and name on its own; here each label set (an
interface's 12 series share one) and each name is rendered once per scrape. The helpers that
decide the bytes (name and label escaping, floatToGoString) are prometheus_client's own;
tests/monitor/test_exposition.py holds both encoders to the same output."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.exposition import escape_label_name, escape_metric_name
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

GO_FLOAT = cast(Callable[[float], str], floatToGoString)  # the number as Go writes it ("1.5e+06")
SHORT_INT = 1_000_000  # below this, Go writes an integer as "N.0"; from it on, as "N.NNNe+06"
OPENMETRICS_ONLY = ("_created", "_gsum", "_gcount")  # moved to their own gauge, after the family
TEXT_TYPES = {"counter": "counter", "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram",
              "unknown": "untyped"}  # OpenMetrics type -> text format type; others are the same


def generate_text(registry: Collector) -> bytes:
    """What generate_latest(registry) returns (default escaping, underscores)."""
    output: list[str] = []
    rendered: dict[int, tuple[dict[str, str], str]] = {}
    names: dict[str, str] = {}
    for metric in registry.collect():
        try:
            _family(metric, output, rendered, names)
        except Exception as exception:  # as generate_latest does: say which family broke
            exception.args = (exception.args or ("",)) + (metric,)
            raise
    return "".join(output).encode("utf-8")


def _family(metric: Metric, output: list[str], rendered: dict[int, tuple[dict[str, str], str]],
            names: dict[str, str]) -> None:
    name, kind = _text_name_and_type(metric.name, metric.type)
    documentation = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
    escaped = escape_metric_name(name)
    output.append(f"# HELP {escaped} {documentation}\n# TYPE {escaped} {kind}\n")
    moved = {metric.name + suffix: suffix for suffix in OPENMETRICS_ONLY}
    later: dict[str, list[str]] = {}
    append = output.append
    for sample in metric.samples:  # the hot loop: ~2 500 samples a scrape, one f-string each
        labels = ""
        if sample.labels:  # rendered once per label dict: the netdev collector's series share theirs
            known = rendered.get(id(sample.labels))
            if known is None or known[0] is not sample.labels:  # the dict is held: its id is not reused
                known = rendered[id(sample.labels)] = (sample.labels, _labels(sample.labels))
            labels = known[1]
        name = names.get(sample.name) or names.setdefault(sample.name, escape_metric_name(sample.name))
        timestamp = "" if sample.timestamp is None else f" {int(float(sample.timestamp) * 1000):d}"
        line = f"{name}{labels} {_number(sample.value)}{timestamp}\n"
        suffix = moved.get(sample.name)
        if suffix is None:
            append(line)
        else:
            later.setdefault(suffix, []).append(line)
    for suffix, lines in sorted(later.items()):
        escaped = escape_metric_name(metric.name + suffix)
        output.append(f"# HELP {escaped} {documentation}\n# TYPE {escaped} gauge\n")
        output.extend(lines)


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
