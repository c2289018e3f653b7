"""Which pairs measure together: all pairs in rounds of disjoint pairs (the circle method),
rounds packed so no leaf's uplinks carry more flows than they can at line rate, incast, rail
to rail (every rail at once, each node once per rail in a round), and the fabric's cover (every
NIC under its own leaf, every pair of leaves crossed once)."""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

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
    """A pair measured between named NICs: still `(source, destination)` to every caller of a Pair
    (it unpacks and indexes as one), with `.rail` the source's rail and `.to_rail` the
    destination's (the same but for a pair across rails; None: the node's first NIC on the plane),
    and `.path` the pair's path class in the Plan (same-leaf, cross-leaf, cross-pod; None where
    not classified). Pairs between different NICs are different pairs."""

    rail: int | None
    to_rail: int | None
    path: str | None

    def __new__(cls, source: str, destination: str, rail: int | None, to_rail: int | None = None,
                path: str | None = None) -> RailPair:
        pair = super().__new__(cls, (source, destination))
        pair.rail, pair.to_rail, pair.path = rail, rail if to_rail is None else to_rail, path
        return pair

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, tuple) and tuple(self) == tuple(other) and rail_of(other) == self.rail
                and to_rail_of(other) == self.to_rail)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self[0], self[1], self.rail, self.to_rail))

    def __repr__(self) -> str:
        across = f", to_rail={self.to_rail}" if self.to_rail != self.rail else ""
        path = f", path={self.path!r}" if self.path else ""
        return f"RailPair({self[0]!r}, {self[1]!r}, rail={self.rail}{across}{path})"

    def __getnewargs__(self) -> tuple[str, str, int | None, int | None, str | None]:  # copy and pickle keep it whole
        return self[0], self[1], self.rail, self.to_rail, self.path


def rail_of(pair: object) -> int | None:
    """The rail a pair's source is measured on; None for a pair on the plane as a whole."""
    return pair.rail if isinstance(pair, RailPair) else None


def to_rail_of(pair: object) -> int | None:
    """The rail a pair's destination is measured on; None for a pair on the plane as a whole."""
    return pair.to_rail if isinstance(pair, RailPair) else None


def path_of(pair: object) -> str | None:
    return pair.path if isinstance(pair, RailPair) else None


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


@dataclass(frozen=True)
class Nic:
    """One end a pair can be measured from: a node's NIC on the plane (its rail, None on a plane
    without rails) and the leaf it is cabled to ("" where it hangs from none)."""

    node: str
    rail: int | None
    leaf: str


PathClass = Callable[[str, str], str]  # two leaves -> the pair's path class (same-leaf, cross-leaf, ...)


def fabric_pairs(nics: Iterable[Nic], path_class: PathClass) -> list[RailPair]:
    """The fabric's cover: under each leaf, its NICs two by two (each NIC in a pair, an odd one out
    with the leaf's first NIC of another node), then one pair for every two leaves, each leaf's
    NICs taken in turn so that its crossings spread over its nodes, directions alternating so both
    ways up and down are loaded. Never a node with itself, never a pair twice; the same NICs in,
    the same pairs out."""
    by_leaf: dict[str, list[Nic]] = defaultdict(list)
    for nic in nics:
        by_leaf[nic.leaf].append(nic)
    leaves = sorted(by_leaf)
    pairs = [_pair(a, b, path_class) for leaf in leaves for a, b in _under_one_leaf(by_leaf[leaf])]
    turn = dict.fromkeys(leaves, 0)
    for i, first in enumerate(leaves):
        for second in leaves[i + 1:]:
            found = _crossing(by_leaf[first], by_leaf[second], turn[first], turn[second])
            if found is None:
                continue  # both leaves hold NICs of one node only: it cannot measure itself
            a, b, turn[first], turn[second] = found
            if len(pairs) % 2:
                a, b = b, a
            pairs.append(_pair(a, b, path_class))
    return pairs


def _pair(a: Nic, b: Nic, path_class: PathClass) -> RailPair:
    return RailPair(a.node, b.node, a.rail, b.rail, path_class(a.leaf, b.leaf))


