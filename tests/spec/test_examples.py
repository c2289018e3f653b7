"""The built-in examples: each designs without a warning about itself and says how far each of its
switched planes is meant to grow; a warning found twice is told once."""

from __future__ import annotations

import pytest

from gpunet.errors import SpecProblem
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec
from gpunet.spec.plan import design_loaded, once


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_an_example_plans_without_warnings(name: str) -> None:
    plan, warnings = design_loaded(*parse_spec(example_text(name), f"<example {name}>"))
    assert [str(w) for w in warnings] == []
    assert plan.nodes


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_switched_plane_of_an_example_says_its_planned_size(name: str) -> None:
    spec, _ = parse_spec(example_text(name), name)
    unsized = [plane for plane, p in spec.planes.items()
               if p.fabric.style != "direct" and p.fabric.planned_nodes is None]
    assert unsized == []


def test_a_warning_found_twice_is_told_once() -> None:
    ntp = SpecProblem("no NTP servers", ("site",), "add site.ntp_servers", "c.yaml", 3, 1)
    monitoring = SpecProblem("no monitoring subnet", ("site",), "add site.monitoring", "c.yaml", 3, 1)
    elsewhere = SpecProblem("no NTP servers", ("site",), "add site.ntp_servers", "c.yaml", 9, 1)
    assert once([ntp, monitoring, ntp, elsewhere]) == [ntp, monitoring, elsewhere]
