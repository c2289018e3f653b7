"""The scheduler as pure functions: every pair once, disjoint rounds, tier capacity respected."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given
from hypothesis import strategies as st

from gpunet.bench.schedule import all_pair_rounds, incast, topology_rounds


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
