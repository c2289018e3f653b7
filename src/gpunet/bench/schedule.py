"""Which pairs measure together: all pairs in rounds of disjoint pairs (the circle method),
rounds packed so no leaf's uplinks carry more flows than they can at line rate, incast, rails."""

from __future__ import annotations

from collections.abc import Callable

Pair = tuple[str, str]
Round = list[Pair]


def all_pair_rounds(nodes: list[str]) -> list[Round]:
    """Every unordered pair exactly once, no node twice in a round: N-1 rounds for even N, N
    for odd N (one node sits out each round). Round-robin tournament (circle method)."""
    players: list[str | None] = list(nodes) + ([None] if len(nodes) % 2 else [])
    count = len(players)
    rounds = []
    for _ in range(count - 1):
        pairs = [(players[i], players[count - 1 - i]) for i in range(count // 2)]
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        players = [players[0], players[-1], *players[1:-1]]  # rotate all but the first
    return [r for r in rounds if r]


def topology_rounds(nodes: list[str], leaf_of: Callable[[str], str], uplink_flows: int) -> list[Round]:
    """All pairs, those under one leaf first, packed greedily into rounds where each node appears
    once and no leaf sends more than `uplink_flows` flows up to the spines (its uplink capacity
    in NIC-speed flows): no round asks a tier for more than the Plan says it carries."""
    pairs = [p for r in all_pair_rounds(nodes) for p in r]
    pairs.sort(key=lambda p: (leaf_of(p[0]) != leaf_of(p[1]), p))
    rounds: list[Round] = []
    while pairs:
        busy: set[str] = set()
        upward: dict[str, int] = {}
        current: Round = []
        for pair in list(pairs):
            crossing = leaf_of(pair[0]) != leaf_of(pair[1])
            leaves = {leaf_of(pair[0]), leaf_of(pair[1])} if crossing else set()
            if busy & set(pair) or any(upward.get(leaf, 0) >= uplink_flows for leaf in leaves):
                continue
            current.append(pair)
            busy |= set(pair)
            for leaf in leaves:
                upward[leaf] = upward.get(leaf, 0) + 1
            pairs.remove(pair)
        rounds.append(current)
    return rounds


def incast(nodes: list[str], target: str) -> list[Round]:
    """Everyone else sends to `target` at once: one round, many-to-one."""
    return [[(n, target) for n in nodes if n != target]]


def one_pair(a: str, b: str) -> list[Round]:
    return [[(a, b)]]
