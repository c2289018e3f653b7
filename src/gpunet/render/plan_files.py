"""The files `gpunet plan` writes beside plan.json: pure text from the Plan."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from gpunet.model.plan import BomLine, Plan, PlaneCapacity
from gpunet.model.spec import default_mtu

if TYPE_CHECKING:
    from gpunet.decide.cost import Costing, PricedLine
    from gpunet.decide.failures import PlaneFailures

SWITCH_TIERS = ("leaf", "spine", "core")
CABLE_TIERS = ("node_leaf", "leaf_spine", "spine_core")


def _csv(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


CABLING_COLUMNS = ("plane", "tier", "a_device", "a_port", "b_device", "b_port", "gbps")
ADDRESS_COLUMNS = ("node", "group", "plane", "interface", "address", "address6", "hostname", "mtu", "rail", "vlan")


def render_cabling_csv(plan: Plan) -> str:
    lines = [f"{c.plane},{c.tier},{c.a.device},{c.a.port},{c.b.device},{c.b.port},{c.gbps}\n" for c in plan.links]
    return _joined_csv(CABLING_COLUMNS, lines, lambda: (
        (c.plane, c.tier, c.a.device, c.a.port, c.b.device, c.b.port, c.gbps) for c in plan.links))


def render_addresses_csv(plan: Plan) -> str:
    lines = [f"{n.name},{n.group},{i.plane},{i.name},{i.address},{i.address6 or ''},{_cell(i.hostname)},{i.mtu},"
             f"{_cell(i.rail)},{i.vlan or ''}\n" for n in plan.nodes for i in n.interfaces if i.address]
    return _joined_csv(ADDRESS_COLUMNS, lines, lambda: (
        (n.name, n.group, i.plane, i.name, i.address, i.address6 or "", i.hostname, i.mtu,
         "" if i.rail is None else i.rail, i.vlan or "")
        for n in plan.nodes for i in n.interfaces if i.address))


def _cell(value: object) -> object:
    """A value as csv.writer writes it: None as nothing."""
    return "" if value is None else value


def _joined_csv(header: Sequence[str], lines: list[str], rows: Callable[[], Iterable[Sequence[object]]]) -> str:
    """What _csv writes of `rows`, from `lines` (each row's cells joined by ',', ending in '\n'):
    twice as fast for the millions of rows of a 1M-GPU plan. The same text only while no cell holds
    what csv.writer quotes (',', '"', a line break): counted over the whole text, not assumed from
    the names' validation; otherwise csv.writer writes it."""
    text = ",".join(header) + "\n" + "".join(lines)
    rows_written = len(lines) + 1
    if (text.count("\n") == rows_written and text.count(",") == (len(header) - 1) * rows_written
            and '"' not in text and "\r" not in text):
        return text
    return _csv(header, rows())


BOM_COLUMNS = ("item", "plane", "tier", "model", "media", "group", "count", "cables", "ports")
PRICE_COLUMNS = ("part", "unit_price", "price", "unit_watts", "watts")


def _bom_row(b: BomLine) -> tuple[object, ...]:
    return b.item, b.plane, b.tier, b.model, b.media or "", b.group or "", b.count, b.cables, b.ports


def render_bom_csv(plan: Plan, costing: Costing | None = None) -> str:
    """Every switch, NIC, cable and transceiver; with a catalog, its part, prices and watts (empty
    where the catalog has no entry: unpriced, never zero)."""
    if costing is None:
        return _csv(BOM_COLUMNS, (_bom_row(b) for b in plan.bom))
    return _csv(BOM_COLUMNS + PRICE_COLUMNS, (_bom_row(p.line) + _price_cells(p) for p in costing.lines))


def _price_cells(p: PricedLine) -> tuple[object, ...]:
    if p.part is None:  # no catalog entry: said, never a price of 0
        return "unpriced", "", "", "", ""
    return p.part.part, f"{p.part.price:g}", f"{p.price:g}", f"{p.part.watts:g}", f"{p.watts:g}"


def summary(plan: Plan, costing: Costing | None = None) -> dict[str, object]:
    """The headline figures (the `--json` output of `gpunet plan`)."""
    cost = {"cost": costing.model_dump(mode="json", exclude={"lines"})} if costing else {}
    return cost | {
        "site": plan.site.name,
        "nodes": len(plan.nodes),
        "gpus": sum(n.gpus for n in plan.nodes),
        "switches": {t: sum(s.tier == t for s in plan.switches) for t in SWITCH_TIERS},
        "cables": {t: sum(c.tier == t for c in plan.links) for t in CABLE_TIERS}
        | {"direct": sum(c.tier == "direct" for c in plan.links)},
        "oversubscription": {c.plane: c.oversubscription for c in plan.capacity},
        "bisection_gbps": {c.plane: c.bisection_gbps for c in plan.capacity},
        "planes": [_plane_summary(c) for c in plan.capacity],
        "bom": _bom_summary(plan.bom),
        "headroom": _headroom(plan),
        "failures": [f.model_dump(mode="json") for f in _failures(plan)],
    }


# The design-decision views load when a summary is made: `gpunet` imports this module for every
# command, and doctor's start-up must not pay for the design package they replay.
def _headroom(plan: Plan) -> dict[str, int | None]:
    from gpunet.decide.growth import plan_headroom  # noqa: PLC0415

    return plan_headroom(plan)


def _failures(plan: Plan) -> tuple[PlaneFailures, ...]:
    from gpunet.decide.failures import plan_failures  # noqa: PLC0415

    return plan_failures(plan)


def _bom_summary(bom: Iterable[BomLine]) -> dict[str, dict[str, int]]:
    """Units per item and model: switches, NICs, cables, transceivers."""
    result: dict[str, dict[str, int]] = {}
    for line in bom:
        by_model = result.setdefault(line.item, {})
        by_model[line.model] = by_model.get(line.model, 0) + line.count
    return result


def _plane_summary(c: PlaneCapacity) -> dict[str, object]:
    return c.model_dump(mode="json")


def render_summary_md(plan: Plan, costing: Costing | None = None) -> str:
    lines = [
        f"# {plan.site.name}: network plan",
        "",
        f"{len(plan.nodes)} nodes, {sum(n.gpus for n in plan.nodes)} GPUs, {len(plan.switches)} switches, "
        f"{len(plan.links)} cables.",
        "",
        "![The fabric: every plane in tiers, every cable](topology.svg)",
        "",
        "| plane | technology | style | tiers | endpoints | leaves | spines | cores | "
        "oversubscription | bisection (Gb/s) | max hops | growth headroom (nodes) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    tech = {p.name: p.technology for p in plan.planes}
    headroom = _headroom(plan)
    for c in plan.capacity:
        ratios = ", ".join(f"{t} {r:g}:1" for t, r in c.oversubscription.items()) or "-"
        grows = "unknown" if headroom[c.plane] is None else headroom[c.plane]
        lines.append(f"| {c.plane} | {tech[c.plane]} | {c.style} | {c.tiers} | {c.endpoints} | "
                     f"{c.leaves} | {c.spines} | {c.cores} | {ratios} | {c.bisection_gbps:g} | {c.max_hops} | "
                     f"{grows} |")
    return "\n".join(lines + _mtu_md(plan) + _failures_md(plan) + _bom_md(plan, costing)) + "\n"


def _mtu_md(plan: Plan) -> list[str]:
    """Each plane's interface MTU and why: the default's reason, or the spec's own choice."""
    lines = ["", "## MTU", "", "| plane | technology | MTU | why |", "|---|---|---|---|"]
    for p in plan.planes:
        mtu, why = default_mtu(p.name, p.technology)
        told = why if p.mtu == mtu else f"set in the spec (the default would be {mtu}: {why})"
        lines.append(f"| {p.name} | {p.technology} | {p.mtu} | {told} |")
    return lines


def _failures_md(plan: Plan) -> list[str]:
    lines = ["", "## What one failure costs", "",
             "The worst element of each kind per plane: nodes cut off (every cable of theirs on the plane gone), "
             "bisection and per-rail bandwidth lost, node pairs that lose paths and those left with none.", "",
             "| plane | lost | worst | nodes cut off | NIC ports cut off | bisection lost | rail lost | "
             "pairs losing paths | pairs disconnected |", "|---|---|---|---|---|---|---|---|---|"]
    for plane in _failures(plan):
        for i in plane.impacts:
            rail = "-" if i.rail_lost_pct is None else f"{i.rail_lost_pct:.3g} %"
            lines.append(f"| {plane.plane} | {i.element} | {i.name} | {i.nodes_cut_off} | {i.nics_cut_off} | "
                         f"{i.bisection_lost_pct:.3g} % | {rail} | {i.pairs_losing_paths} of {plane.pairs} | "
                         f"{i.pairs_disconnected} |")
    return lines


def _bom_md(plan: Plan, costing: Costing | None) -> list[str]:
    lines = ["", "## Bill of materials", ""]
    if costing is None:
        lines += ["| item | plane | tier | model | media | group | count |", "|---|---|---|---|---|---|---|"]
        return lines + [f"| {b.item} | {b.plane} | {b.tier} | {b.model} | {b.media or ''} | {b.group or ''} | "
                        f"{b.count} |" for b in plan.bom]
    note = ": placeholder numbers, not prices" if costing.placeholder else ""
    lines += [f"Prices in {costing.currency}{note}. Unpriced lines have no catalog entry; totals that include "
              "one are unknown.", "", "| item | plane | tier | model | count | part | price | watts |",
              "|---|---|---|---|---|---|---|---|"]
    for p in costing.lines:
        part, price, watts = (p.part.part, f"{p.price:,.0f}", f"{p.watts:,.0f}") if p.part else ("unpriced", "", "")
        lines.append(f"| {p.line.item} | {p.line.plane} | {p.line.tier} | {p.line.model} | {p.line.count} | "
                     f"{part} | {price} | {watts} |")
    total = costing.total
    lines.append(f"| total | | | | | | {_money(total.cost, total.unpriced)} | {_money(total.watts, total.unpriced)} |")
    return lines + _totals_md(costing)


def _totals_md(costing: Costing) -> list[str]:
    """Cost and watts per plane and tier, per plane, and per GPU."""
    lines = ["", "| plane / tier | cost | watts |", "|---|---|---|"]
    for plane, plane_totals in costing.planes.items():
        tiers = [(k, t) for k, t in costing.tiers.items() if k.split("/")[0] == plane]
        for name, totals in [*tiers, (f"**{plane}**", plane_totals)]:
            lines.append(f"| {name} | {_money(totals.cost, totals.unpriced)} | "
                         f"{_money(totals.watts, totals.unpriced)} |")
    per_gpu = "unknown" if costing.per_gpu is None else f"{costing.per_gpu:,.0f}"
    return [*lines, f"| per GPU ({costing.gpus} GPUs) | {per_gpu} | |"]


def _money(value: float | None, unpriced: int) -> str:
    return f"{value:,.0f}" if value is not None else f"unknown ({unpriced} unpriced)"


def render_plan_json(plan: Plan) -> str:
    return plan.model_dump_json(indent=1, exclude_defaults=False) + "\n"


def render_topology_svg(plan: Plan) -> str:
    """The picture of the design (report/drawing.py), loaded when drawn: doctor's start-up does not pay for it."""
    from gpunet.report.drawing import render_topology_svg as draw  # noqa: PLC0415

    return draw(plan)


PLAN_FILES = {
    "plan.json": render_plan_json,
    "cabling.csv": render_cabling_csv,
    "addresses.csv": render_addresses_csv,
    "bom.csv": render_bom_csv,
    "summary.md": render_summary_md,
    "topology.svg": render_topology_svg,
}
