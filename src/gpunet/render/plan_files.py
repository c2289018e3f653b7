"""The files `gpunet plan` writes beside plan.json: pure text from the Plan."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from gpunet.model.plan import Plan, PlaneCapacity

SWITCH_TIERS = ("leaf", "spine", "core")
CABLE_TIERS = ("node_leaf", "leaf_spine", "spine_core")


def _csv(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def render_cabling_csv(plan: Plan) -> str:
    return _csv(
        ("plane", "tier", "a_device", "a_port", "b_device", "b_port", "gbps"),
        ((c.plane, c.tier, c.a.device, c.a.port, c.b.device, c.b.port, c.gbps) for c in plan.links),
    )


def render_addresses_csv(plan: Plan) -> str:
    return _csv(
        ("node", "group", "plane", "interface", "address", "address6", "hostname", "mtu", "rail", "vlan"),
        (
            (n.name, n.group, i.plane, i.name, i.address, i.address6 or "", i.hostname, i.mtu,
             "" if i.rail is None else i.rail, i.vlan or "")
            for n in plan.nodes for i in n.interfaces if i.address
        ),
    )


def render_bom_csv(plan: Plan) -> str:
    return _csv(("item", "plane", "tier", "model", "count"),
                ((b.item, b.plane, b.tier, b.model, b.count) for b in plan.bom))


def summary(plan: Plan) -> dict[str, object]:
    """The headline figures (the `--json` output of `gpunet plan`)."""
    return {
        "site": plan.site.name,
        "nodes": len(plan.nodes),
        "gpus": sum(n.gpus for n in plan.nodes),
        "switches": {t: sum(s.tier == t for s in plan.switches) for t in SWITCH_TIERS},
        "cables": {t: sum(c.tier == t for c in plan.links) for t in CABLE_TIERS}
        | {"direct": sum(c.tier == "direct" for c in plan.links)},
        "oversubscription": {c.plane: c.oversubscription for c in plan.capacity},
        "bisection_gbps": {c.plane: c.bisection_gbps for c in plan.capacity},
        "planes": [_plane_summary(c) for c in plan.capacity],
    }


def _plane_summary(c: PlaneCapacity) -> dict[str, object]:
    return c.model_dump(mode="json")


def render_summary_md(plan: Plan) -> str:
    head = summary(plan)
    lines = [
        f"# {plan.site.name}: network plan",
        "",
        f"{head['nodes']} nodes, {head['gpus']} GPUs, {len(plan.switches)} switches, "
        f"{len(plan.links)} cables.",
        "",
        "| plane | technology | style | tiers | endpoints | leaves | spines | cores | "
        "oversubscription | bisection (Gb/s) | max hops |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    tech = {p.name: p.technology for p in plan.planes}
    for c in plan.capacity:
        ratios = ", ".join(f"{t} {r:g}:1" for t, r in c.oversubscription.items()) or "-"
        lines.append(f"| {c.plane} | {tech[c.plane]} | {c.style} | {c.tiers} | {c.endpoints} | "
                     f"{c.leaves} | {c.spines} | {c.cores} | {ratios} | {c.bisection_gbps:g} | {c.max_hops} |")
    lines += ["", "## Bill of materials", "", "| item | plane | tier | model | count |", "|---|---|---|---|---|"]
    lines += [f"| {b.item} | {b.plane} | {b.tier} | {b.model} | {b.count} |" for b in plan.bom]
    return "\n".join(lines) + "\n"


def render_plan_json(plan: Plan) -> str:
    return plan.model_dump_json(indent=1, exclude_defaults=False) + "\n"


PLAN_FILES = {
    "plan.json": render_plan_json,
    "cabling.csv": render_cabling_csv,
    "addresses.csv": render_addresses_csv,
    "bom.csv": render_bom_csv,
    "summary.md": render_summary_md,
}
