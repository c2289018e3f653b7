"""The result families a report can be given, as a plain registry: a new family (the simulator's,
the switch checks') plugs in with its title, how its verdict is judged, its findings placed on the
Plan, its section and its data."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from gpunet.fabric.cabling import CablingReport
from gpunet.report import issues as found
from gpunet.report import sections
from gpunet.report.model import Issue, Judgement, PlanIndex


@dataclass(frozen=True)
class Family:
    title: str
    what: str  # "doctor results": what a report without it was made without
    how: str  # how to give it (HTML: static text of this module)
    judge: Callable[[Any], Judgement]
    issues: Callable[[Any, PlanIndex], list[Issue]]
    section: Callable[[Any], str]
    checked: Callable[[Any, PlanIndex], Iterable[int]] = found.nothing_checked
    data: Callable[[Any], object] = lambda result: result.model_dump(mode="json") if isinstance(result, BaseModel) \
        else result


def cabling_data(report: CablingReport) -> object:
    """The findings and every cable not ok; the ok ones counted (370 000 of them at 12 500 nodes)."""
    return report.model_dump(mode="json", exclude={"cables"}) | {
        "counts": report.counts, "cables": [c.model_dump(mode="json") for c in report.cables if c.verdict != "ok"]}


FAMILIES: dict[str, Family] = {
    "doctor": Family(
        "Doctor: nodes against the plan", "doctor results",
        "Run <code>gpunet doctor --plan plan.json --json &gt; doctor.json</code> on a node (or "
        "<code>gpunet doctor --fleet NODES --plan plan.json --json</code>) and give <code>--doctor doctor.json</code>.",
        sections.judge_doctor, found.doctor_issues, sections.doctor_section),
    "cabling": Family(
        "Cabling: every cable against the plan", "a cabling check",
        "Run <code>gpunet cabling check --plan plan.json ... --json &gt; cabling.json</code> and give "
        "<code>--cabling cabling.json</code>.",
        sections.judge_cabling, found.cabling_issues, sections.cabling_section, found.cabling_checked, cabling_data),
    "localize": Family(
        "Localize: suspect cables", "a localization",
        "Run <code>gpunet localize ... --json &gt; localize.json</code> and give "
        "<code>--localize localize.json</code>.",
        sections.judge_localize, found.localize_issues, sections.localize_section),
    "switch": Family(
        "Switch checks", "switch checks",
        "Give the switch checks' findings (doctor's finding shape, each with its <code>switch</code>) with "
        "<code>--switch switch.json</code>.",
        sections.judge_switch, found.switch_issues, sections.switch_section),
    "bench": Family(
        "Bench: measured against the plan", "a bench run",
        "Run <code>gpunet bench run ...</code> and give its database with <code>--bench-db DB</code> (the latest "
        "run, or <code>--run N</code>).",
        sections.judge_bench, found.bench_issues, sections.bench_section),
    "sim": Family(
        "Simulated and measured job times", "simulated job times",
        "Give the simulator's job times with <code>--sim sim.json</code>.",
        sections.judge_sim, found.sim_issues, sections.sim_section),
    "compare": Family(
        "Compare: designs side by side", "a comparison of designs",
        "Run <code>gpunet compare A.yaml B.yaml --json &gt; compare.json</code> and give "
        "<code>--compare compare.json</code>.",
        sections.judge_compare, found.no_issues, sections.compare_section),
}
