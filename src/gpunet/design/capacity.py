"""Capacity figures, read off a plane's fabric."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from gpunet.design.fabric import PlaneFabric
from gpunet.model.plan import Link, PlaneCapacity
from gpunet.model.spec import PlaneName

MAX_HOPS_BY_TIERS = {0: 0, 1: 1, 2: 3, 3: 5}  # switches crossed on the longest path


def bisection_gbps(links: Iterable[Link], tiers: Iterable[str] = ()) -> float:
    """Bandwidth across the worst even cut: half of the thinnest tier's cable total (a direct
    pair has only one cut, crossed by every cable). `tiers` that have lost every cable count as 0
    (a fabric after a failure)."""
    totals: Counter[str] = Counter(dict.fromkeys(tiers, 0))
    for link in links:
        totals[link.tier] += link.gbps
    if "direct" in totals:
        return float(totals["direct"])
    return min(totals.values(), default=0) / 2


def oversubscription(fabric: PlaneFabric, nic_gbps: int, port_gbps: int) -> dict[str, float]:
    leaf, upper = fabric.leaf, fabric.upper
    if leaf is None or upper is None or upper.tiers < 2:
        return {}
    ratios = {"leaf": round(leaf.down_ports * nic_gbps / (leaf.up_ports * port_gbps), 3)}
    if upper.tiers == 3:
        ratios["spine"] = round(upper.spine_down_ports / upper.spine_up_ports, 3)
    return ratios


def plane_capacity(
    plane: PlaneName, fabric: PlaneFabric, endpoints: int, nic_gbps: int, port_gbps: int
) -> PlaneCapacity:
    tiers = fabric.upper.tiers if fabric.upper else 0
    by_tier = Counter(s.tier for s in fabric.switches)
    rails = fabric.leaf.leaves_per_group if fabric.leaf and fabric.leaf.leaves_per_group > 1 else 0
    return PlaneCapacity(
        plane=plane, style=fabric.style, tiers=tiers, endpoints=endpoints,
        leaves=by_tier["leaf"], spines=by_tier["spine"], cores=by_tier["core"],
        oversubscription=oversubscription(fabric, nic_gbps, port_gbps),
        bisection_gbps=bisection_gbps(fabric.links), max_hops=MAX_HOPS_BY_TIERS[tiers],
        rails=rails, per_rail_gbps=float(endpoints // rails * nic_gbps) if rails else 0.0,
        planned_nodes=fabric.planned_nodes,
    )
