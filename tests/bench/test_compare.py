"""Baseline comparison as a pure function, and its rules file (located errors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunet.bench.compare import (
    DEFAULT_RULES_YAML,
    FAILING,
    Rule,
    compare,
    compare_runs,
    load_rules,
    parse_rules,
)
from gpunet.bench.store import Measurement, save_run
from gpunet.errors import UsageError


def m(source: str, destination: str, value: float, *, metric: str = "throughput", plane: str = "compute",
      rail: int | None = None, status: str = "ok", reason: str | None = None) -> Measurement:
    return Measurement(source=source, destination=destination, plane=plane, metric=metric, value=value,
                       unit="Gb/s", expected=100.0, status=status, rail=rail, reason=reason)


DEFAULTS = load_rules(None)


def test_variance_and_verdicts_by_the_default_rules() -> None:
    baseline = [m("a", "b", 100), m("a", "c", 100), m("a", "d", 100), m("b", "c", 100), m("c", "d", 0)]
    current = [m("a", "b", 96), m("a", "c", 93), m("a", "d", 80), m("c", "d", 50), m("b", "d", 90)]
    rows = {(r.source, r.destination): r for r in compare(baseline, current, DEFAULTS)}
    assert rows["a", "b"].variance == pytest.approx(-0.04) and rows["a", "b"].verdict == "ok"
    assert rows["a", "c"].variance == pytest.approx(-0.07) and rows["a", "c"].verdict == "warn"
    assert rows["a", "d"].variance == pytest.approx(-0.20) and rows["a", "d"].verdict == "fail"
    assert (rows["b", "c"].baseline, rows["b", "c"].current, rows["b", "c"].verdict) == (100, None, "missing")
    assert (rows["b", "d"].baseline, rows["b", "d"].variance, rows["b", "d"].verdict) == (None, None, "new")
    assert (rows["c", "d"].variance, rows["c", "d"].verdict) == (None, "new")  # a failed (zero) baseline
    assert list(rows) == sorted(rows)


def test_inconclusive_is_shown_apart_and_missing_fails() -> None:
    saturated = "server c: runnable tasks waited for a CPU 97 % of the window (limit 50 %)"
    baseline = [m("a", "b", 100), m("a", "c", 100), m("a", "d", 100, status="inconclusive", reason=saturated),
                m("b", "c", 100), m("c", "d", 100)]
    current = [m("a", "b", 60, status="inconclusive", reason=saturated), m("a", "c", 98), m("a", "d", 60),
               m("c", "d", 99, status="inconclusive", reason=saturated), m("c", "d", 98, status="ok")]
    rows = {(r.source, r.destination): r for r in compare(baseline, current, DEFAULTS)}
    assert {k: r.verdict for k, r in rows.items()} == {("a", "b"): "inconclusive", ("a", "c"): "ok",
                                                      ("a", "d"): "inconclusive", ("b", "c"): "missing",
                                                      ("c", "d"): "ok"}
    assert rows["a", "b"].reason == f"current: {saturated}" and rows["a", "b"].variance == pytest.approx(-0.4)
    assert rows["a", "d"].reason == f"baseline: {saturated}"  # no evidence to regress from
    assert rows["c", "d"].current == 98 and rows["c", "d"].reason is None  # the conclusive repeat counts
    assert [r.verdict for r in rows.values() if r.verdict in FAILING] == ["missing"]


def test_latency_is_judged_upward_by_default() -> None:
    rows = compare([m("a", "b", 2.0, metric="latency")], [m("a", "b", 2.3, metric="latency")], DEFAULTS)
    assert rows[0].variance == pytest.approx(0.15) and rows[0].verdict == "warn"
    rows = compare([m("a", "b", 2.0, metric="latency_p99")], [m("a", "b", 1.0, metric="latency_p99")], DEFAULTS)
    assert rows[0].verdict == "ok"  # faster is never a regression
    rows = compare([m("a", "b", 2.0, metric="latency_p99")], [m("a", "b", 2.5, metric="latency_p99")], DEFAULTS)
    assert rows[0].verdict == "fail"


def test_pairs_match_on_plane_metric_and_rail_and_repeats_count_by_median() -> None:
    baseline = [m("a", "b", 100, rail=0), m("a", "b", 100, rail=1), m("a", "b", 100, plane="storage")]
    current = [m("a", "b", 100, rail=0), m("a", "b", 50, rail=1), m("a", "b", 99, plane="storage"),
               m("a", "b", 10, plane="storage"), m("a", "b", 98, plane="storage")]
    rows = compare(baseline, current, DEFAULTS)
    assert [(r.plane, r.rail, r.current, r.verdict) for r in rows] == [
        ("compute", 0, 100, "ok"), ("compute", 1, 50, "fail"), ("storage", None, 98, "ok")]


def test_rule_metrics_are_shell_patterns() -> None:
    rule = Rule(metric="bus*", fail_below=-0.1)
    assert rule.matches("busbw", "compute") and not rule.matches("algbw", "compute")
    assert Rule(metric="*", plane="storage", fail_below=-0.1).matches("x", "storage")
    assert not Rule(metric="*", plane="storage", fail_below=-0.1).matches("x", "compute")


def test_first_matching_rule_wins_and_planes_narrow_a_rule() -> None:
    rules = parse_rules("rules:\n  - {metric: throughput, plane: storage, warn_below: -0.3, fail_below: -0.5}\n"
                        "  - {metric: '*', fail_below: -0.01}\n")
    rows = compare([m("a", "b", 100, plane="storage"), m("a", "b", 100)],
                   [m("a", "b", 60, plane="storage"), m("a", "b", 98)], rules)
    assert [(r.plane, r.verdict) for r in rows] == [("compute", "fail"), ("storage", "warn")]
    only_latency = parse_rules("rules:\n  - {metric: latency, fail_above: 0.1}\n")
    assert compare([m("a", "b", 100)], [m("a", "b", 1)], only_latency)[0].verdict == "ok"  # no rule: ok


def test_rule_thresholds_are_strict_bounds() -> None:
    rule = Rule(metric="*", warn_below=-0.05, fail_below=-0.10)
    assert [rule.verdict(v) for v in (-0.05, -0.0501, -0.10, -0.1001, 0.5)] == ["ok", "warn", "warn", "fail", "ok"]


def test_the_default_rules_are_the_documented_yaml() -> None:
    assert load_rules(None) == parse_rules(DEFAULT_RULES_YAML)
    assert [r.metric for r in DEFAULTS.rules] == ["latency*", "*"]


@pytest.mark.parametrize(("text", "located"), [
    ("rules:\n  - metric: x\n    warn_below: five\n", "r.yaml:3:5: rules.0.warn_below: Input should be a valid number"),
    ("rules:\n  - metric: x\n    warn_bellow: -1\n", "r.yaml:3:5: rules.0.warn_bellow: unknown key"),
    ("rules:\n  - plane: compute\n    warn_below: -1\n", "r.yaml:2:5: rules.0.metric: Field required"),
    ("rules:\n  - metric: '*'\n    plane: comptue\n    warn_below: -1\n", "r.yaml:3:5: rules.0.plane: Input should be"),
    ("rules:\n  - metric: '*'\n    warn_below: 0.05\n", "r.yaml:3:5: rules.0.warn_below: Input should be less than"),
    ("rules:\n  - metric: '*'\n    fail_below: yes\n", "r.yaml:3:5: rules.0.fail_below: Input should be a valid"),
    ("rules:\n  - metric: '*'\n    fail_above: .nan\n", "r.yaml:3:5: rules.0.fail_above: Input should be a finite"),
    ("rules:\n  - metric: x\n", "r.yaml:2:5: rules.0: a rule needs at least one of"),
    ("rules:\n  - {metric: x, warn_below: -0.1, fail_below: 0}\n", "r.yaml:2:5: rules.0: fail_below must not be above"),
    ("rules: []\n", "r.yaml:1:1: rules: Tuple should have at least 1 item"),
    ("rules: [\n", "r.yaml:2:1: YAML syntax: expected the node content"),
    ("- metric: x\n", "r.yaml:1:1: a rules file is a mapping with a `rules:` list"),
    ("rules:\n  - metric: x\n    warn_below: -1\n    warn_below: -2\n", "r.yaml:4:5: rules.0.warn_below: key"),
])
def test_a_bad_rules_file_names_file_line_and_problem(text: str, located: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_rules(text, "r.yaml")
    assert str(error.value).startswith(located)
    assert "\n" not in str(error.value)  # one problem, one line (no echo of the list's own error)


def test_rules_are_read_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - metric: throughput\n    fail_below: -0.5\n")
    assert load_rules(path).rules == (Rule(metric="throughput", fail_below=-0.5),)
    with pytest.raises(UsageError, match=r"nothing\.yaml:1:1: cannot read: No such file"):
        load_rules(tmp_path / "nothing.yaml")


def test_compare_runs_reads_two_stored_runs(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    first = save_run(db, plan_hash="h", tool="iperf3", pattern="pair", arguments="", measurements=[m("a", "b", 10)])
    second = save_run(db, plan_hash="h", tool="iperf3", pattern="pair", arguments="", measurements=[m("a", "b", 8)])
    [row] = compare_runs(db, first, second)
    assert (row.baseline, row.current, row.variance, row.verdict) == (10, 8, pytest.approx(-0.2), "fail")
    with pytest.raises(UsageError, match="no bench run 99 in"):
        compare_runs(db, first, 99)


def test_the_readme_shows_the_default_rules() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    block = readme.split("Without `--rules` the default rules are:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    assert parse_rules(block) == load_rules(None)


def test_a_pair_that_failed_now_fails_whatever_its_baseline() -> None:
    failed = m("a", "b", 0).model_copy(update={"status": "failed"})
    rows = compare([m("a", "b", 100), m("c", "d", 0).model_copy(update={"status": "failed"})],
                   [failed, failed.model_copy(update={"source": "c", "destination": "d"})], DEFAULTS)
    assert [r.verdict for r in rows] == ["fail", "fail"]


def test_runs_of_different_tools_are_not_compared(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    iperf = save_run(db, plan_hash="p", tool="iperf3", pattern="all-pairs", arguments="", measurements=[m("a", "b", 1)])
    nccl = save_run(db, plan_hash="p", tool="all_reduce_perf", pattern="job", arguments="",
                    measurements=[m("a[1-2]", "all_reduce_perf", 100, metric="busbw")])
    with pytest.raises(UsageError, match="iperf3, run 2 with all_reduce_perf"):
        compare_runs(db, iperf, nccl)