def _under_one_leaf(nics: list[Nic]) -> list[tuple[Nic, Nic]]:
    """Every NIC of a leaf in one pair with a NIC of another node: two by two in order, a NIC left
    over with the first NIC of another node."""
    pairs: list[tuple[Nic, Nic]] = []
    waiting: list[Nic] = []
    for nic in nics:
        partner = next((w for w in waiting if w.node != nic.node), None)
        if partner is None:
            waiting.append(nic)
            continue
        waiting.remove(partner)
        pairs.append((partner, nic))
    for nic in waiting:
        partner = next((other for other in nics if other.node != nic.node), None)
        if partner is not None and (partner, nic) not in pairs and (nic, partner) not in pairs:
            pairs.append((nic, partner))
    return pairs


def _crossing(first: list[Nic], second: list[Nic], turn_a: int, turn_b: int) -> tuple[Nic, Nic, int, int] | None:
    """The next NICs in turn of two leaves, of two different nodes, and each leaf's next turn."""
    for i in range(turn_a, turn_a + len(first)):
        a = first[i % len(first)]
        for j in range(turn_b, turn_b + len(second)):
            b = second[j % len(second)]
            if a.node != b.node:
                return a, b, i + 1, j + 1
    return None


def spanning_sample(pairs: list[RailPair], covers: Callable[[RailPair], frozenset[object]],
                    limit: int) -> list[RailPair]:
    """At most `limit` of the pairs, chosen one by one as the pair that adds the most of what
    `covers` names (leaves, rails, path classes) not yet measured, the earliest on a tie, so that a
    short run still spans the fabric; kept in their order. Lazy greedy: a pair's gain only shrinks."""
    items = [covers(p) for p in pairs]
    heap = [(-len(found), i) for i, found in enumerate(items)]
    heapq.heapify(heap)
    covered: set[object] = set()
    chosen: list[int] = []
    while heap and len(chosen) < limit:
        stored, i = heapq.heappop(heap)
        gain = len(items[i] - covered)
        if gain < -stored:
            heapq.heappush(heap, (-gain, i))
            continue
        chosen.append(i)
        covered |= items[i]
    return [pairs[i] for i in sorted(chosen)]


def packed_rounds(pairs: list[RailPair], leaves_of: Callable[[RailPair], tuple[str, str]],
                  uplink_flows: Callable[[str], int]) -> list[Round]:
    """The pairs in rounds, in order, greedily: a NIC in one pair of a round at most, and no leaf
    asked to carry more flows across its uplinks in a round than they carry at NIC speed."""
    packer = RoundPacker(leaves_of, uplink_flows)
    for pair in pairs:
        packer.add(pair)
    return packer.rounds


class RoundPacker:
    """Pairs put one by one into the first round they fit (first fit): the same rounds as filling
    round 1 from all the pairs in order, then round 2 from those left, and so on, but incremental,
    so a slice can grow pair by pair while its round count is known."""

    def __init__(self, leaves_of: Callable[[RailPair], tuple[str, str]], uplink_flows: Callable[[str], int]) -> None:
        self.leaves_of, self.uplink_flows = leaves_of, uplink_flows
        self.rounds: list[Round] = []
        self._busy: list[set[tuple[str, int | None]]] = []
        self._upward: list[dict[str, int]] = []

    def _footprint(self, pair: RailPair) -> tuple[set[tuple[str, int | None]], list[str]]:
        """The NICs the pair takes, and the leaves whose uplinks it crosses (none under one leaf)."""
        a, b = self.leaves_of(pair)
        return {(pair[0], pair.rail), (pair[1], pair.to_rail)}, [a, b] if a != b else []

    def round_for(self, pair: RailPair) -> int:
        """The index of the first round the pair fits in (len(rounds): a new one)."""
        ends, crossing = self._footprint(pair)
        for k, (busy, upward) in enumerate(zip(self._busy, self._upward, strict=True)):
            if not busy & ends and all(upward.get(leaf, 0) < self.uplink_flows(leaf) for leaf in crossing):
                return k
        return len(self.rounds)

    def add(self, pair: RailPair) -> None:
        k = self.round_for(pair)
        if k == len(self.rounds):
            self.rounds.append([])
            self._busy.append(set())
            self._upward.append({})
        ends, crossing = self._footprint(pair)
        self.rounds[k].append(pair)
        self._busy[k] |= ends
        for leaf in crossing:
            self._upward[k][leaf] = self._upward[k].get(leaf, 0) + 1
