"""The fabric pattern, bench's default, as pure functions over real plans: every NIC measured under
its own leaf, every two leaves crossed, every rail covered, no pair twice, the same plan giving the
same pairs; --rail and --pairs narrow it and still span the fabric."""

from __future__ import annotations

from functools import cache
from itertools import combinations

import pytest

from gpunet.bench import Fabric, Selection, bench_nodes, pattern_rounds
from gpunet.bench.schedule import RailPair, Round
from gpunet.design import design
from gpunet.errors import UsageError
from gpunet.lab.slice import slice_plan
from gpunet.model.plan import Plan
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.lab.helpers import small_plan
from tests.render.rendered import example_plan

EVERYTHING = Selection()
ONE_LEAF = example_text("small-ethernet").replace("nodes: node[01-40]", "nodes: node[01-12]")


@cache
def plan_of(name: str) -> Plan:
    if name == "one-leaf":
        return design(parse_spec(ONE_LEAF)[0])
    if name == "lab-small":
        return small_plan()
    return example_plan(name)


def fabric(name: str, plane: str = "compute", selection: Selection = EVERYTHING) -> tuple[Fabric, list[Round]]:
    plan = plan_of(name)
    return Fabric.of(plan, plane), pattern_rounds(plan, plane, "fabric", bench_nodes(plan, plane, None), selection)


def ends(fab: Fabric, pair: RailPair) -> tuple[tuple[str, int | None], tuple[str, int | None]]:
    return (pair[0], pair.rail), (pair[1], pair.to_rail)


def assert_covers_the_fabric(fab: Fabric, rounds: list[Round]) -> list[RailPair]:
    """Every NIC in a pair under its own leaf (where its leaf has another node's NIC), every two
    leaves crossed by one pair, every rail on both sides; never a node with itself, never a pair twice
    (either way), a NIC once a round; each pair's path class is its leaves'."""
    pairs = [p for r in rounds for p in r if isinstance(p, RailPair)]
    assert len(pairs) == sum(len(r) for r in rounds)
    unordered = {frozenset(ends(fab, p)) for p in pairs}
    assert len(unordered) == len(pairs), "a pair measured twice"
    assert all(p[0] != p[1] for p in pairs)
    for r in rounds:
        used = [end for p in r for end in ends(fab, p)]  # type: ignore[arg-type]
        assert len(used) == len(set(used)), "a NIC twice in one round"
    leaves = sorted({n.leaf for n in fab.nics})
    crossed = {frozenset(fab.leaves(p)) for p in pairs if len(set(fab.leaves(p))) == 2}
    assert crossed == {frozenset(two) for two in combinations(leaves, 2)}
    for p in pairs:
        a, b = fab.leaves(p)
        assert p.path == fab.path_class(a, b) and (p.path == "same-leaf") == (a == b)
    nodes_on = {leaf: {n.node for n in fab.nics if n.leaf == leaf} for leaf in leaves}
    same_leaf = {end for p in pairs if p.path == "same-leaf" for end in ends(fab, p)}
    assert same_leaf == {(n.node, n.rail) for n in fab.nics if len(nodes_on[n.leaf]) > 1}
    assert {r for p in pairs for r in (p.rail, p.to_rail)} == {n.rail for n in fab.nics}
    return pairs


def test_the_default_example_covers_all_8_rails_each_under_its_leaf_and_crosses_every_two_rails() -> None:
    fab, rounds = fabric("scalable-unit")
    pairs = assert_covers_the_fabric(fab, rounds)
    same = [p for p in pairs if p.path == "same-leaf"]
    assert {p.rail for p in same} == set(range(8)) and all(p.rail == p.to_rail for p in same)
    assert len(same) == 8 * 16  # 32 NICs a rail, two by two
    across = [p for p in pairs if p.path == "cross-leaf"]
    assert len(across) == 28 and {frozenset((p.rail, p.to_rail)) for p in across} == {
        frozenset(two) for two in combinations(range(8), 2)}  # one leaf a rail: crossing leaves crosses rails
    assert len(rounds) <= 4  # every NIC busy in few rounds, all rails at once


def test_the_default_example_in_the_lab_covers_its_6_compute_nodes() -> None:
    plan = slice_plan(plan_of("scalable-unit"), 8)
    fab = Fabric.of(plan, "compute")
    rounds = pattern_rounds(plan, "compute", "fabric", bench_nodes(plan, "compute", None))
    pairs = assert_covers_the_fabric(fab, rounds)
    assert len(pairs) == 8 * 3 + 28
    # Crossings spread over the nodes: no node carries more than its share of a leaf's 7.
    for leaf in {n.leaf for n in fab.nics}:
        crossing = [end for p in pairs if p.path == "cross-leaf" for end, at in zip(ends(fab, p), fab.leaves(p),
                                                                                     strict=True) if at == leaf]
        assert len(crossing) == 7 and max(crossing.count(e) for e in crossing) <= 2


