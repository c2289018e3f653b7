"""Growth headroom is exact: that many more nodes re-plan with every existing cable in place, one
more is refused (a cable would move, or the radix cannot build it)."""

from __future__ import annotations

from typing import Any

import pytest

from gpunet.decide.growth import plan_headroom
from gpunet.design import design
from gpunet.errors import DesignError
from gpunet.model.spec import Spec
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec


def spec(nodes: int, nics: int = 1, bond: bool = False, **fabric: Any) -> Spec:
    nic: dict[str, Any] = {"count": nics} | ({"bond": {"name": "bond0"}} if bond else {})
    return Spec.model_validate({
        "site": {"name": "t"},
        "planes": {"compute": {"subnet": "10.0.0.0/16", "technology": "roce", "speed": "400G", "fabric": fabric}},
        "groups": [{"name": "gpu", "nodes": f"n[0001-{nodes:04d}]", "nics": {"compute": nic}}],
    })


CASES = [
    (10, {"switch": {"radix": 8}}),  # two tiers until more spines would be needed
    (37, {"switch": {"radix": 8}, "style": "three-tier", "oversubscription": {"leaf": 2}}),  # a partial last pod
    (30, {"switch": {"radix": 8}, "style": "rail-optimized", "nics": 4}),
    (12, {"switch": {"radix": 16}, "style": "spine-leaf", "nics": 2, "bond": True, "dual_homed": True}),
    (5, {"switch": {"radix": 16}, "style": "single-switch"}),
    (30, {"switch": {"radix": 16}, "planned_nodes": 60}),
    (100, {"switch": {"radix": 16}, "oversubscription": {"leaf": 3, "spine": 3}}),  # grows into three tiers
]


@pytest.mark.parametrize(("nodes", "shape"), CASES)
def test_headroom_nodes_join_without_moving_a_cable_and_one_more_does_not(nodes: int, shape: dict[str, Any]) -> None:
    extra = {k: shape.pop(k) for k in ("nics", "bond") if k in shape}
    plan = design(spec(nodes, **extra, **shape))
    headroom = plan_headroom(plan)["compute"]
    assert headroom is not None and headroom >= 0
    grown = design(spec(nodes + headroom, **extra, **shape), plan)
    assert {(c.a.device, c.a.port, c.b.device, c.b.port) for c in plan.links} <= {
        (c.a.device, c.a.port, c.b.device, c.b.port) for c in grown.links}
    with pytest.raises(DesignError):
        design(spec(nodes + headroom + 1, **extra, **shape), plan)


def test_the_scalable_unit_compute_plane_is_full_and_its_management_switch_has_room() -> None:
    # management and oob: 38 nodes on one 48-port switch. compute: one full unit of 32, and a second
    # would need 8 spines instead of 4. storage: 2x200G bonds on 64-port 400G leaves hold 21 nodes
    # (42 down, 22 up), two spines take 11 links from each of up to 5 leaves: 105 nodes, 36 today.
    plan = design(parse_spec(example_text("scalable-unit"))[0])
    assert plan_headroom(plan) == {"management": 48 - 38, "oob": 48 - 38, "compute": 0, "storage": 69}


def test_a_plan_json_without_a_basis_has_unknown_headroom() -> None:
    plan = design(parse_spec(example_text("small-ethernet"))[0])
    old = plan.model_copy(update={"planes": tuple(p.model_copy(update={"basis": None}) for p in plan.planes)})
    assert set(plan_headroom(old).values()) == {None}
