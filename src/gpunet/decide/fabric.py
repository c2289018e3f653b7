"""One plane's cables read once into what failure analysis counts with: Gb/s per switch up and
down, switch adjacency, pods (leaves under the same spines), and classes of nodes (nodes on the
same leaves, with the same cables to each, lose alike)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpunet.model.plan import Link, Plan

Cable = tuple[str, str, str, str]  # a device, a port, b device, b port
ClassKey = tuple[tuple[str, int], ...]  # (leaf, cables to it), sorted
Pod = frozenset[str]  # the spines over a leaf; a leaf without spines is a pod of its own
LINK_TIERS = {"direct", "node_leaf", "leaf_spine", "spine_core"}


def pairs_of(n: int) -> int:
    return n * (n - 1) // 2


@dataclass
class Fabric:
    plane: str
    rail_optimized: bool
    tier_of: dict[str, str] = field(default_factory=dict)  # switch -> leaf | spine | core
    totals: Counter[str] = field(default_factory=Counter)  # Gb/s per cable tier
    down: Counter[str] = field(default_factory=Counter)  # switch -> Gb/s toward the nodes
    up: Counter[str] = field(default_factory=Counter)  # switch -> Gb/s toward the core
    below: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))  # upper -> lower -> Gb/s
    # lower -> the switches above it, in cable order (a dict, not a set: the worst uplink among equals
    # is the first, the same in every run, whatever the hash seed)
    above: dict[str, dict[str, None]] = field(default_factory=lambda: defaultdict(dict))
    adjacency: Counter[tuple[str, str]] = field(default_factory=Counter)  # (lower, upper) switch -> cables
    pair_gbps: Counter[tuple[str, str]] = field(default_factory=Counter)
    first_cable: dict[tuple[str, str], Cable] = field(default_factory=dict)
    attach: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> leaf -> cables
    node_gbps: dict[str, int] = field(default_factory=dict)
    cables: int = 0
    direct: list[Link] = field(default_factory=list)
    rail_of: dict[str, int] = field(default_factory=dict)  # leaf -> rail
    rails: dict[int, int] = field(default_factory=dict)  # rail -> Gb/s: min(down, up) over its leaves
    # derived once every cable is in
    class_of: dict[str, ClassKey] = field(default_factory=dict)
    class_size: Counter[ClassKey] = field(default_factory=Counter)
    class_node: dict[ClassKey, str] = field(default_factory=dict)  # the first node of each class
    classes_at: dict[str, list[ClassKey]] = field(default_factory=lambda: defaultdict(list))
    shared: dict[ClassKey, int] = field(default_factory=dict)  # nodes sharing a leaf with the class's nodes
    pod_of: dict[str, Pod] = field(default_factory=dict)
    pod_nodes: Counter[Pod] = field(default_factory=Counter)
    pod_sharing: Counter[Pod] = field(default_factory=Counter)  # pairs in the pod that share a leaf
    pod_cores: dict[Pod, set[str]] = field(default_factory=lambda: defaultdict(set))
    core_pods: dict[str, set[Pod]] = field(default_factory=dict)
    core_nodes: dict[str, int] = field(default_factory=dict)  # nodes under the pods a core joins
    by_tier: dict[str, list[str]] = field(default_factory=dict)  # leaf/spine/core -> switches, in plan order
    _reach: dict[frozenset[str], int] = field(default_factory=dict)
    _reach_of: dict[str, int] = field(default_factory=dict)
    _lost: dict[tuple[tuple[str, int], ...], float] = field(default_factory=dict)

    @classmethod
    def read(cls, plan: Plan, plane: str, links: Iterable[Link] | None = None) -> Fabric:
        """The plane's fabric from the plan (`links`: the plane's cables, when the caller has them)."""
        style = next((p.style for p in plan.planes if p.name == plane), "")
        fabric = cls(plane, style == "rail-optimized")
        fabric.tier_of = {s.name: s.tier for s in plan.switches if s.plane == plane}
        fabric.rail_of = {s.name: s.rail for s in plan.switches if s.plane == plane and s.rail is not None}
        fabric._add_all(links if links is not None else (c for c in plan.links if c.plane == plane))
        fabric._derive()
        return fabric

    def _add_all(self, links: Iterable[Link]) -> None:
        """Cables between the same two devices are added together: one pass over 10^6 cables. A
        node's cables, most of them, are tallied right there (node -> leaf -> [cables, Gb/s])."""
        pairs: dict[tuple[str, str, str], list[int]] = {}
        nodes: dict[str, dict[str, list[int]]] = {}
        first = self.first_cable
        for link in links:
            a, b = link.a, link.b
            if link.tier == "node_leaf":
                leaves = nodes.get(a.device)
                if leaves is None:
                    leaves = nodes[a.device] = {}
                tally = leaves.get(b.device)
                if tally is None:
                    leaves[b.device] = [1, link.gbps]
                    first[a.device, b.device] = (a.device, a.port, b.device, b.port)
                else:
                    tally[0] += 1
                    tally[1] += link.gbps
                continue
            key = (link.tier, a.device, b.device)
            found = pairs.get(key)
            if found is None:
                pairs[key] = [1, link.gbps]
                first[a.device, b.device] = (a.device, a.port, b.device, b.port)
            else:
                found[0] += 1
                found[1] += link.gbps
            if link.tier == "direct":
                self.direct.append(link)
        for (tier, lower, upper), (count, gbps) in pairs.items():
            self._add(tier, lower, upper, count, gbps)
        self._add_nodes(nodes)

    def _add_nodes(self, nodes: dict[str, dict[str, list[int]]]) -> None:
        """The node-leaf cables, as _add would count them pair by pair."""
        down, total, cables = self.down, 0, 0
        for node, leaves in nodes.items():
            self.attach[node] = {leaf: count for leaf, (count, _) in leaves.items()}
            for leaf, (count, gbps) in leaves.items():
                down[leaf] += gbps
                total += gbps
                cables += count
                self.node_gbps[node] = gbps // count  # the last leaf's, as pair by pair
        if nodes:
            self.totals["node_leaf"] += total
        self.cables += cables

    def _add(self, tier: str, lower: str, upper: str, count: int, gbps: int) -> None:
        self.cables += count
        self.totals[tier] += gbps
        if tier == "direct":
            return
        self.down[upper] += gbps
        self.up[lower] += gbps
        self.below[upper][lower] += gbps
        self.above[lower][upper] = None
        self.adjacency[lower, upper] += count
        self.pair_gbps[lower, upper] += gbps

    def _derive(self) -> None:
        for name, tier in self.tier_of.items():
            self.by_tier.setdefault(tier, []).append(name)
        self.class_of = {n: tuple(sorted(c.items())) for n, c in self.attach.items()}
        self.class_size = Counter(self.class_of.values())
        for node, key in self.class_of.items():
            self.class_node.setdefault(key, node)
        for key in self.class_size:
            for leaf, _ in key:
                self.classes_at[leaf].append(key)
        self.shared = {key: self._sharing(key) for key in self.class_size}
        self._pods()
        self._rails()

    def _sharing(self, key: ClassKey) -> int:
        """Nodes on at least one leaf of this class (its own nodes included)."""
        near = {k for leaf, _ in key for k in self.classes_at[leaf]}
        return sum(self.class_size[k] for k in near)

    def _pods(self) -> None:
        for name, tier in self.tier_of.items():
            if tier == "leaf":
                self.pod_of[name] = frozenset(self.above.get(name) or {name})
        for name, tier in self.tier_of.items():
            if tier != "leaf":
                lower = next(iter(self.below.get(name, ())), "")
                self.pod_of[name] = self.pod_of.get(lower, frozenset({name}))
        sharing: Counter[Pod] = Counter()
        for key, n in self.class_size.items():
            pod = self.pod_of[key[0][0]]
            self.pod_nodes[pod] += n
            sharing[pod] += n * (self.shared[key] - 1)
        self.pod_sharing = Counter({pod: ordered // 2 for pod, ordered in sharing.items()})
        for spine in self.tier_switches("spine"):
            self.pod_cores[self.pod_of[spine]].update(self.above.get(spine, ()))
        self.core_pods = {core: {self.pod_of[s] for s in self.below[core]} for core in self.tier_switches("core")}
        self.core_nodes = {core: sum(self.pod_nodes[p] for p in pods) for core, pods in self.core_pods.items()}

    def _rails(self) -> None:
        if self.rail_optimized:
            for leaf, rail in self.rail_of.items():
                self.rails[rail] = self.rails.get(rail, 0) + min(self.down[leaf], self.up[leaf])

    @property
    def node_count(self) -> int:
        return len(self.attach) if not self.direct else len({c.a.device for c in self.direct} |
                                                              {c.b.device for c in self.direct})

    @property
    def cores(self) -> list[str]:
        return self.tier_switches("core")

    def tier_switches(self, tier: str) -> list[str]:
        return self.by_tier.get(tier, [])

    def reach(self, spine: str) -> int:
        """Nodes in other pods that reach this spine's pod through its cores (spines joining the same
        cores share the count of nodes under pods that touch them); kept per spine, which every
        uplink below it asks again."""
        known = self._reach_of.get(spine)
        if known is None:
            cores = frozenset(self.above.get(spine, ()))
            if cores not in self._reach:
                self._reach[cores] = sum(n for p, n in self.pod_nodes.items() if self.pod_cores[p] & cores)
            known = self._reach_of[spine] = self._reach[cores] - (self.pod_nodes[self.pod_of[spine]] if cores else 0)
        return known

    def rail_drops(self, uplinks: Iterable[tuple[str, int]]) -> dict[int, int]:
        """rail_drop(leaf, 0, gbps) summed over (leaf, gbps) pairs: what a spine's loss takes per rail."""
        total: dict[int, int] = {}
        for leaf, gbps in uplinks:
            rail = self.rail_of.get(leaf)
            if rail is None or rail not in self.rails:
                continue
            down, up = self.down[leaf], self.up[leaf]
            total[rail] = total.get(rail, 0) + min(down, up) - min(down, up - gbps)
        return total

    def rail_drop(self, leaf: str, down_lost: int, up_lost: int, whole: bool = False) -> dict[int, int]:
        """Gb/s a rail loses when its leaf loses down_lost toward the nodes and up_lost toward the
        spines (or the whole leaf)."""
        rail = self.rail_of.get(leaf)
        if rail is None or rail not in self.rails:
            return {}
        before = min(self.down[leaf], self.up[leaf])
        after = 0 if whole else min(self.down[leaf] - down_lost, self.up[leaf] - up_lost)
        return {rail: before - after}

    def rail_lost(self, drop: dict[int, int]) -> float:
        """Percent of the worst-hit rail's Gb/s that a drop per rail takes away."""
        return max((100.0 * g / self.rails[r] for r, g in drop.items() if self.rails.get(r)), default=0.0)

    def bisection_lost(self, lost: dict[str, int]) -> float:
        """Percent of the bisection that losing `lost` Gb/s per tier takes away (asked once a cable:
        the answers are kept)."""
        key = tuple(sorted(lost.items()))
        if key not in self._lost:
            before = self.bisection({})
            self._lost[key] = 100.0 * (1 - self.bisection(lost) / before) if before else 0.0
        return self._lost[key]

    def bisection(self, lost: dict[str, int]) -> float:
        """design/capacity.py's bisection of what is left: half the thinnest tier (direct: all of it)."""
        left = {tier: total - lost.get(tier, 0) for tier, total in self.totals.items()}
        if "direct" in left:
            return float(left["direct"])
        return min(left.values(), default=0) / 2

    def cable_of(self, node: str, leaf: str) -> Cable:
        return self.first_cable[node, leaf]

    @staticmethod
    def cable_name(cable: Cable) -> str:
        return f"{cable[0]}:{cable[1]} {cable[2]}:{cable[3]}"


def connected_pairs(f: Fabric, switch: str | None = None, cable: Cable | None = None) -> int:
    """Node pairs that still have a path with `switch` or one `cable` gone (hosts never forward)."""
    parent = {s: s for s in f.tier_of if s != switch}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    gone = (cable[0], cable[2]) if cable else None
    for (lower, upper), count in f.adjacency.items():
        if switch not in (lower, upper) and not ((lower, upper) == gone and count == 1):
            parent[find(lower)] = find(upper)
    groups: Counter[frozenset[str]] = Counter()
    for key, n in f.class_size.items():
        groups[frozenset(find(leaf) for leaf, _ in key if leaf != switch)] += n
    if cable is not None and cable[0] in f.class_of:  # the node that lost a cable is a class of its own
        key = f.class_of[cable[0]]
        groups[frozenset(find(leaf) for leaf, _ in key if leaf != switch)] -= 1
        kept = [leaf for leaf, count in key if leaf != cable[2] or count > 1]
        groups[frozenset(find(leaf) for leaf in kept)] += 1
    return _pairs_sharing(groups)


def _pairs_sharing(groups: Counter[frozenset[str]]) -> int:
    """Pairs of nodes whose sets of components meet."""
    groups = Counter({k: n for k, n in groups.items() if k and n})
    if all(len(k) == 1 for k in groups):
        per: Counter[str] = Counter()
        for k, n in groups.items():
            per[next(iter(k))] += n
        return sum(pairs_of(n) for n in per.values())
    items = list(groups.items())
    total = sum(pairs_of(n) for _, n in items)
    for i, (a, n) in enumerate(items):
        total += sum(n * m for b, m in items[i + 1:] if a & b)
    return total