def test_the_multi_unit_example_crosses_leaves_in_a_pod_and_across_pods() -> None:
    fab, rounds = fabric("multi-unit-large")
    pairs = assert_covers_the_fabric(fab, rounds)
    paths = {p.path for p in pairs}
    assert paths == {"same-leaf", "cross-leaf", "cross-pod"}
    # Leaves of one pod share its spines; leaves of two pods meet only above them.
    pods = {s.name: s.pod for s in plan_of("multi-unit-large").switches}
    for p in pairs[:: 97]:
        a, b = fab.leaves(p)
        assert (p.path == "cross-pod") == (pods[a] != pods[b])


@pytest.mark.parametrize(("name", "plane"), [("small-ethernet", "compute"), ("small-ethernet", "storage"),
                                             ("lab-small", "compute"), ("one-leaf", "compute")])
def test_planes_without_rails_cover_every_node_and_leaf_pair(name: str, plane: str) -> None:
    fab, rounds = fabric(name, plane)
    pairs = assert_covers_the_fabric(fab, rounds)
    assert all(p.rail is None and p.to_rail is None for p in pairs)
    if name == "one-leaf":
        assert len({n.leaf for n in fab.nics}) == 1 and {p.path for p in pairs} == {"same-leaf"}
        assert len(pairs) == 6  # 12 nodes, two by two


def test_the_same_plan_gives_the_same_pairs_in_the_same_rounds() -> None:
    for name in ("scalable-unit", "small-ethernet", "one-leaf"):
        first, second = fabric(name)[1], fabric(name)[1]
        assert [[repr(p) for p in r] for r in first] == [[repr(p) for p in r] for r in second]


def test_an_odd_leaf_pairs_its_last_nic_with_another_node() -> None:
    plan = design(parse_spec(ONE_LEAF.replace("node[01-12]", "node[01-05]"))[0])
    rounds = pattern_rounds(plan, "compute", "fabric", bench_nodes(plan, "compute", None))
    pairs = [tuple(p) for r in rounds for p in r]
    assert sorted(pairs) == [("node01", "node02"), ("node03", "node04"), ("node05", "node01")]


def test_one_rail_only_its_nics_and_its_leaves() -> None:
    fab, rounds = fabric("scalable-unit", selection=Selection(rail=3))
    pairs = [p for r in rounds for p in r if isinstance(p, RailPair)]
    assert len(pairs) == 16 and {(p.rail, p.to_rail, p.path) for p in pairs} == {(3, 3, "same-leaf")}
    fab, rounds = fabric("multi-unit-large", selection=Selection(rail=3))
    pairs = [p for r in rounds for p in r if isinstance(p, RailPair)]
    leaves = {leaf for p in pairs for leaf in fab.leaves(p)}
    assert len(leaves) == 32 and {(p.rail, p.to_rail) for p in pairs} == {(3, 3)}  # rail 3 of each of 32 units
    assert {frozenset(fab.leaves(p)) for p in pairs if p.path != "same-leaf"} == {
        frozenset(two) for two in combinations(sorted(leaves), 2)}
    with pytest.raises(UsageError, match="no NIC on rail 0"):
        fabric("small-ethernet", selection=Selection(rail=0))


@pytest.mark.parametrize("name", ["scalable-unit", "multi-unit-large"])
def test_a_bounded_sample_still_spans_every_rail_leaf_class_it_can(name: str) -> None:
    fab, rounds = fabric(name, selection=Selection(pairs=5))
    pairs = [p for r in rounds for p in r if isinstance(p, RailPair)]
    assert len(pairs) == 5 and len({frozenset(ends(fab, p)) for p in pairs}) == 5
    assert {r for p in pairs for r in (p.rail, p.to_rail)} == set(range(8))
    assert {"same-leaf", "cross-leaf"} <= {p.path for p in pairs}
    if name == "scalable-unit":  # 8 leaves: four crossings reach them all
        assert {leaf for p in pairs for leaf in fab.leaves(p)} == {n.leaf for n in fab.nics}
    assert fabric(name, selection=Selection(pairs=5))[1] == rounds


def test_rail_and_pairs_belong_to_the_patterns_they_narrow() -> None:
    plan = plan_of("scalable-unit")
    nodes = bench_nodes(plan, "compute", None)
    with pytest.raises(UsageError, match="--pairs samples the fabric"):
        pattern_rounds(plan, "compute", "all-pairs", nodes, Selection(pairs=3))
    with pytest.raises(UsageError, match="--rail picks"):
        pattern_rounds(plan, "compute", "topo", nodes, Selection(rail=1))
    rail_only = pattern_rounds(plan, "compute", "rail", nodes, Selection(rail=2))
    assert {p.rail for r in rail_only for p in r if isinstance(p, RailPair)} == {2}
