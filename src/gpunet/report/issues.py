"""Each result family's findings as Issues on the Plan: which cables or devices they are about and
what state they draw (a doctor link failure draws the node's cable down, a cabling finding its
kind, a named localize suspect its cable suspect)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpunet.checks.base import Finding
from gpunet.fabric.cabling import CablingReport
from gpunet.fleet.doctor import FoldedFinding
from gpunet.localize.report import LocalizeReport
from gpunet.model.nodeset import NodeSetError, parse_nodeset
from gpunet.report.inputs import BenchResult, DoctorResults, SimResults, SwitchResults
from gpunet.report.model import CableState, Issue, PlanIndex

KIND_STATE: dict[str, CableState] = {"missing": "missing", "miswired": "miswired", "swapped": "miswired",
                                     "speed": "degraded", "width": "degraded"}
# What a failing node check says about the cable of the interface it names.
CHECK_STATE: dict[str, CableState] = {"GN-LINK-01": "down", "GN-LINK-02": "degraded", "GN-IB-01": "down",
                                      "GN-IB-02": "suspect", "GN-CNT-01": "suspect"}
TRAILING_NUMBER = re.compile(r"(\d+)$")  # swp33, Ethernet33, Eth1/33 -> 33, as the cabling check reads ports
SLOWER = 1.25  # a job measured this much slower than simulated is worth a look


def cabling_issues(report: CablingReport, index: PlanIndex) -> list[Issue]:
    issues = []
    for f in report.findings:
        cables = tuple(i for c in f.cables if (i := index.cable(c)) is not None)
        issues.append(Issue(family="cabling", severity="fail", state=KIND_STATE.get(f.kind), title=f.kind,
                            where=", ".join(f.cables) or "-", detail=f.observed, fix=f.fix, cables=cables,
                            plane=f.plane))
    return issues


def cabling_checked(report: CablingReport, index: PlanIndex) -> list[int]:
    return [i for c, i in zip(report.cables, index.cables_of(report.cables), strict=True)
            if i is not None and c.verdict == "ok"]


def localize_issues(report: LocalizeReport, index: PlanIndex) -> list[Issue]:
    """Named suspects draw their cable suspect; runner-ups are listed and linked, not drawn."""
    return [Issue(family="localize", severity="fail" if s.named else "warn", state="suspect" if s.named else None,
                  title=f"suspect {s.confidence:.0%} ({s.source})" if s.named else f"runner-up {s.confidence:.0%}",
                  where=s.cable, detail="; ".join(s.evidence), fix=s.fix,
                  cables=tuple(i for i in [index.cable(s.cable)] if i is not None), plane=s.plane)
            for s in report.suspects]


def doctor_issues(results: DoctorResults, index: PlanIndex) -> list[Issue]:
    issues = [_node_issue(f, node.node, index) for node in results.nodes for f in node.findings
              if f.verdict in ("fail", "warn")]
    for fleet in results.fleets:
        issues += [_folded_issue(f, index) for f in fleet.findings if f.verdict in ("fail", "warn")]
        issues += [Issue(family="doctor", severity="fail", title="no findings came back", where=nodes, detail=why,
                         devices=tuple(_names(nodes))) for nodes, why in fleet.unreachable.items()]
    return issues


def _node_issue(f: Finding, node: str, index: PlanIndex) -> Issue:
    cable = _interface_cable(index, node, f.subject)
    detail = "; ".join(x for x in (f"observed {f.observed}" if f.observed else "",
                                   f"expected {f.expected}" if f.expected else "", f.evidence) if x)
    return Issue(family="doctor", severity="fail" if f.verdict == "fail" else "warn",
                 state=_check_state(f.check, f.verdict, f.observed) if cable is not None else None,
                 title=f"{f.check} {f.title}".strip(), where=f"{node} {f.subject}".strip(), detail=detail, fix=f.fix,
                 cables=() if cable is None else (cable,), devices=(node,), plane=_plane(index, node, f.subject))


def _plane(index: PlanIndex, node: str, subject: str) -> str | None:
    """The plane of the interface (or HCA) a node finding names, where it names one."""
    found = index.plan.node(node)
    name = subject.split("/", maxsplit=1)[0]
    return next((i.plane for i in found.interfaces if name in (i.name, i.hca, i.layer3)), None) if found else None


def _folded_issue(f: FoldedFinding, index: PlanIndex) -> Issue:
    nodes = _names(f.nodes)
    cables = tuple(c for n in nodes if (c := _interface_cable(index, n, f.subject)) is not None)
    more = f" (+{f.variants - 1} other values)" if f.variants > 1 else ""
    return Issue(family="doctor", severity="fail" if f.verdict == "fail" else "warn",
                 state=_check_state(f.check, f.verdict, f.observed) if cables else None, title=f.check,
                 where=f"{f.nodes} {f.subject}".strip(), detail=f"observed {f.observed}{more}; expected {f.expected}",
                 fix=f.fix, cables=cables, devices=tuple(nodes),
                 plane=_plane(index, nodes[0], f.subject) if nodes else None)


def _names(nodeset: str) -> list[str]:
    try:
        return list(parse_nodeset(nodeset))
    except NodeSetError:
        return []


def _check_state(check: str, verdict: str, observed: str) -> CableState | None:
    if verdict != "fail":
        return None
    if check == "GN-IB-01" and observed.upper().startswith("ACTIVE"):
        return "degraded"  # active, below its rate
    return CHECK_STATE.get(check)


def _interface_cable(index: PlanIndex, node: str, subject: str) -> int | None:
    """The cable of the interface a node finding names: `ib3`, or an HCA port `mlx5_3/1`."""
    found = index.end(node, subject)
    if found is None:
        interface = index.hca_of.get((node, subject.split("/", maxsplit=1)[0]))
        found = index.end(node, interface) if interface else None
    return found


def switch_issues(results: SwitchResults, index: PlanIndex) -> list[Issue]:
    """A failing switch finding on a port draws that port's cable: down for a link check, else
    suspect (something is wrong at that end, the check says what)."""
    issues = []
    for f in results.findings:
        if f.verdict not in ("fail", "warn"):
            continue
        port = TRAILING_NUMBER.search(f.subject)
        cable = index.end(f.switch, port[1]) if port else None
        state: CableState | None = ("down" if f.area == "link" else "suspect") if f.verdict == "fail" else None
        issues.append(Issue(family="switch", severity=f.verdict, state=state if cable is not None else None,
                            title=f"{f.check} {f.title}".strip(), where=f"{f.switch} {f.subject}".strip(),
                            detail="; ".join(x for x in (f.observed, f.expected and f"expected {f.expected}",
                                                         f.evidence) if x),
                            fix=f.fix, cables=() if cable is None else (cable,), devices=(f.switch,)))
    return issues


def bench_issues(result: BenchResult, index: PlanIndex) -> list[Issue]:
    """Low and failed pairs (inconclusive ones are listed apart, never as findings)."""
    del index
    return [Issue(family="bench", severity="fail", title=m.status,
                  where=f"{m.source} → {m.destination}" + (f" rail {m.rail}" if m.rail is not None else ""),
                  detail=f"{m.value:g} {m.unit}" + (f" of {m.expected:g} expected" if m.expected else "")
                  + (f"; {m.reason}" if m.reason else ""), plane=m.plane)
            for m in result.worst if m.status in ("low", "failed")]


def sim_issues(result: SimResults, index: PlanIndex) -> list[Issue]:
    del index
    return [Issue(family="sim", severity="warn", title=f"{job.measured_s / job.simulated_s:.2f}x the simulated time",
                  where=job.name,
                  detail=f"simulated {job.simulated_s:g} s, measured {job.measured_s:g} s on {job.nodes}")
            for job in result.jobs if job.measured_s is not None and job.simulated_s > 0
            and job.measured_s > SLOWER * job.simulated_s]


def no_issues(result: object, index: PlanIndex) -> list[Issue]:
    del result, index
    return []


def nothing_checked(result: object, index: PlanIndex) -> Iterable[int]:
    del result, index
    return ()
