"""What one failure costs: hand-derived cases, and every reported figure equal to a brute-force
recomputation on the Plan with the element removed (tests/decide/recompute.py, networkx)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from gpunet.decide.failures import FailureImpact, plan_failures, plane_failures
from gpunet.design import design
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from tests.decide.examples import example_plan
from tests.decide.recompute import Recomputed, recompute
from tests.decide.strategies import SETTINGS, plans


def one_plane(nodes: int, radix: int, *, nics: int = 1, bond: bool = False, **fabric: Any) -> Plan:
    nic: dict[str, Any] = {"count": nics} | ({"bond": {"name": "bond0"}} if bond else {})
    return design(Spec.model_validate({
        "site": {"name": "t"},
        "planes": {"storage": {"subnet": "10.0.0.0/20", "speed": "100G",
                               "fabric": {"switch": {"radix": radix, "port_speed": "100G"}, **fabric}}},
        "groups": [{"name": "n", "nodes": f"n[01-{nodes:02d}]", "nics": {"storage": nic}}],
    }))


def impact(plan: Plan, element: str) -> FailureImpact:
    found = plane_failures(plan, plan.planes[0].name).impact(element)
    assert found is not None
    return found


def test_two_tiers_of_four_spines_lose_a_quarter_of_the_bisection_with_one() -> None:
    # 16 single-NIC nodes on 8-port leaves at 1:1: 4 leaves of 4 down and 4 up ports, one to each of 4 spines.
    plan = one_plane(16, 8, style="spine-leaf", min_spines=4)
    assert (plan.capacity[0].leaves, plan.capacity[0].spines) == (4, 4)
    spine = impact(plan, "spine")
    assert spine.bisection_lost_pct == pytest.approx(25.0)
    assert (spine.nodes_cut_off, spine.nics_cut_off, spine.pairs_disconnected) == (0, 0, 0)
    # every pair under two different leaves loses the paths through it: 120 pairs less 4 leaves x 6 in-leaf pairs
    assert spine.pairs_losing_paths == 120 - 4 * 6
    assert spine.of == 4


def test_a_single_homed_node_under_a_failed_leaf_is_cut_off() -> None:
    # 6 nodes bonding 2 NICs on one leaf each: 8-port leaves at 1:1 hold 2 nodes (4 ports down, 4 up).
    plan = one_plane(6, 8, nics=2, bond=True, style="spine-leaf")
    leaf = impact(plan, "leaf")
    assert (leaf.nodes_cut_off, leaf.nics_cut_off) == (2, 4)
    assert leaf.pairs_disconnected == 1 + 2 * 4  # the two together, and each with the four others
    assert leaf.pairs_losing_paths == leaf.pairs_disconnected
    assert leaf.bisection_lost_pct == pytest.approx(100 / 3)


def test_a_dual_homed_node_under_a_failed_leaf_is_not() -> None:
    plan = one_plane(6, 8, nics=2, bond=True, style="spine-leaf", dual_homed=True)
    leaf = impact(plan, "leaf")
    assert (leaf.nodes_cut_off, leaf.pairs_disconnected) == (0, 0)
    assert leaf.nics_cut_off == 4  # one member of each of the 4 nodes of the leaf pair's slots
    cable = impact(plan, "cable")
    assert cable.nodes_cut_off == 0


def test_a_single_nic_node_is_cut_off_by_its_cable_and_a_single_switch_by_its_leaf() -> None:
    plan = one_plane(5, 16)
    assert plan.capacity[0].style == "single-switch"
    leaf, cable = impact(plan, "leaf"), impact(plan, "cable")
    assert (leaf.nodes_cut_off, leaf.bisection_lost_pct, leaf.pairs_disconnected) == (5, 100.0, 10)
    assert (cable.nodes_cut_off, cable.pairs_disconnected, cable.of) == (1, 4, 5)


def test_a_rail_leaf_of_one_scalable_unit_takes_its_whole_rail() -> None:
    plan = example_plan("scalable-unit")
    leaf = plane_failures(plan, "compute").impact("leaf")
    assert leaf is not None
    assert (leaf.nodes_cut_off, leaf.nics_cut_off, leaf.rail_lost_pct) == (0, 32, 100.0)
    assert leaf.bisection_lost_pct == pytest.approx(100 / 8)


def test_the_last_direct_cable_cuts_both_servers_off() -> None:
    plan = example_plan("two-servers-direct")
    cable = plane_failures(plan, "compute").impact("cable")
    assert cable is not None
    assert (cable.nodes_cut_off, cable.pairs_disconnected, cable.bisection_lost_pct) == (2, 1, 100.0)


def assert_recomputed(plan: Plan) -> None:
    for plane in plan.planes:
        failures = plane_failures(plan, plane.name)
        for found in failures.impacts:
            again = recompute(plan, plane.name, found.name)
            assert (found.nodes_cut_off, found.nics_cut_off, found.pairs_losing_paths, found.pairs_disconnected) == (
                again.nodes_cut_off, again.nics_cut_off, again.pairs_losing_paths, again.pairs_disconnected), found
            assert found.bisection_lost_pct == pytest.approx(again.bisection_lost_pct), found
            assert found.rail_lost_pct == pytest.approx(again.rail_lost_pct), found


@SETTINGS
@given(plans())
def test_the_reported_loss_equals_a_recomputation_without_the_element(plan: Plan) -> None:
    assert_recomputed(plan)


@pytest.mark.parametrize("name", ["small-ethernet", "scalable-unit", "two-servers-direct"])
def test_the_examples_losses_equal_a_recomputation(name: str) -> None:
    assert_recomputed(example_plan(name))


@pytest.mark.parametrize("plan", [
    one_plane(20, 8, style="three-tier", oversubscription={"leaf": 2}),  # 5 leaves in 2 pods, 2 cores
    one_plane(12, 8, nics=2, style="rail-optimized", oversubscription={"leaf": 3}),  # 2 units of 2 rail leaves
], ids=["three-tier", "rails"])
def test_the_reported_element_is_the_worst_of_its_kind(plan: Plan) -> None:
    """Every leaf, spine, core and cable removed in turn: none costs more than the one reported."""
    switches = {s.name: s.tier for s in plan.switches}
    cables = {f"{c.a.device}:{c.a.port} {c.b.device}:{c.b.port}" for c in plan.links}
    for found in plane_failures(plan, "storage").impacts:
        names = cables if found.element == "cable" else {n for n, tier in switches.items() if tier == found.element}
        worst = max(_cost(recompute(plan, "storage", name)) for name in names)
        assert _cost(found) == worst, found


def _cost(c: FailureImpact | Recomputed) -> tuple[int, float, float, int]:
    return c.nodes_cut_off, round(c.bisection_lost_pct, 9), round(c.rail_lost_pct or 0, 9), c.pairs_losing_paths


def test_the_same_plan_is_analysed_once_and_a_copy_afresh() -> None:
    """`gpunet plan` asks for the failures twice (summary.md, the terminal): the second is the first."""
    plan = example_plan("small-ethernet")
    first = plan_failures(plan)
    assert plan_failures(plan) is first
    copy = plan.model_copy()
    assert plan_failures(copy) is not first and plan_failures(copy) == first
