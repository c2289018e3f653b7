"""Designs side by side: one row per figure, one column per design, the rows that differ marked.

`compare` reads each design's figures (decide/figures.py) and lays them out cluster first, then
plane by plane (a plane one design lacks shows "-"). The rows carry text as a review reads it; the
JSON form carries the figures themselves beside them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gpunet.decide.catalog import Catalog
from gpunet.decide.cost import Totals
from gpunet.decide.failures import FailureImpact
from gpunet.decide.figures import DesignFigures, PlaneFigures, design_figures
from gpunet.decide.reference import ReferenceJob, ReferenceResult, reference_busbw
from gpunet.model.base import Frozen
from gpunet.model.plan import Plan

ELEMENTS = ("leaf", "spine", "core", "cable")
DEFAULT_REFERENCE = ReferenceJob()


class Row(Frozen):
    section: str  # "cluster" or a plane
    metric: str
    values: tuple[str, ...]
    differs: bool


class Comparison(Frozen):
    designs: tuple[DesignFigures, ...]
    references: tuple[ReferenceResult | None, ...] = ()  # the reference job per design (None: not simulated)
    rows: tuple[Row, ...]
    currency: str | None  # None without a catalog
    placeholder: bool  # the catalog's numbers are placeholders, not prices


def compare(plans: Sequence[tuple[str, Plan]], catalog: Catalog | None = None,
            reference: ReferenceJob | None = DEFAULT_REFERENCE) -> Comparison:
    """Two or more named plans compared; costs and power only with a catalog; the reference job's
    simulated busbw unless `reference` is None."""
    designs = tuple(design_figures(name, plan, catalog) for name, plan in plans)
    references = tuple(reference_busbw(plan, reference, [p.failures for p in figures.planes])
                       for (_, plan), figures in zip(plans, designs, strict=True)) if reference is not None else ()
    rows = [*_cluster_rows(designs, catalog), *_reference_rows(references)]
    for plane in dict.fromkeys(p.plane for d in designs for p in d.planes):
        rows += _plane_rows(plane, [d.plane(plane) for d in designs], catalog)
    return Comparison(designs=designs, references=references, rows=tuple(rows),
                      currency=catalog.currency if catalog else None, placeholder=bool(catalog and catalog.placeholder))


def _reference_rows(references: Sequence[ReferenceResult | None]) -> list[Row]:
    """The reference job's busbw (simulated: gpunet sim), healthy and after the worst failure."""
    known = [r for r in references if r is not None]
    if not known:
        return []
    title = f"{known[0].job} busbw, simulated"
    healthy = [f"{r.busbw:,.1f} GB/s on {r.nodes} nodes ({r.plane}) · {r.vs_nonblocking or 0:.0%} of "
               "non-blocking" if r else "-" for r in references]
    failed = [f"{r.worst_busbw:,.1f} GB/s ({r.worst_element} down)" if r and r.worst_element else "-"
              for r in references]
    return [_row("cluster", title, healthy), _row("cluster", "… after the worst failure", failed)]


def _row(section: str, metric: str, values: Sequence[str]) -> Row:
    return Row(section=section, metric=metric, values=tuple(values), differs=len(set(values)) > 1)


def _cluster_rows(designs: Sequence[DesignFigures], catalog: Catalog | None) -> list[Row]:
    def each(text: Callable[[DesignFigures], str]) -> list[str]:
        return [text(d) for d in designs]

    rows = [
        _row("cluster", "nodes · GPUs", each(lambda d: f"{d.nodes:,} · {d.gpus:,}")),
        _row("cluster", "switches", each(lambda d: f"{d.switches:,}")),
        _row("cluster", "cables · transceivers", each(lambda d: f"{d.cables:,} · {d.transceivers:,}")),
    ]
    if catalog is not None:
        rows += [
            _row("cluster", f"cost ({_currency(catalog)})", each(lambda d: money(_total(d)))),
            _row("cluster", "cost per GPU", each(lambda d: per_gpu(_total(d), d.gpus))),
            _row("cluster", "power", each(lambda d: power(_total(d)))),
        ]
    rows.append(_row("cluster", "growth headroom (nodes)", each(lambda d: _count(d.headroom))))
    return rows


