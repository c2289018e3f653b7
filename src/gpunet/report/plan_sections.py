"""The sections that come from the Plan alone: the bill of materials (priced, and its power, where
a catalog is given) and the flows every firewall opens."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpunet.model.plan import Plan
from gpunet.report.markup import Cell, Raw, para, section, table

if TYPE_CHECKING:
    from gpunet.decide.cost import Costing, Totals


def bom_section(plan: Plan, costing: Costing | None) -> str:
    if costing is None:
        counts = [(b.item, b.plane, b.tier, b.model, b.media, b.group, b.count) for b in plan.bom]
        body = para("No parts catalog given (--catalog FILE, or --catalog example for placeholder numbers): "
                    "counts only, no cost or power.", "note")
        body += table(("item", "plane", "tier", "model", "media", "group", "count"), counts, numeric=(6,))
        return section("bom", "Bill of materials", body)
    note = f"Prices in {costing.currency}" + (": placeholder numbers, not prices" if costing.placeholder else "")
    rows: list[tuple[Cell | Raw, ...]] = []
    for p in costing.lines:
        priced = p.part is not None
        rows.append((p.line.item, p.line.plane, p.line.tier, p.line.model, p.line.count,
                     p.part.part if p.part else Raw("<strong>unpriced</strong>"),
                     f"{p.price:,.0f}" if priced and p.price is not None else None,
                     f"{p.watts:,.0f}" if priced and p.watts is not None else None))
    per_plane = [(plane, _money(t), _watts(t)) for plane, t in costing.planes.items()]
    per_gpu = "unknown" if costing.per_gpu is None else f"{costing.per_gpu:,.0f}"
    per_plane.append((Raw("<strong>total</strong>"), _money(costing.total), _watts(costing.total)))
    body = (para(f"{note}. A line without a catalog entry is unpriced, never zero: totals that include one are "
                 "unknown.", "note")
            + table(("plane", "cost", "power"), per_plane, numeric=(1, 2))
            + para(f"per GPU ({costing.gpus:,} GPUs): {per_gpu}")
            + table(("item", "plane", "tier", "model", "count", "part", "price", "watts"), rows, numeric=(4, 6, 7)))
    return section("bom", "Bill of materials", body)


def _money(t: Totals) -> str:
    if t.cost is None:
        return f"unknown ({t.unpriced} unpriced; priced part {t.priced_cost:,.0f})"
    return f"{t.cost:,.0f}"


def _watts(t: Totals) -> str:
    return f"{t.watts / 1000:,.1f} kW" if t.watts is not None else "unknown"


def flows_section(plan: Plan) -> str:
    if not plan.flows:
        return section("flows", "Flows", para("the plan holds no flows (a plan written before flows existed)"))
    rows = [(f.service, f"{f.protocol}/{f.ports}" if f.ports else f.protocol, f.plane, _sources(f.from_nodes,
             f.from_subnets, f.from_anywhere), f.to_nodes or ", ".join(f.to_hosts), f.why) for f in plan.flows]
    return section("flows", "Flows: the traffic the cluster needs",
                   table(("service", "protocol/ports", "plane", "from", "to", "why"), rows))


def _sources(nodes: str, subnets: tuple[str, ...], anywhere: bool) -> str:
    if anywhere:
        return "anywhere"
    return ", ".join(([nodes] if nodes else []) + list(subnets))
