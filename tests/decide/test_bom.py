"""The bill of materials accounts for the whole plan: every cable once under one media type, every
NIC once, both ends of every optical cable; priced, its totals are the sums of its lines and a
catalog with a gap never shows a smaller total."""

from __future__ import annotations

from collections import Counter
from math import ceil

from hypothesis import given
from hypothesis import strategies as st

from gpunet.decide.catalog import Catalog, Part
from gpunet.decide.cost import price_plan
from gpunet.design.bom import plan_bom
from gpunet.design.media import OPTICAL, media_of, nic_model
from gpunet.model.plan import Plan
from tests.decide.strategies import SETTINGS, plans


def full_catalog(plan: Plan, seed: int) -> Catalog:
    """An entry for every model of the plan's BOM, with prices and watts that differ per model."""
    sections: dict[str, dict[str, Part]] = {"switches": {}, "nics": {}, "media": {}}
    names = {"switch": "switches", "nic": "nics", "cable": "media", "transceiver": "media"}
    for i, line in enumerate(plan_bom(plan)):
        sections[names[line.item]][line.model] = Part(part=f"P{i}", price=(seed * 7 + i * 13) % 1000 + 1,
                                                      watts=(seed + i) % 50)
    return Catalog.model_validate(sections)


def cable_media(plan: Plan) -> Counter[tuple[str, str, str]]:
    """(plane, tier, media) of every cable, read from the plan's planes."""
    planes = {p.name: p for p in plan.planes}
    return Counter((c.plane, c.tier, media_of(planes[c.plane].technology, planes[c.plane].cabling.media.get(c.tier),
                                               c.tier, c.gbps)) for c in plan.links)


@SETTINGS
@given(plans())
def test_every_cable_once_under_one_media_type(plan: Plan) -> None:
    carried: Counter[tuple[str, str, str]] = Counter()
    for line in plan_bom(plan):
        if line.item == "cable":
            assert line.media is not None and 0 < line.count <= line.cables
            carried[line.plane, line.tier, line.media] += line.cables
    assert carried == cable_media(plan)
    assert sum(carried.values()) == len(plan.links)


@SETTINGS
@given(plans())
def test_every_nic_once_and_both_ends_of_every_optical_cable(plan: Plan) -> None:
    bom = plan_bom(plan)
    ports: Counter[str] = Counter()
    cards: Counter[str] = Counter()
    for line in bom:
        if line.item == "nic":
            ports[line.plane] += line.ports
            cards[line.plane] += line.count
    for plane in plan.planes:
        per_node = [sum(i.plane == plane.name and i.cabled for i in n.interfaces) for n in plan.nodes]
        card = {n.group: plane.nics[n.group].ports_per_card for n in plan.nodes if n.group in plane.nics}
        assert ports[plane.name] == sum(per_node)
        assert cards[plane.name] == sum(ceil(k / card[n.group]) for n, k in zip(plan.nodes, per_node, strict=True) if k)
    optical = sum(n for (_, _, media), n in cable_media(plan).items() if media in OPTICAL)
    assert sum(line.ports for line in bom if line.item == "transceiver") == 2 * optical


@SETTINGS
@given(plans(), st.integers(0, 100))
def test_totals_are_the_sums_of_the_lines(plan: Plan, seed: int) -> None:
    costing = price_plan(plan, full_catalog(plan, seed))
    prices = [(p.line.plane, p.line.tier, p.price, p.watts) for p in costing.lines]
    assert all(price is not None for _, _, price, _ in prices)
    assert costing.total.cost == sum(price or 0 for _, _, price, _ in prices)
    assert costing.total.watts == sum(watts or 0 for _, _, _, watts in prices)
    for name, totals in costing.planes.items():
        assert totals.cost == sum(price or 0 for plane, _, price, _ in prices if plane == name)
    for key, totals in costing.tiers.items():
        assert totals.cost == sum(price or 0 for plane, tier, price, _ in prices if f"{plane}/{tier}" == key)
    assert sum(t.cost or 0 for t in costing.planes.values()) == costing.total.cost
    assert costing.per_gpu == costing.total.cost / sum(n.gpus for n in plan.nodes)


@SETTINGS
@given(plans(), st.integers(0, 100), st.data())
def test_a_catalog_missing_an_entry_never_gives_a_smaller_total(plan: Plan, seed: int, data: st.DataObject) -> None:
    complete = full_catalog(plan, seed)
    models = [("switches", m) for m in complete.switches] + [("nics", m) for m in complete.nics] + \
        [("media", m) for m in complete.media]
    dropped = data.draw(st.sets(st.sampled_from(models), min_size=1))
    gapped = complete.model_copy(update={s: {m: p for m, p in getattr(complete, s).items() if (s, m) not in dropped}
                                         for s in ("switches", "nics", "media")})
    whole, partial = price_plan(plan, complete), price_plan(plan, gapped)
    assert partial.total.cost is None or partial.total.cost >= (whole.total.cost or 0)
    assert partial.total.cost is None and partial.total.watts is None and partial.per_gpu is None
    assert {(line.item, line.model) for line in partial.unpriced} == {
        (p.line.item, p.line.model) for p in partial.lines if p.part is None}
    assert all(line.count > 0 for line in partial.unpriced) and partial.total.unpriced == len(partial.unpriced)
    assert partial.total.priced_cost <= (whole.total.cost or 0)


def test_nic_defaults_name_technology_and_speed() -> None:
    assert nic_model("infiniband", 400) == "ib-hca-400G"
    assert nic_model("roce", 200) == "eth-nic-200G"
