"""The bill of materials priced from a catalog: totals per plane and tier, per GPU, and power.

A line whose model the catalog does not list is unpriced, never priced at zero: every total that
includes it is unknown (None), with the priced lines' subtotal and the count of unpriced lines
beside it, so a catalog with a gap can never show a design cheaper than a complete one would."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import computed_field

from gpunet.decide.catalog import Catalog, Part
from gpunet.design.bom import plan_bom
from gpunet.model.base import Frozen
from gpunet.model.plan import BomLine, Plan


class PricedLine(Frozen):
    line: BomLine
    part: Part | None  # None: the catalog has no entry for this model

    @property
    def price(self) -> float | None:
        return self.part.price * self.line.count if self.part else None

    @property
    def watts(self) -> float | None:
        return self.part.watts * self.line.count if self.part else None


class Totals(Frozen):
    cost: float | None  # None while any line is unpriced
    watts: float | None
    priced_cost: float  # the priced lines alone: a part of the cost, not the cost
    unpriced: int  # lines without a catalog entry


class Costing(Frozen):
    currency: str
    placeholder: bool  # the catalog's numbers are placeholders, not prices
    gpus: int
    lines: tuple[PricedLine, ...]
    total: Totals
    planes: dict[str, Totals]
    tiers: dict[str, Totals]  # "plane/tier"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def per_gpu(self) -> float | None:
        return self.total.cost / self.gpus if self.total.cost is not None and self.gpus else None

    @property
    def unpriced(self) -> list[BomLine]:
        return [p.line for p in self.lines if p.part is None]


def totals(lines: Iterable[PricedLine]) -> Totals:
    chosen = list(lines)
    prices = [p.price for p in chosen]
    watts = [p.watts for p in chosen]
    missing = sum(p is None for p in prices)
    priced = [p for p in prices if p is not None]
    return Totals(cost=None if missing else sum(priced), watts=None if missing else sum(w or 0 for w in watts),
                  priced_cost=sum(priced), unpriced=missing)


def price_bom(lines: Iterable[BomLine], catalog: Catalog, gpus: int) -> Costing:
    priced = tuple(PricedLine(line=line, part=catalog.entry(line.item, line.model)) for line in lines)
    planes = dict.fromkeys(p.line.plane for p in priced)
    tiers = dict.fromkeys(f"{p.line.plane}/{p.line.tier}" for p in priced)
    return Costing(
        currency=catalog.currency, placeholder=catalog.placeholder, gpus=gpus, lines=priced, total=totals(priced),
        planes={name: totals(p for p in priced if p.line.plane == name) for name in planes},
        tiers={key: totals(p for p in priced if f"{p.line.plane}/{p.line.tier}" == key) for key in tiers},
    )


def price_plan(plan: Plan, catalog: Catalog) -> Costing:
    """The plan's full bill of materials (recomputed: a plan.json written before it held one
    still gets it) priced from the catalog."""
    return price_bom(plan_bom(plan), catalog, sum(n.gpus for n in plan.nodes))
