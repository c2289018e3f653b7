"""Each result family's verdict line and section: what it found, in tables, with links to where
the drawing shows it."""

from __future__ import annotations

from collections import Counter
from html import escape

from gpunet.fabric.cabling import CablingReport
from gpunet.localize.report import LocalizeReport
from gpunet.report.heatsvg import heat_legend, heatmap_svg
from gpunet.report.inputs import BenchResult, CompareView, DoctorResults, SimResults, SwitchResults
from gpunet.report.issues import SLOWER
from gpunet.report.markup import Raw, code, para, table
from gpunet.report.model import Judgement

NOT_FINDINGS = ("ok", "unchecked", "unknown")


def judge_doctor(r: DoctorResults) -> Judgement:
    verdicts = Counter[str](f.verdict for n in r.nodes for f in n.findings)
    verdicts.update(f.verdict for fleet in r.fleets for f in fleet.findings)
    unreachable = sum(len(fleet.unreachable) for fleet in r.fleets)
    nodes = len(r.nodes) + sum(fleet.nodes for fleet in r.fleets)
    verdict = "fail" if verdicts["fail"] or unreachable else "warn" if verdicts["warn"] else "pass"
    more = f", {unreachable} group(s) without findings" if unreachable else ""
    return Judgement(verdict=verdict, summary=f"{nodes} node(s): {verdicts['fail']} failing, "
                                              f"{verdicts['warn']} warning(s){more}")


def doctor_section(r: DoctorResults) -> str:
    parts = []
    for node in r.nodes:
        shown = [f for f in node.findings if f.verdict in ("fail", "warn")]
        counts = Counter(f.verdict for f in node.findings)
        parts.append(f"<h3>{code(node.node)} · " + " · ".join(f"{n} {v}" for v, n in counts.items()) + "</h3>")
        parts.append(table(("verdict", "check", "subject", "observed", "expected", "fix"),
                           [(f.verdict, f.check, f.subject, f.observed or f.evidence, f.expected, f.fix)
                            for f in shown]) if shown else para("every check passed or skipped"))
        parts += [para(f"could not read: {p}", "note") for p in node.probe_problems]
    for fleet in r.fleets:
        folded = [f for f in fleet.findings if f.verdict in ("fail", "warn")]
        parts.append(f"<h3>fleet of {fleet.nodes} nodes</h3>")
        parts.append(table(("verdict", "check", "subject", "nodes", "observed", "fix"),
                           [(f.verdict, f.check, f.subject, f.nodes, f.observed, f.fix) for f in folded]))
        parts += [para(f"no findings from {nodes}: {why}", "note") for nodes, why in fleet.unreachable.items()]
    return "\n".join(parts)


def judge_cabling(r: CablingReport) -> Judgement:
    counts = Counter(c.verdict for c in r.cables)
    unjudged = counts["unchecked"] + counts["unknown"]
    verdict = "fail" if r.findings else "warn" if unjudged else "pass"
    return Judgement(verdict=verdict, summary=f"{len(r.cables):,} cables from {r.source}: {counts['ok']:,} ok, "
                                              f"{len(r.findings)} finding(s), {unjudged:,} not judged")


def cabling_section(r: CablingReport) -> str:
    counts = Counter[tuple[str, str]]((c.plane, c.verdict) for c in r.cables)
    rows = []
    for plane in r.planes:
        total = sum(n for (p, _), n in counts.items() if p == plane)
        bad = total - sum(counts[plane, v] for v in NOT_FINDINGS)
        rows.append((plane, total, counts[plane, "ok"], bad, counts[plane, "unchecked"], counts[plane, "unknown"]))
    parts = [para(f"source: {r.source}"),
             table(("plane", "cables", "ok", "findings", "unchecked", "unknown"), rows, numeric=(1, 2, 3, 4, 5))]
    if r.findings:
        parts.append(table(("finding", "cables", "seen", "fix"),
                           [(f.kind, ", ".join(f.cables) or "-", f.observed, f.fix) for f in r.findings]))
    return "\n".join(parts + [para(f"note: {n}", "note") for n in r.notes])


def judge_localize(r: LocalizeReport) -> Judgement:
    named = r.named
    if named:
        return Judgement(verdict="fail", summary=f"{len(named)} suspect cable(s): {named[0].cable}"
                                                 + (" …" if len(named) > 1 else ""))
    return Judgement(verdict="pass", summary="no suspect: no cable explains any loss or error")


def localize_section(r: LocalizeReport) -> str:
    parts = []
    if r.planes:
        parts.append(table(("plane", "flows", "paths learned", "packets", "lost", "cables covered"),
                           [(p.plane, p.flows, p.learned, p.packets, p.lost, f"{p.covered}/{p.cables}")
                            for p in r.planes], numeric=(1, 2, 3, 4)))
    parts.append(table(("#", "cable", "confidence", "evidence", "fix"),
                       [(f"{n}" if s.named else f"{n}?", s.cable.replace(" ", " ↔ "),
                         f"{s.confidence:.0%} ({s.source})", Raw("<br>".join(escape(e) for e in s.evidence)), s.fix)
                        for n, s in enumerate(r.suspects, 1)]) if r.suspects else
                 para("no suspect: no cable explains any loss or error"))
    return "\n".join(parts + [para(f"note: {n}", "note") for n in r.notes])


