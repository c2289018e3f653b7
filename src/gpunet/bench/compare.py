"""Two runs side by side: each pair's variance against the baseline, (current − baseline) /
baseline, judged by rules read from YAML (or the default rules below)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

from pydantic import Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from gpunet.bench.store import Measurement, load_run
from gpunet.errors import SpecError, SpecProblem, UsageError
from gpunet.files.yamldoc import read_document
from gpunet.model.base import Frozen
from gpunet.model.spec import PlaneName
from gpunet.spec.loader import parse_yaml_document, real_errors

Verdict = Literal["ok", "warn", "fail", "new", "missing", "inconclusive", "congested"]
# A pair gone from the current run fails like a regression; one slower because the fabric paused it
# (congested: its reason names the pause or CNP counters) is one too, told apart from a slow link.
FAILING: tuple[Verdict, ...] = ("fail", "missing", "congested")
Key = tuple[str, str, str, str, int | None, int | None]  # source, destination, plane, metric, rail, to_rail

# Used when no rules file is given. First matching rule wins, so the specific come first:
# latency metrics (latency, latency_p99 ...: lower is better) warn 10 % above the baseline and
# fail 20 % above; every other metric (throughput, bus bandwidth: higher is better) warns 5 %
# below and fails 10 % below.
DEFAULT_RULES_YAML = """\
rules:
  - metric: latency*
    warn_above: 0.10
    fail_above: 0.20
  - metric: "*"
    warn_below: -0.05
    fail_below: -0.10
"""
RULES_NOT_A_MAPPING = ("a rules file is a mapping with a `rules:` list (see `gpunet bench compare --help`)", "")
RULE_HINTS = {
    "extra_forbidden": "keys of a rule: metric, plane, warn_below, fail_below, warn_above, fail_above",
    "missing": "add this key",
    "too_short": "add at least one rule",
    "float_parsing": "write a variance as a fraction, e.g. -0.05 for 5 % below the baseline",
    "float_type": "write a variance as a fraction, e.g. -0.05 for 5 % below the baseline",
    "less_than_equal": "a *_below threshold is a variance at or under 0: -0.05 is 5 % below the baseline",
    "greater_than_equal": "an *_above threshold is a variance at or over 0: 0.10 is 10 % above the baseline",
    "finite_number": "write a variance as a fraction, e.g. -0.05 for 5 % below the baseline",
    "literal_error": "one of the plan's planes: management, compute, storage, oob",
}


# Variances are fractions: below-thresholds are <= 0, above-thresholds >= 0; strict, so `yes`
# or "10" (a percentage) are errors, not 1.0 and a rule that always fails.
Below = Annotated[float, Field(strict=True, allow_inf_nan=False, le=0)]
Above = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]


class Rule(Frozen):
    """Thresholds on the variance of the metrics matching a shell pattern (`throughput`,
    `latency*`, `*`), on one plane or (no plane) all."""

    metric: str
    plane: PlaneName | None = None  # a typo is an error, not a rule that silently matches nothing
    warn_below: Below | None = None
    fail_below: Below | None = None
    warn_above: Above | None = None
    fail_above: Above | None = None

    @model_validator(mode="after")
    def _thresholds(self) -> Rule:
        if (self.warn_below, self.fail_below, self.warn_above, self.fail_above) == (None,) * 4:
            raise ValueError("a rule needs at least one of warn_below, fail_below, warn_above, fail_above")
        if _out_of_order(self.fail_below, self.warn_below):
            raise ValueError("fail_below must not be above warn_below (both are variances, e.g. -0.10 < -0.05)")
        if _out_of_order(self.warn_above, self.fail_above):
            raise ValueError("fail_above must not be below warn_above (both are variances, e.g. 0.20 > 0.10)")
        return self

    def matches(self, metric: str, plane: str) -> bool:
        return fnmatchcase(metric, self.metric) and self.plane in (None, plane)

    def verdict(self, variance: float) -> Verdict:
        if _below(variance, self.fail_below) or _above(variance, self.fail_above):
            return "fail"
        if _below(variance, self.warn_below) or _above(variance, self.warn_above):
            return "warn"
        return "ok"


class Rules(Frozen):
    rules: tuple[Rule, ...] = Field(min_length=1)

    def verdict(self, metric: str, plane: str, variance: float) -> Verdict:
        """By the first rule matching the metric and plane; ok when none does."""
        rule = next((r for r in self.rules if r.matches(metric, plane)), None)
        return rule.verdict(variance) if rule else "ok"


class Comparison(Frozen):
    source: str
    destination: str
    plane: str
    metric: str
    rail: int | None = None
    to_rail: int | None = None  # the destination's rail, where a pair crosses rails
    unit: str
    baseline: float | None
    current: float | None
    variance: float | None  # (current − baseline) / baseline; None without both (or a zero baseline)
    verdict: Verdict
    reason: str | None = None  # inconclusive: which run had a saturated end; congested: the pause/CNP counters


class _Side(NamedTuple):
    """One run's measurements of one key, as compared."""

    value: float  # the median of the conclusive ones (of all, when none is)
    unit: str
    failed: bool  # every conclusive one failed
    inconclusive: str | None  # none conclusive: the reason of the first
    congested: str | None = None  # every conclusive one congested: the reason of the first


