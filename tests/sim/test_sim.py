"""The simulator on the shipped examples: names, failures, collisions, bad input."""

from __future__ import annotations

import pytest

from gpunet.design import design
from gpunet.errors import UsageError
from gpunet.model.plan import Plan
from gpunet.sim import SimOptions, simulate
from gpunet.sim.collectives import Job, btree, bus_factor, dtree_parents, pattern
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.specs import rail_spec

HUGE = 1 << 40


def example(name: str) -> Plan:
    return design(parse_spec(example_text(name), name)[0])


@pytest.fixture(scope="module")
def su() -> Plan:
    return example("scalable-unit")


@pytest.fixture(scope="module")
def two_units() -> Plan:
    return design(rail_spec(64, radix=64))


def test_ncclgetbtree_parents_match_its_illustration() -> None:
    """trees.cc draws 14 ranks: 0-8, 8 over 4 and 12, 4 over 2 and 6, 12 over 10 and 13, 10 over 9 and 11."""
    parents = {r: btree(14, r) for r in range(14)}
    assert parents == {0: -1, 8: 0, 4: 8, 12: 8, 2: 4, 6: 4, 10: 12, 13: 12, 1: 2, 3: 2, 5: 6, 7: 6, 9: 10, 11: 10}
    first, second = dtree_parents(12)
    assert second[11] == -1 and second[3] == 11  # the mirror: root 11, child 3 (drawn in trees.cc)
    assert sorted(first).count(-1) == 1


def test_bus_factors_are_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 8) == bus_factor("reduce_scatter", 8) == bus_factor("alltoall", 8) == 7 / 8
    assert bus_factor("sendrecv", 8) == 1


def test_ring_follows_rails_in_rank_order() -> None:
    phase = pattern(Job(("a", "b", "c"), 8, 8), "all_reduce", "ring").phases[0]
    assert {(s.src, s.dst) for s in phase.sends} == {(0, 1), (1, 2), (2, 0)}
    assert all(s.src_rail == s.dst_rail for s in phase.sends)
    assert phase.steps == 2 * (24 - 1)


def test_a_unit_keeps_rings_off_the_spines(su: Plan) -> None:
    report = simulate(su, options=SimOptions(sizes=(HUGE,)))
    assert report.spine_share == 0
    assert report.vs_nonblocking == pytest.approx(1.0)
    assert report.bottlenecks[0].tier == "node_leaf"
    assert report.bottlenecks[0].cable.startswith("gpu") and ":" in report.bottlenecks[0].cable


def test_hash_collisions_show_and_spraying_removes_them(two_units: Plan) -> None:
    """One connection per peer and rail: somewhere among the seeds two cross-unit rings hash onto
    one uplink and the job slows; ideal spraying never does."""
    nodes = [f"gpu{i:05d}" for i in (*range(1, 17), *range(33, 49))]
    nodes = [n for pair in zip(nodes[:16], nodes[16:], strict=True) for n in pair]  # every hop crosses units
    sprayed = simulate(two_units, nodes, SimOptions(sizes=(HUGE,), routing="spray", connections=1))
    hashed = [simulate(two_units, nodes, SimOptions(sizes=(HUGE,), seed=s, connections=1)) for s in range(8)]
    assert sprayed.busbw == pytest.approx(400.0, rel=0.01)
    assert all(h.busbw <= sprayed.busbw * 1.0001 for h in hashed)
    assert min(h.busbw for h in hashed) < 0.9 * sprayed.busbw
    slow = min(hashed, key=lambda h: h.busbw)
    assert slow.bottlenecks[0].tier == "leaf_spine"
    assert slow.spine_share == pytest.approx(1.0)


def test_a_spine_down_costs_cross_unit_rings_its_share(two_units: Plan) -> None:
    """Every ring hop crosses units, so each leaf's uplinks are full; one of the plane's spines down
    leaves (spines - 1) / spines of them (sprayed: no collision blurs the figure)."""
    first, second = [f"gpu{i:05d}" for i in range(1, 33)], [f"gpu{i:05d}" for i in range(33, 65)]
    nodes = [n for pair in zip(first, second, strict=True) for n in pair]
    options = SimOptions(sizes=(HUGE,), routing="spray")
    healthy = simulate(two_units, nodes, options)
    spines = sorted({s.name for s in two_units.switches if s.tier == "spine" and s.plane == "compute"})
    degraded = simulate(two_units, nodes, options, down=[spines[0]])
    assert healthy.peak_busbw == pytest.approx(400.0, rel=0.001)
    assert degraded.peak_busbw == pytest.approx(400.0 * (len(spines) - 1) / len(spines), rel=0.001)
    assert degraded.down == (spines[0],)
    assert degraded.bottlenecks[0].tier == "leaf_spine"


def test_cables_are_named_as_cabling_csv_names_them(su: Plan) -> None:
    leaf_end = "comp-leaf001:1"
    cable = next(c for c in su.links if f"{c.b.device}:{c.b.port}" == leaf_end)
    for name in (leaf_end, f"{cable.a.device}:{cable.a.port} {leaf_end}",
                 f"{cable.a.device}:{cable.a.port} <-> {leaf_end}"):
        report = simulate(su, options=SimOptions(sizes=(HUGE,)), down=[name])
        assert report.disconnected == 0  # the node falls back to another NIC
        assert report.busbw < 400 * 0.99


@pytest.mark.parametrize(("options", "down", "nodes", "needle"), [
    ({"collective": "allreduce"}, [], None, "all_reduce"),
    ({"algorithm": "butterfly"}, [], None, "ring"),
    ({"sizes": (0,)}, [], None, "message size"),
    ({}, ["comp-leaf999"], None, "comp-leaf001"),
    ({}, ["gpu001:ib9"], None, "cabling.csv"),
    ({}, [], ["gpu999"], "gpu[001-032]"),
    ({}, [], ["gpu002", "gpu001", "gpu002", "gpu003", "gpu001"], "the job names gpu[001-002] twice"),
    ({}, [], [], "the job has no node on plane compute"),
    ({"collective": "sendrecv"}, [], None, "pairs"),
])
def test_bad_input_names_the_choices(su: Plan, options: dict[str, object], down: list[str],
                                     nodes: list[str] | None, needle: str) -> None:
    with pytest.raises(UsageError, match=needle.replace("[", r"\[")):
        simulate(su, nodes, SimOptions.model_validate(options), down=down)
