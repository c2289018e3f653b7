"""The fabric drawing: the default example's topology.svg against its golden file; on random plans,
every cable drawn exactly once (a wire, or one member of one folded bundle) and no two labels
overlapping; folding of a large plane with a finding's unit drawn cable by cable."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpunet.model.plan import Plan
from gpunet.report.badges import Mark
from gpunet.report.drawing import Drawing, draw, render_topology_svg
from gpunet.report.geometry import overlapping_pairs
from gpunet.spec.examples import EXAMPLES
from tests.design.test_properties import designed, spec_dicts
from tests.render.rendered import example_plan
from tests.specs import rail_spec

GOLDEN = Path(__file__).parent.parent / "fixtures" / "report" / "scalable-unit-topology.svg"
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def drawn_once(plan: Plan, drawing: Drawing) -> Counter[int]:
    """How many times each cable index is drawn: as a wire, or inside a bundle."""
    seen: Counter[int] = Counter()
    for panel in drawing.every_panel():
        seen.update(w.index for w in panel.wires)
        for bundle in panel.bundles:
            seen.update(bundle.members)
    return seen


def assert_every_cable_once(plan: Plan, drawing: Drawing) -> None:
    seen = drawn_once(plan, drawing)
    assert set(seen) == set(range(len(plan.links)))
    assert [i for i, n in seen.items() if n != 1] == []


def assert_no_labels_overlap(drawing: Drawing) -> None:
    for panel in drawing.every_panel():
        assert overlapping_pairs(panel.labels()) == [], panel.key
        inside = [(t.text, t.box) for t in panel.texts] + [(b.text, b.rect) for b in panel.badges]
        outside = [(text, box) for text, box in inside if not (box.x >= 0 and box.right <= panel.width + 0.01
                                                               and box.y >= 0 and box.bottom <= panel.height + 0.01)]
        assert outside == [], (panel.key, panel.width, panel.height)


def test_the_default_examples_topology_is_its_golden_file() -> None:
    svg = render_topology_svg(example_plan("scalable-unit"))
    if os.environ.get("GPUNET_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(svg)
    assert svg == GOLDEN.read_text()


def test_the_golden_file_draws_every_cable_once_with_its_ends_named() -> None:
    plan = example_plan("scalable-unit")
    svg = GOLDEN.read_text()
    cables = re.findall(r'data-cable="(\d+)"', svg)
    assert sorted(map(int, cables)) == list(range(len(plan.links)))
    assert "<title>compute node_leaf: gpu001:ib0 — comp-leaf001:1 (400 Gb/s): unchecked</title>" in svg
    assert ">gpu032</text>" in svg and ">comp-spine004</text>" in svg  # real text: a search finds it


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_every_example_draws_each_cable_once_without_overlaps(name: str) -> None:
    plan = example_plan(name)
    drawing = draw(plan)
    assert_every_cable_once(plan, drawing)
    assert_no_labels_overlap(drawing)
    ElementTree.fromstring(render_topology_svg(plan))  # well-formed XML: topology.svg opens on its own


@st.composite
def plans_and_marks(draw_: st.DrawFn) -> tuple[Plan, list[Mark]]:
    data: dict[str, Any] = draw_(spec_dicts())
    _, plan = designed(data)
    chosen = draw_(st.lists(st.integers(0, len(plan.links) - 1), max_size=6, unique=True))
    states = ["down", "missing", "miswired", "suspect", "degraded"]
    marks = [Mark(ref=f"F{n}", label=f"F{n} {states[n % 5]}", state=states[n % 5], cables=(i,))
             for n, i in enumerate(chosen, 1)]
    nodes = draw_(st.lists(st.sampled_from([n.name for n in plan.nodes]), max_size=3, unique=True))
    marks += [Mark(ref=f"F{len(marks) + n}", label=f"F{len(marks) + n} GN-LINK-01", state="fail", devices=(node,))
              for n, node in enumerate(nodes, 1)]
    return plan, marks


@SETTINGS
@given(plans_and_marks())
def test_random_plans_draw_every_cable_once_and_no_two_labels_overlap(case: tuple[Plan, list[Mark]]) -> None:
    plan, marks = case
    states = {i: m.state for m in marks for i in m.cables}
    drawing = draw(plan, states, marks)  # type: ignore[arg-type]
    assert_every_cable_once(plan, drawing)
    assert_no_labels_overlap(drawing)
    placed = {b.ref for p in drawing.every_panel() for b in p.badges} | {r for p in drawing.every_panel()
                                                                          for t in p.tiles for r in t.refs}
    assert placed == set(drawing.anchors) == {m.ref for m in marks}


def test_a_large_plane_folds_and_draws_the_findings_unit_cable_by_cable() -> None:
    from gpunet.design import design  # noqa: PLC0415

    plan = design(rail_spec(256))
    faulty = next(i for i, link in enumerate(plan.links) if link.a.device == "gpu00200" and link.tier == "node_leaf")
    drawing = draw(plan, {faulty: "down"}, [Mark("F1", "F1 down", "down", cables=(faulty,))])
    (panel,) = drawing.panels
    assert panel.wires == [] and panel.tiles and len(panel.expansions) == 1
    expanded = panel.expansions[0]
    assert faulty in {w.index for w in expanded.wires}
    assert "gpu00200" in {d.name for d in expanded.devices} and "gpu00001" not in {d.name for d in expanded.devices}
    assert drawing.anchors["F1"] == "on-F1"
    assert_every_cable_once(plan, drawing)
    assert any(t.expanded == expanded.key for t in panel.tiles)
