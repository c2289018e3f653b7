"""Which pairs measure together: all pairs in rounds of disjoint pairs (the circle method),
rounds packed so no leaf's uplinks carry more flows than they can at line rate, incast, and rail
to rail (every rail at once, each node once per rail in a round)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

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


class RailPair(tuple[str, str]):
    """A pair measured on one rail: still `(source, destination)` to every caller of a Pair (it
    unpacks and indexes as one), with `.rail` naming the rail whose addresses a runner binds.
    Pairs on different rails are different pairs."""

    rail: int

    def __new__(cls, source: str, destination: str, rail: int) -> RailPair:
        pair = super().__new__(cls, (source, destination))
        pair.rail = rail
        return pair

    def __eq__(self, other: object) -> bool:
        return isinstance(other, tuple) and tuple(self) == tuple(other) and rail_of(other) == self.rail

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self[0], self[1], self.rail))

    def __repr__(self) -> str:
        return f"RailPair({self[0]!r}, {self[1]!r}, rail={self.rail})"

    def __getnewargs__(self) -> tuple[str, str, int]:  # copy and pickle rebuild it with its rail
        return self[0], self[1], self.rail


def rail_of(pair: object) -> int | None:
    """The rail a pair is measured on; None for a pair on the plane as a whole."""
    return pair.rail if isinstance(pair, RailPair) else None


def rail_rounds(rails_of: Mapping[str, Collection[int]]) -> list[Round]:
    """Rail i of every node to rail i of every other node (a rail-optimized plane: rail i of all
    nodes shares leaf i): per rail, every pair of the nodes on it once, by the circle method;
    round k carries round k of every rail at once, so each node appears at most once per rail in
    a round and all its rails are loaded together."""
    rails = sorted({r for node_rails in rails_of.values() for r in node_rails})
    per_rail = {r: all_pair_rounds([n for n, node_rails in rails_of.items() if r in node_rails]) for r in rails}
    count = max((len(rounds) for rounds in per_rail.values()), default=0)
    return [[RailPair(a, b, r) for r in rails if k < len(per_rail[r]) for a, b in per_rail[r][k]]
            for k in range(count)]
