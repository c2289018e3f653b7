"""The scheduler as pure functions: every pair once, disjoint rounds, tier capacity respected."""

from __future__ import annotations

import copy
import pickle
from itertools import combinations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpunet.bench import PATTERNS, node_rails, pair_interfaces, pattern_rounds
from gpunet.bench.schedule import RailPair, all_pair_rounds, incast, rail_of, rail_rounds, topology_rounds
from gpunet.errors import UsageError
from tests.render.rendered import example_plan


@given(st.integers(2, 40))
def test_all_pairs_once_in_n_minus_1_rounds_with_no_node_twice_in_a_round(n: int) -> None:
    nodes = [f"n{i:02d}" for i in range(n)]
    rounds = all_pair_rounds(nodes)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)  # odd N: one node sits out each round
    seen = sorted(tuple(sorted(p)) for r in rounds for p in r)
    assert seen == sorted(combinations(nodes, 2))
    for r in rounds:
        members = [x for p in r for x in p]
        assert len(members) == len(set(members))


@given(st.integers(2, 24), st.integers(1, 6), st.integers(1, 4))
def test_topology_rounds_respect_leaf_uplinks(n: int, per_leaf: int, uplink_flows: int) -> None:
    nodes = [f"n{i:02d}" for i in range(n)]
    leaf = {x: f"leaf{i // per_leaf}" for i, x in enumerate(nodes)}
    rounds = topology_rounds(nodes, leaf.__getitem__, uplink_flows)
    assert sorted(tuple(sorted(p)) for r in rounds for p in r) == sorted(combinations(nodes, 2))
    for r in rounds:
        members = [x for p in r for x in p]
        assert len(members) == len(set(members))
        up: dict[str, int] = {}
        for a, b in r:
            if leaf[a] != leaf[b]:
                for x in (leaf[a], leaf[b]):
                    up[x] = up.get(x, 0) + 1
        assert all(v <= uplink_flows for v in up.values())
    local = [i for i, r in enumerate(rounds) if any(leaf[a] == leaf[b] for a, b in r)]
    remote = [i for i, r in enumerate(rounds) if any(leaf[a] != leaf[b] for a, b in r)]
    assert not local or not remote or min(local) <= min(remote)  # under one leaf first


def test_incast_is_one_round_into_one_node() -> None:
    assert incast(["a", "b", "c"], "a") == [[("b", "a"), ("c", "a")]]


# node -> the subset of 8 rails it has (a node may miss a rail: a NIC down or not cabled)
rail_maps = st.dictionaries(st.sampled_from([f"n{i:02d}" for i in range(24)]),
                            st.sets(st.integers(0, 7), min_size=1), min_size=2)


@given(rail_maps)
def test_rail_rounds_measure_every_pair_on_every_shared_rail_once(rails_of: dict[str, set[int]]) -> None:
    rounds = rail_rounds(rails_of)
    seen = sorted((*sorted(p), rail_of(p)) for r in rounds for p in r)
    wanted = sorted((a, b, rail) for a, b in combinations(sorted(rails_of), 2)
                    for rail in rails_of[a] & rails_of[b])
    assert seen == wanted
    for r in rounds:
        on_rail = [(x, rail_of(p)) for p in r for x in p]
        assert len(on_rail) == len(set(on_rail))  # no node twice on one rail in a round
    busiest = max(len([n for n in rails_of if rail in rails_of[n]]) for rail in set().union(*rails_of.values()))
    assert len(rounds) == (0 if busiest < 2 else busiest - 1 if busiest % 2 == 0 else busiest)  # rails in parallel


def test_rail_pair_is_a_pair_that_keeps_its_rail() -> None:
    pair = RailPair("gpu001", "gpu002", 3)
    source, destination = pair
    assert (source, destination, pair[1], len(pair), pair.rail) == ("gpu001", "gpu002", "gpu002", 2, 3)
    assert pair != RailPair("gpu001", "gpu002", 4) and pair != ("gpu001", "gpu002")
    assert len({pair, RailPair("gpu001", "gpu002", 3), RailPair("gpu001", "gpu002", 4)}) == 2
    assert pickle.loads(pickle.dumps(pair)).rail == 3 and copy.copy(pair) == pair
    assert rail_of(pair) == 3 and rail_of(("a", "b")) is None
    assert repr(pair) == "RailPair('gpu001', 'gpu002', rail=3)"


def test_rail_pattern_on_the_scalable_unit_loads_all_eight_rails_each_round() -> None:
    plan = example_plan("scalable-unit")
    nodes = [f"gpu{i:03d}" for i in range(1, 5)]
    assert "rail" in PATTERNS and node_rails(plan, "compute", nodes) == {n: list(range(8)) for n in nodes}
    rounds = pattern_rounds(plan, "compute", "rail", nodes)
    assert len(rounds) == 3 and all(len(r) == 2 * 8 for r in rounds)
    first = rounds[0][0]
    a, b = pair_interfaces(plan, "compute", first)
    assert (a.name, b.name, a.rail, b.rail) == (f"ib{first.rail}", f"ib{first.rail}", first.rail, first.rail)
    assert a.hostname == f"{first[0]}-ib{first.rail}"
    plain = pair_interfaces(plan, "compute", ("gpu001", "gpu002"))
    assert [i.name for i in plain] == ["ib0", "ib0"]  # no rail: the first address on the plane


def test_rail_pattern_needs_rails() -> None:
    plan = example_plan("small-ethernet")
    with pytest.raises(UsageError, match="compute plane has no rails"):
        pattern_rounds(plan, "compute", "rail", ["node01", "node02"])
