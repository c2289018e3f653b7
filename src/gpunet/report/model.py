"""What the report says about the Plan's cables and devices: each result family's findings mapped
onto the Plan (Issue), each cable's state, and the Plan indexed by the names results use."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

from gpunet.model.base import Frozen
from gpunet.model.plan import Plan

if TYPE_CHECKING:
    from gpunet.fabric.cabling import CableVerdict

CableState = Literal["ok", "missing", "miswired", "suspect", "degraded", "down", "unchecked"]
# The worst state a result shows wins: a cable that a cabling check found in place (ok) and that
# counters name as the source of errors (suspect) is drawn suspect.
STATE_RANK: dict[CableState, int] = {"unchecked": 0, "ok": 1, "suspect": 2, "degraded": 3, "miswired": 4,
                                     "missing": 5, "down": 6}
FAULTS: tuple[CableState, ...] = ("down", "missing", "miswired", "degraded", "suspect")
Verdict = Literal["pass", "warn", "fail", "info", "not given"]
Severity = Literal["fail", "warn"]


class Issue(Frozen):
    """One finding of one result family, placed on the Plan: on cables (their index in
    plan.links), else on devices (nodes or switches), else on nothing the drawing has."""

    family: str
    severity: Severity
    state: CableState | None = None  # what it makes its cables look like; None: not a cable fault
    title: str  # "miswired", "GN-LINK-01 link up with carrier"
    where: str  # the subject as the result names it
    detail: str = ""
    fix: str = ""
    cables: tuple[int, ...] = ()
    devices: tuple[str, ...] = ()
    plane: str | None = None


class Judgement(Frozen):
    """A family's line in the verdict strip."""

    verdict: Verdict
    summary: str


@dataclass
class PlanIndex:
    """The Plan's cables by the names results give them, built once per report."""

    plan: Plan
    by_end: dict[tuple[str, str], int] = field(default_factory=dict)  # ("gpu001", "ib0") -> link index
    switches: set[str] = field(default_factory=set)
    hca_of: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, mlx5_3) -> ib3
    _resolved: dict[int, tuple[object, list[int | None]]] = field(default_factory=dict)  # keeps each list alive

    @classmethod
    def of(cls, plan: Plan) -> PlanIndex:
        index = cls(plan=plan, switches={s.name for s in plan.switches})
        for i, link in enumerate(plan.links):
            index.by_end[link.a.device, link.a.port] = index.by_end[link.b.device, link.b.port] = i
        index.hca_of = {(n.name, i.hca): i.name for n in plan.nodes for i in n.interfaces if i.hca}
        return index

    def knows(self, device: str) -> bool:
        return device in self.switches or self.plan.node(device) is not None

    @cached_property
    def digest(self) -> str:
        return plan_digest(self.plan)

    def end(self, device: str, port: str) -> int | None:
        return self.by_end.get((device, port))

    def cables_of(self, verdicts: Sequence[CableVerdict]) -> list[int | None]:
        """Each verdict's cable index (None: not a cable of the plan); kept for the same list, which
        the loader and the drawing both ask about (370 000 cables at 12 500 nodes)."""
        key = id(verdicts)
        if key not in self._resolved:
            by_end = self.by_end
            found: list[int | None] = []
            for v in verdicts:
                a_device, _, a_port = v.a.partition(":")
                b_device, _, b_port = v.b.partition(":")
                i = by_end.get((a_device, a_port))
                found.append(i if i is not None and by_end.get((b_device, b_port)) == i else None)
            self._resolved[key] = (verdicts, found)
        return self._resolved[key][1]

    def cable(self, name: str) -> int | None:
        """A cable by both ends ("a b", either order, as cabling.csv and localize name it) or by one end."""
        a, _, b = name.partition(" ")
        found = self.by_end.get(_end(a))
        return found if not b or (found is not None and self.by_end.get(_end(b)) == found) else None


def _end(text: str) -> tuple[str, str]:
    device, _, port = text.partition(":")
    return device, port


def cable_title(plan: Plan, index: int) -> str:
    """A cable as cabling.csv names it: plane, tier, both ends, speed."""
    link = plan.links[index]
    return (f"{link.plane} {link.tier}: {link.a.device}:{link.a.port} — {link.b.device}:{link.b.port} "
            f"({link.gbps} Gb/s)")


def cable_states(plan: Plan, checked: Iterable[int], issues: Iterable[Issue]) -> dict[int, CableState]:
    """Each cable's state where a result says something: ok where a check looked and found it in
    place, the worst fault any issue names; cables no result covers are absent (unchecked)."""
    states: dict[int, CableState] = dict.fromkeys(checked, "ok")
    for issue in issues:
        if issue.state is None:
            continue
        for i in issue.cables:
            if STATE_RANK[issue.state] > STATE_RANK[states.get(i, "unchecked")]:
                states[i] = issue.state
    return states


def plan_digest(plan: Plan) -> str:
    """The plan's hash as `bench run` records it (lab/build.py plan_digest: the same formula), so a
    stored run can be matched with the plan it measured."""
    return hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:16]