def _out_of_order(low: float | None, high: float | None) -> bool:
    return low is not None and high is not None and low > high


def _below(variance: float, threshold: float | None) -> bool:
    return threshold is not None and variance < threshold


def _above(variance: float, threshold: float | None) -> bool:
    return threshold is not None and variance > threshold


def compare(baseline: Iterable[Measurement], current: Iterable[Measurement], rules: Rules) -> list[Comparison]:
    """Every (source, destination, plane, metric, rail, to_rail) of either run: both values, the variance
    and its verdict; `new` with no (or a zero, i.e. failed) baseline, `missing` when the current
    run lacks it, `inconclusive` when either side has only measurements taken with a saturated end
    (no evidence about the link). Repeated measurements of one key count by their median."""
    before, after = _by_key(baseline), _by_key(current)
    keys = sorted(before.keys() | after.keys(), key=_sort_key)
    return [_compare_one(key, before.get(key), after.get(key), rules) for key in keys]


def _by_key(results: Iterable[Measurement]) -> dict[Key, _Side]:
    grouped: dict[Key, list[Measurement]] = {}
    for m in results:
        grouped.setdefault((m.source, m.destination, m.plane, m.metric, m.rail, m.to_rail), []).append(m)
    return {key: _side(ms) for key, ms in grouped.items()}


def _side(ms: list[Measurement]) -> _Side:
    judged = [m for m in ms if m.status != "inconclusive"]
    inconclusive = None if judged else (ms[0].reason or "an end was saturated")
    judged = judged or ms
    congested = judged[0].reason if all(m.status == "congested" for m in judged) else None
    return _Side(statistics.median(m.value for m in judged), ms[0].unit, all(m.status == "failed" for m in judged),
                 inconclusive, congested)


def _sort_key(key: Key) -> tuple[str, str, str, str, int, int]:
    return (*key[:4], -1 if key[4] is None else key[4], -1 if key[5] is None else key[5])


def _compare_one(key: Key, before: _Side | None, after: _Side | None, rules: Rules) -> Comparison:
    """A measurement that failed now fails, whatever the baseline was (it measured nothing)."""
    source, destination, plane, metric, rail, to_rail = key
    unit = (after or before or _Side(0.0, "", False, None)).unit
    old, new = (before.value if before else None), (after.value if after else None)
    variance = (new - old) / old if old and new is not None else None
    reason = _inconclusive(before, after)
    verdict: Verdict = ("missing" if after is None else "fail" if after.failed else "inconclusive" if reason
                        else "new" if variance is None else rules.verdict(metric, plane, variance))
    if verdict in ("warn", "fail", "new") and after is not None and after.congested:
        verdict, reason = "congested", f"current: {after.congested}"
    return Comparison(source=source, destination=destination, plane=plane, metric=metric, rail=rail, to_rail=to_rail,
                      unit=unit,
                      baseline=old, current=new, variance=variance, verdict=verdict,
                      reason=reason if verdict in ("inconclusive", "congested") else None)


def _inconclusive(before: _Side | None, after: _Side | None) -> str | None:
    if after is not None and after.inconclusive:
        return f"current: {after.inconclusive}"
    if before is not None and before.inconclusive:
        return f"baseline: {before.inconclusive}"
    return None


def compare_runs(db: Path, baseline: int, current: int, rules_file: Path | None = None) -> list[Comparison]:
    """Two stored runs compared by the rules file (the default rules without one)."""
    rules = load_rules(rules_file)
    (old_info, old), (new_info, new) = load_run(db, baseline), load_run(db, current)
    if old_info.tool != new_info.tool:
        raise UsageError(f"run {baseline} measured with {old_info.tool}, run {current} with {new_info.tool}: "
                         "compare runs of one tool")
    return compare(old, new, rules)


def load_rules(path: Path | None) -> Rules:
    """The rules of a YAML file, or DEFAULT_RULES_YAML; a bad file is a UsageError naming
    file:line:column and the problem."""
    if path is None:
        return parse_rules(DEFAULT_RULES_YAML, "<default rules>")
    try:
        text = read_document(path, "rules file")
    except SpecError as exc:
        raise UsageError("\n".join(map(str, exc.problems))) from None
    return parse_rules(text, str(path))


def parse_rules(text: str, file: str = "<rules>") -> Rules:
    """Rules from YAML text, read by the spec's own loader: every problem located at file:line:col."""
    try:
        data, source = parse_yaml_document(text, file, RULES_NOT_A_MAPPING)
    except SpecError as exc:
        raise UsageError("\n".join(map(str, exc.problems))) from None
    try:
        return Rules.model_validate(data)
    except ValidationError as exc:
        problems = [source.locate(_problem(e)) for e in real_errors(exc.errors())]
        raise UsageError("\n".join(map(str, problems))) from None


def _problem(error: ErrorDetails) -> SpecProblem:
    message = "unknown key" if error["type"] == "extra_forbidden" else error["msg"].removeprefix("Value error, ")
    return SpecProblem(message, tuple(error["loc"]), RULE_HINTS.get(error["type"], "see the README's bench compare "
                                                                                 "section"))
