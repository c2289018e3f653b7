"""The figures of one design that a design review compares: per plane, what it is built of, what it
costs and draws, what it carries, how far it grows and what a failure takes away."""

from __future__ import annotations

from collections import Counter

from pydantic import computed_field

from gpunet.decide.catalog import Catalog
from gpunet.decide.cost import Costing, Totals, price_bom
from gpunet.decide.failures import PlaneFailures, plan_failures
from gpunet.decide.growth import plane_headroom
from gpunet.design.bom import plan_bom
from gpunet.model.base import Frozen, bulk_objects
from gpunet.model.plan import BomLine, Plan, PlaneCapacity


class PlaneFigures(Frozen):
    plane: str
    technology: str
    style: str
    nodes: int
    gpus: int
    switches: dict[str, int]  # leaf, spine, core
    switch_models: tuple[str, ...]
    nics: dict[str, int]  # model -> cards
    cables: dict[str, int]  # model -> units (assemblies or fibers)
    transceivers: dict[str, int]
    cost: Totals | None  # None without a catalog
    bisection_gbps: float
    oversubscription: dict[str, float]
    max_hops: int
    headroom: int | None  # nodes that can join before a cable moves
    failures: PlaneFailures

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_per_gpu(self) -> float | None:
        return self.cost.cost / self.gpus if self.cost and self.cost.cost is not None and self.gpus else None


class DesignFigures(Frozen):
    name: str
    site: str
    nodes: int
    gpus: int
    switches: int
    cables: int  # the plan's cables
    transceivers: int
    costing: Costing | None
    planes: tuple[PlaneFigures, ...]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def headroom(self) -> int | None:
        known = [p.headroom for p in self.planes if p.headroom is not None]
        return min(known) if known else None

    def plane(self, name: str) -> PlaneFigures | None:
        return next((p for p in self.planes if p.plane == name), None)


def design_figures(name: str, plan: Plan, catalog: Catalog | None = None) -> DesignFigures:
    """Every figure of one plan; costs and power only with a catalog."""
    with bulk_objects():  # 10^5 small tuples and counters: no cyclic GC passes over the plan's 10^6 objects
        return _figures(name, plan, catalog)


def _figures(name: str, plan: Plan, catalog: Catalog | None) -> DesignFigures:
    bom = plan_bom(plan)
    costing = price_bom(bom, catalog, sum(n.gpus for n in plan.nodes)) if catalog else None
    failures = {f.plane: f for f in plan_failures(plan)}
    planes = tuple(_plane(plan, c, bom, costing, failures[c.plane]) for c in plan.capacity)
    return DesignFigures(
        name=name, site=plan.site.name, nodes=len(plan.nodes), gpus=sum(n.gpus for n in plan.nodes),
        switches=len(plan.switches), cables=len(plan.links), costing=costing, planes=planes,
        transceivers=sum(b.count for b in bom if b.item == "transceiver"),
    )


def _plane(plan: Plan, capacity: PlaneCapacity, bom: list[BomLine], costing: Costing | None,
           failures: PlaneFailures) -> PlaneFigures:
    name = capacity.plane
    plane = next(p for p in plan.planes if p.name == name)
    on = [n for n in plan.nodes if any(i.plane == name and i.cabled for i in n.interfaces)]
    lines = [b for b in bom if b.plane == name]
    return PlaneFigures(
        plane=name, technology=plane.technology, style=capacity.style, nodes=len(on), gpus=sum(n.gpus for n in on),
        switches={"leaf": capacity.leaves, "spine": capacity.spines, "core": capacity.cores},
        switch_models=tuple(dict.fromkeys(s.model for s in plan.switches if s.plane == name)),
        nics=_by_model(lines, "nic"), cables=_by_model(lines, "cable"), transceivers=_by_model(lines, "transceiver"),
        cost=costing.planes.get(name) if costing else None, bisection_gbps=capacity.bisection_gbps,
        oversubscription=capacity.oversubscription, max_hops=capacity.max_hops,
        headroom=plane_headroom(plan, plane), failures=failures,
    )


def _by_model(lines: list[BomLine], item: str) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for line in lines:
        if line.item == item:
            counts[line.model] += line.count
    return dict(counts)