def _plane_rows(plane: str, figures: Sequence[PlaneFigures | None], catalog: Catalog | None) -> list[Row]:
    def each(text: Callable[[PlaneFigures], str]) -> list[str]:
        return [text(f) if f is not None else "-" for f in figures]

    rows = [
        _row(plane, "technology · style", each(lambda f: f"{f.technology} · {f.style}")),
        _row(plane, "nodes · GPUs", each(lambda f: f"{f.nodes:,} · {f.gpus:,}")),
        _row(plane, "switches leaf/spine/core", each(_switches)),
        _row(plane, "NICs", each(lambda f: counts(f.nics))),
        _row(plane, "cables", each(lambda f: counts(f.cables))),
        _row(plane, "transceivers", each(lambda f: counts(f.transceivers))),
    ]
    if catalog is not None:
        rows += [_row(plane, f"cost ({_currency(catalog)})", each(lambda f: money(f.cost))),
                 _row(plane, "cost per GPU", each(lambda f: per_gpu(f.cost, f.gpus))),
                 _row(plane, "power", each(lambda f: power(f.cost)))]
    rows += [
        _row(plane, "bisection (Gb/s)", each(lambda f: f"{f.bisection_gbps:,.0f}")),
        _row(plane, "oversubscription", each(lambda f: ratios(f.oversubscription))),
        _row(plane, "max hops", each(lambda f: str(f.max_hops))),
        _row(plane, "growth headroom (nodes)", each(lambda f: _count(f.headroom))),
    ]
    for element in ELEMENTS:
        if any(f is not None and f.failures.impact(element) for f in figures):
            rows.append(_row(plane, f"one {element} lost", each(_failure(element))))
    return rows


def _failure(element: str) -> Callable[[PlaneFigures], str]:
    return lambda f: impact_text(f.failures.impact(element))


def _total(d: DesignFigures) -> Totals | None:
    return d.costing.total if d.costing else None


def _switches(f: PlaneFigures) -> str:
    counts = f"{f.switches['leaf']}/{f.switches['spine']}/{f.switches['core']}"
    return f"{counts} {', '.join(f.switch_models)}" if f.switch_models else counts


def _currency(catalog: Catalog) -> str:
    return f"{catalog.currency}, placeholder" if catalog.placeholder else catalog.currency


def _count(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def counts(by_model: dict[str, int]) -> str:
    return ", ".join(f"{n:,} {model}" for model, n in by_model.items()) or "-"


def ratios(values: dict[str, float]) -> str:
    return "/".join(f"{r:g}:1" for r in values.values()) or "-"


def money(totals: Totals | None) -> str:
    if totals is None:
        return "-"
    if totals.cost is None:
        return f"unknown: {totals.unpriced} line(s) unpriced (priced part {totals.priced_cost:,.0f})"
    return f"{totals.cost:,.0f}"


def per_gpu(totals: Totals | None, gpus: int) -> str:
    if totals is None or not gpus:
        return "-"
    return "unknown" if totals.cost is None else f"{totals.cost / gpus:,.0f}"


def power(totals: Totals | None) -> str:
    if totals is None:
        return "-"
    return "unknown" if totals.watts is None else f"{totals.watts / 1000:,.1f} kW"


def impact_text(impact: FailureImpact | None) -> str:
    """0 cut off · bisection −25% · rail −25% · 512 pairs lose paths (0 all)."""
    if impact is None:
        return "-"
    parts = [f"{impact.nodes_cut_off:,} cut off", f"bisection −{impact.bisection_lost_pct:.3g}%"]
    if impact.rail_lost_pct is not None:
        parts.append(f"rail −{impact.rail_lost_pct:.3g}%")
    pairs = "1 pair loses" if impact.pairs_losing_paths == 1 else f"{impact.pairs_losing_paths:,} pairs lose"
    parts.append(f"{pairs} paths ({impact.pairs_disconnected:,} all)")
    return " · ".join(parts)


def render_markdown(comparison: Comparison) -> str:
    """The comparison as a Markdown table for a design review; rows that differ in bold."""
    names = [_cell(d.name) for d in comparison.designs]
    lines = [f"| | {' | '.join(names)} |", f"|---|{'---|' * len(names)}"]
    section = ""
    for row in comparison.rows:
        if row.section != section:
            section = row.section
            lines.append(f"| **{section}** |{' |' * len(names)}")
        cells = [_cell(v) for v in (row.metric, *row.values)]
        if row.differs:
            cells = [f"**{c}**" for c in cells]
        lines.append(f"| {' | '.join(cells)} |")
    notes = ["Rows in bold differ between the designs."]
    if comparison.placeholder:
        notes.append("Costs and power come from a catalog of placeholder numbers: they are not prices.")
    return "\n".join([*lines, "", *notes]) + "\n"


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
