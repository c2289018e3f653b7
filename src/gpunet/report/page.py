"""The report: one self-contained HTML page from a Plan and whatever results were given. Inline
CSS and SVG, no script, no reference to anything outside the file (a Content-Security-Policy of
default-src 'none' enforces it), the full data embedded as JSON for machines."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import TYPE_CHECKING

from gpunet import __version__
from gpunet.model.plan import Plan
from gpunet.report.badges import Mark
from gpunet.report.drawing import Drawing, draw
from gpunet.report.families import FAMILIES
from gpunet.report.markup import Raw, link, not_given, para, pill, section, table
from gpunet.report.model import Issue, Judgement, PlanIndex, cable_states
from gpunet.report.plan_sections import bom_section, flows_section
from gpunet.report.style import STYLE
from gpunet.report.svg import legend_svg

if TYPE_CHECKING:
    from gpunet.decide.cost import Costing

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
SEVERITY_ORDER = {"fail": 0, "warn": 1}


@dataclass(frozen=True)
class Report:
    html: str
    data: dict[str, object]
    issues: tuple[Issue, ...]
    drawing: Drawing


def render_report(plan: Plan, results: dict[str, object], *, generated: datetime, costing: Costing | None = None,
                  sources: dict[str, str] | None = None, index: PlanIndex | None = None) -> Report:
    """`results`: family key (FAMILIES) -> its typed result; a family not in it is "not given"."""
    unknown = set(results) - set(FAMILIES)
    if unknown:
        raise ValueError(f"unknown result families: {', '.join(sorted(unknown))}")
    index = index if index is not None and index.plan is plan else PlanIndex.of(plan)
    issues = _issues(results, index)
    checked = [i for key, r in results.items() for i in FAMILIES[key].checked(r, index)]
    states = cable_states(plan, checked, issues)
    refs = {id(issue): f"F{n}" for n, issue in enumerate(issues, 1)}
    drawing = draw(plan, states, [_mark(refs[id(i)], i) for i in issues if i.cables or i.devices])
    judgements = {key: family.judge(results[key]) for key, family in FAMILIES.items() if key in results}
    digest = index.digest
    data = _data(plan, results, issues, refs, judgements=judgements, states=states, generated=generated,
                 digest=digest, sources=sources or {})
    body = [_masthead(plan, digest, generated), _strip(judgements), _fabric(drawing, states),
            _findings(plan, issues, refs, drawing), bom_section(plan, costing), flows_section(plan)]
    body += [section(f"sec-{key}", family.title, family.section(results[key]) if key in results
                     else not_given(family.what, family.how)) for key, family in FAMILIES.items()]
    body.append(section("data", "Data", para("Everything this page shows, as JSON, is in this file: the element "
                                             "script#gpunet-data (a data block, not a script).")))
    html = _document(plan, "\n".join(body), data)
    return Report(html=html, data=data, issues=tuple(issues), drawing=drawing)


def _issues(results: dict[str, object], index: PlanIndex) -> list[Issue]:
    found = [i for key, family in FAMILIES.items() if key in results for i in family.issues(results[key], index)]
    order = list(FAMILIES)
    return sorted(found, key=lambda i: (SEVERITY_ORDER[i.severity], order.index(i.family)))


def _mark(ref: str, issue: Issue) -> Mark:
    short = issue.state or issue.title.split(" ")[0]
    return Mark(ref=ref, label=f"{ref} {short}", state=issue.state or issue.severity, cables=issue.cables,
                devices=issue.devices, plane=issue.plane)


def _masthead(plan: Plan, digest: str, generated: datetime) -> str:
    facts = [("plan hash", digest), ("gpunet", __version__), ("generated", generated.isoformat(timespec="seconds")),
             ("nodes · GPUs", f"{len(plan.nodes):,} · {sum(n.gpus for n in plan.nodes):,}"),
             ("switches", f"{len(plan.switches):,}"), ("cables", f"{len(plan.links):,}")]
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts)
    toc = " ".join(link(k, t) for k, t in (("verdicts", "verdicts"), ("fabric", "fabric"), ("findings", "findings"),
                                          ("bom", "bill of materials"), ("flows", "flows"))) + " " + " ".join(
        link(f"sec-{k}", k) for k in FAMILIES)
    return (f'<header class="masthead"><h1>{escape(plan.site.name)}<span class="sub">network report</span></h1>'
            f'<dl class="facts">{items}</dl></header><nav class="toc">{toc}</nav>')


def _strip(judgements: dict[str, Judgement]) -> str:
    items = []
    for key, family in FAMILIES.items():
        j = judgements.get(key, Judgement(verdict="not given", summary=f"not given: {family.what}"))
        css = j.verdict.replace(" ", "-")
        items.append(f'<li class="v-{css}"><a href="#sec-{key}"><span class="family">{escape(key)}</span>'
                     f'{pill(j.verdict)}<span class="summary">{escape(j.summary)}</span></a></li>')
    return section("verdicts", "Verdicts", f'<ul class="strip">{"".join(items)}</ul>')


def _fabric(drawing: Drawing, states: Mapping[int, str]) -> str:
    counts = Counter(states.values())
    counts["unchecked"] = len(drawing.plan.links) - sum(counts.values())
    figures = [f'<div class="legend">{legend_svg(dict(counts))}</div>',
               para("Each line is a planned cable (hover: both ends, as cabling.csv names them). Faults are drawn "
                    "thick with their own dash pattern and an F-number that links to the finding. A cable two "
                    "results disagree about is drawn in the worse state.", "note")]
    for panel in drawing.every_panel():
        figures.append(f'<figure class="plane">{drawing.svg(panel)}</figure>')
    return section("fabric", "Fabric", "\n".join(figures))


def _findings(plan: Plan, issues: list[Issue], refs: dict[int, str], drawing: Drawing) -> str:
    if not issues:
        return section("findings", "Findings", para("No result given here names a finding (the verdicts above say "
                                                    "which results were given)."))
    rows = []
    for issue in issues:
        ref = refs[id(issue)]
        anchor = drawing.anchors.get(ref)
        shown = Raw(f'<a id="finding-{ref}" href="#{anchor}">{ref}</a>') if anchor else Raw(
            f'<span id="finding-{ref}">{ref}</span>')
        rows.append((shown, issue.family, Raw(f'<span class="sev-{issue.severity}">{issue.severity}</span>'),
                     issue.title, issue.where, issue.detail, issue.fix))
    del plan
    return section("findings", "Findings", table(("", "from", "severity", "what", "where", "detail", "fix"), rows))


def _data(plan: Plan, results: dict[str, object], issues: list[Issue], refs: dict[int, str], *,
          judgements: dict[str, Judgement], states: Mapping[int, str], generated: datetime, digest: str,
          sources: dict[str, str]) -> dict[str, object]:
    def cable(i: int) -> str:
        link = plan.links[i]
        return f"{link.a.device}:{link.a.port} {link.b.device}:{link.b.port}"

    return {
        "gpunet_report": 1, "site": plan.site.name, "plan_hash": digest, "gpunet_version": __version__,
        "generated": generated.isoformat(timespec="seconds"),
        "plan": {"nodes": len(plan.nodes), "gpus": sum(n.gpus for n in plan.nodes), "switches": len(plan.switches),
                 "cables": len(plan.links)},
        "verdicts": {key: judgements[key].model_dump() if key in judgements else
                     {"verdict": "not given", "summary": f"not given: {family.what}"}
                     for key, family in FAMILIES.items()},
        "sources": sources,
        "findings": [issue.model_dump(mode="json", exclude={"cables"}) | {"ref": refs[id(issue)],
                                                                         "cables": [cable(i) for i in issue.cables]}
                     for issue in issues],
        "cable_states": dict(Counter(states.values())),
        "cables_not_ok": {cable(i): s for i, s in states.items() if s != "ok"},
        "results": {key: FAMILIES[key].data(r) for key, r in results.items()},
    }


def _document(plan: Plan, body: str, data: dict[str, object]) -> str:
    # A data block's text only ends at "</script": "<" written as \\u003c can never end it early.
    payload = json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")
    return (f'<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="color-scheme" content="light dark">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{escape(plan.site.name)}: gpunet network report</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n<footer>gpunet {escape(__version__)} · one self-contained file: no script, nothing "
            f"loaded from anywhere</footer>\n"
            f'<script type="application/json" id="gpunet-data">{payload}</script>\n</body>\n</html>\n')