def judge_switch(r: SwitchResults) -> Judgement:
    verdicts = Counter(f.verdict for f in r.findings)
    switches = len({f.switch for f in r.findings})
    verdict = "fail" if verdicts["fail"] else "warn" if verdicts["warn"] else "pass"
    return Judgement(verdict=verdict, summary=f"{switches} switch(es): {verdicts['fail']} failing, "
                                              f"{verdicts['warn']} warning(s)")


def switch_section(r: SwitchResults) -> str:
    shown = [f for f in r.findings if f.verdict in ("fail", "warn")]
    passed = len(r.findings) - len(shown)
    return table(("verdict", "switch", "check", "subject", "observed", "expected", "fix"),
                 [(f.verdict, f.switch, f.check, f.subject, f.observed or f.evidence, f.expected, f.fix)
                  for f in shown]) + para(f"{passed} finding(s) passed or skipped")


def judge_bench(r: BenchResult) -> Judgement:
    flagged = r.counts.get("low", 0) + r.counts.get("failed", 0)
    unsure = r.counts.get("inconclusive", 0)
    verdict = "fail" if flagged else "warn" if unsure else "pass"
    total = sum(r.counts.values())
    return Judgement(verdict=verdict, summary=f"run {r.run.id} ({r.run.tool}, {r.run.pattern}): {total:,} "
                                              f"measurements, {flagged:,} low or failed, {unsure:,} inconclusive")


def bench_section(r: BenchResult) -> str:
    counts = ", ".join(f"{n:,} {s}" for s, n in sorted(r.counts.items()))
    parts = [para(f"run {r.run.id}, started {r.run.started}: {r.run.tool} {r.run.pattern} ({r.run.arguments}); "
                  f"{counts}")]
    if not r.plan_matches:
        parts.append(para(f"this run recorded plan {r.run.plan_hash}, not this report's plan (a lab runs its own "
                          "slice of the plan; an older plan of the same nodes also differs)", "note"))
    if r.block > 1:
        parts.append(para(f"{len(r.names)} blocks of {r.block} nodes a side: each cell is the worst pair between "
                          "two blocks", "note"))
    parts += [f'<figure class="heat">{heatmap_svg(r)}<figcaption>{heat_legend()}</figcaption></figure>']
    flagged = [m for m in r.worst if m.status in ("low", "failed")]
    unsure = [m for m in r.worst if m.status == "inconclusive"]
    rows = [(m.source, m.destination, m.rail, m.status, f"{m.value:g} {m.unit}",
             f"{m.percent_of_expected:.0f} %" if m.percent_of_expected is not None else None) for m in flagged]
    parts.append("<h3>Low and failed pairs</h3>" + (table(("from", "to", "rail", "status", "measured", "of expected"),
                                                          rows) if rows else para("none")))
    parts.append("<h3>Inconclusive, not judged</h3>" + (table(
        ("from", "to", "rail", "measured", "why"), [(m.source, m.destination, m.rail, f"{m.value:g} {m.unit}", m.reason)
                                                    for m in unsure]) if unsure else para("none")))
    return "\n".join(parts)


def judge_sim(r: SimResults) -> Judgement:
    measured = [j for j in r.jobs if j.measured_s is not None]
    slow = [j for j in measured
            if j.simulated_s > 0 and j.measured_s is not None and j.measured_s > SLOWER * j.simulated_s]
    if not measured:
        return Judgement(verdict="info", summary=f"{len(r.jobs)} simulated job(s), none measured")
    return Judgement(verdict="warn" if slow else "pass",
                     summary=f"{len(measured)} job(s) measured: {len(slow)} over {SLOWER:g}x the simulated time")


def sim_section(r: SimResults) -> str:
    rows = [(j.name, j.nodes, j.collective, j.bytes, f"{j.simulated_s:.4g}",
             None if j.measured_s is None else f"{j.measured_s:.4g}",
             None if j.measured_s is None or not j.simulated_s else f"{j.measured_s / j.simulated_s:.2f}x")
            for j in r.jobs]
    return table(("job", "nodes", "collective", "bytes", "simulated s", "measured s", "measured/simulated"), rows,
                 numeric=(3, 4, 5, 6))


def judge_compare(r: CompareView) -> Judgement:
    differ = sum(row.differs for row in r.rows)
    return Judgement(verdict="info", summary=f"{len(r.designs)} designs: {differ} of {len(r.rows)} rows differ")


def compare_section(r: CompareView) -> str:
    headers = ["", *(d.name for d in r.designs)]
    rows: list[list[str | Raw | None]] = []  # section rows and metric rows
    section = ""
    for row in r.rows:
        if row.section != section:
            section = row.section
            rows.append([Raw(f"<strong>{escape(section)}</strong>"), *([""] * len(r.designs))])
        rows.append([Raw(f"<strong>{escape(v)}</strong>") if row.differs else v for v in (row.metric, *row.values)])
    note = "rows in bold differ between the designs" + (
        "; costs and power from placeholder numbers, not prices" if r.placeholder else "")
    return table(headers, rows, css="compare") + para(note, "note")
