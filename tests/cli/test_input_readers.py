"""Issue 22 F3, F4, F6: every reader of a file or an answer, given /dev/zero (an endless answer), a
FIFO, 100 MB, a 5 000-digit number, NUL bytes, 10 000-deep nesting and wrong JSON types, exits 2
with one line, within 2 s of CPU and 200 MB of Python memory; and Prometheus answers of any shape
are a ParseError or a reading, never another exception. The cases are benchmarks/input_limits.py's,
which prints each one's wall time and peak RSS in a fresh process."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from benchmarks.input_limits import prometheus_stand_in, reader_cases
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.errors import ParseError
from gpunet.fabric.prometheus import parse_prometheus_vector

CPU_S, PYTHON_MB = 2.0, 200.0


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[str]]]:
    with prometheus_stand_in() as url:
        yield reader_cases(tmp_path_factory.mktemp("hostile"), url)


def test_every_reader_refuses_every_hostile_input_in_one_line(cases: dict[str, list[str]]) -> None:
    wrong = {}
    for name, argv in cases.items():
        started = time.process_time()  # CPU, not wall: a loaded host slows the clock, not the work
        result = CliRunner().invoke(app, argv)
        spent = time.process_time() - started
        tracemalloc.start()  # again, for memory alone: tracing slows the run several times over
        CliRunner().invoke(app, argv)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        fine = result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error") and "Traceback" not in \
            result.output and spent < CPU_S and peak < PYTHON_MB
        if not fine:
            wrong[name] = (result.exit_code, lines[:3], round(spent, 2), round(peak), repr(result.exception))
    assert len(cases) >= 60 and wrong == {}, wrong


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=12)
PATHS = [(), ("status",), ("data",), ("data", "resultType"), ("data", "result"), ("data", "result", 0),
         ("data", "result", 0, "metric"), ("data", "result", 0, "metric", "instance"), ("data", "result", 0, "value"),
         ("data", "result", 0, "value", 0), ("data", "result", 0, "value", 1)]


def _answer() -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "ifInErrors", "instance": "leaf1:9116", "ifName": "swp1"}, "value": [100.0, "5"]}]}}


def _put(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    document[path[0]] = _put(document[path[0]], path[1:], value)
    return document


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATHS), JSON, st.sampled_from([100.0, 1e12, -1e12]))
def test_a_prometheus_answer_of_any_shape_is_read_or_refused(path: tuple[Any, ...], value: Any, now: float) -> None:
    """Any value of any type anywhere in an answer: a reading (counts, and stale series said) or a
    ParseError naming where; never KeyError, TypeError, ValueError or a verdict from a bad sample."""
    text = json.dumps(_put(_answer(), path, value))
    try:
        ports, notes = parse_prometheus_vector(text, now)
    except ParseError:
        return
    assert all(isinstance(c, int) and c >= 0 for p in ports for c in p.counters.values())
    assert now == 100.0 or not ports or notes == []  # a sample far from now is stale, never counted


@pytest.mark.parametrize(("stamp", "said"), [("NaN", "not a time"), ("+Inf", "not a time"), ("-Inf", "not a time"),
                                             (100.0 + 3600, "in the future"), (100.0 - 3600, "older than")])
def test_nan_infinite_and_future_times_are_stale_and_said(stamp: object, said: str) -> None:
    answer = _put(_answer(), ("data", "result", 0, "value", 0), stamp)
    ports, notes = parse_prometheus_vector(json.dumps(answer), 100.0)
    assert ports == () and len(notes) == 1 and "leaf1 swp1" in notes[0] and said in notes[0]


def test_the_cases_cover_every_reader(cases: dict[str, list[str]]) -> None:
    readers = {name.split(": ")[0] for name in cases}
    assert readers == {"--ibnetdiscover", "--ibqueryerrors", "--before", "spec", "--catalog", "bench --db",
                       "--lldp-dir", "plan.json", "--prometheus"}
    assert Path(cases["--lldp-dir: FIFO"][-1]).is_dir()
