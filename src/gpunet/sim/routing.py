"""Paths over the Plan's cables as the fabric routes them: every switch forwards toward the
destination leaf over each cable to a neighbour one hop closer (shortest paths in the switch
graph, parallel cables each a next hop: what the lab's static ECMP routes and FRR install).

`hash`: each connection (one QP, one TCP stream: one 5-tuple) takes one next hop per switch, from
a hash of its key salted per switch and by the seed, as switches hash the 5-tuple with a seed of
their own. Connections can collide on a cable while others stay idle, as they do on a real fabric.
`spray`: ideal adaptive routing; a connection's traffic spreads evenly over every next hop at
every switch (fractions of it on each cable).

Distances toward a leaf depend only on the switches it hangs under, so one breadth-first search
serves every leaf with the same uplinks (one a pod on a healthy fabric)."""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from gpunet.sim.fabric import Nic, SimFabric

Routing = Literal["hash", "spray"]
MASK = (1 << 64) - 1
Path = dict[int, float]  # resource -> fraction of the connection's traffic on it


def mix(value: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of an integer."""
    value = (value + 0x9E3779B97F4A7C15) & MASK
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK
    return value ^ (value >> 31)


@dataclass
class Router:
    fabric: SimFabric
    mode: Routing = "hash"
    seed: int = 0
    _distances: dict[frozenset[str], dict[str, int]] = field(default_factory=dict)
    _hops: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    _salt: dict[str, int] = field(default_factory=dict)
    _spray: dict[tuple[str, str], Path] = field(default_factory=dict)
    _cores: dict[str, frozenset[str]] = field(default_factory=dict)
    _cores_above: dict[frozenset[str], frozenset[str]] = field(default_factory=dict)

    def path(self, src: Nic, dst: Nic, key: int) -> Path | None:
        """The resources connection `key` crosses from NIC to NIC (None: no path)."""
        if src.node == dst.node:
            return None
        if src.attached == dst.node:  # a direct cable
            return {src.up: 1.0}
        if src.attached not in self.fabric.neighbours or dst.attached not in self.fabric.neighbours:
            return None
        middle = self._between(src.attached, dst.attached, key)
        if middle is None:
            return None
        return {src.up: 1.0, **middle, dst.down: 1.0}

    def _between(self, leaf: str, target: str, key: int) -> Path | None:
        if leaf == target:
            return {}
        if self.mode == "spray":
            if (leaf, target) not in self._spray:
                self._spray[leaf, target] = self._sprayed(leaf, target) or {}
            return self._spray[leaf, target] or None
        return self._hashed(leaf, target, key)

    def _hashed(self, switch: str, target: str, key: int) -> Path | None:
        path: Path = {}
        while switch != target:
            hops = self.next_hops(switch, target)
            if not hops:
                return None
            resource, switch = hops[mix(key ^ self._salt_of(switch)) % len(hops)]
            path[resource] = 1.0
        return path

    def _sprayed(self, leaf: str, target: str) -> Path | None:
        """Fractions per cable: each switch splits what reaches it evenly over its next hops."""
        share: dict[str, float] = {leaf: 1.0}
        path: Path = {}
        order = deque([leaf])
        while order:
            switch = order.popleft()
            if switch == target:
                continue
            hops = self.next_hops(switch, target)
            if not hops:
                return None
            part = share.pop(switch) / len(hops)
            for resource, nxt in hops:
                path[resource] = path.get(resource, 0.0) + part
                if nxt not in share:
                    order.append(nxt)
                share[nxt] = share.get(nxt, 0.0) + part
        return path

    def next_hops(self, switch: str, target: str) -> list[tuple[int, str]]:
        """The cables out of `switch` to neighbours one hop closer to leaf `target`."""
        key = (switch, target)
        if key not in self._hops:
            self._hops[key] = self._up_down(switch, target) or self._searched(switch, target)
        return self._hops[key]

    def _up_down(self, switch: str, target: str) -> list[tuple[int, str]]:
        """Next hops of a leaf, spine or core where shortest paths go up and down (every used
        switch of a two- or three-tier Clos, a failed element or two included), read off the
        switch's own cables: the spines over `target` (S) and the cores over S (C) are one and two
        hops from it, a spine under C three, a leaf under S two and one under C's spines four.
        Empty where that does not hold: the full search answers then."""
        above = self._above(target)
        neighbours = self.fabric.neighbours[switch]
        if switch in above:
            return [(r, n) for r, n in neighbours if n == target]
        tier = self.fabric.switch_tier.get(switch)
        if tier == "core":
            return [(r, n) for r, n in neighbours if n in above]
        cores = self._cores_over(above)
        if tier == "spine":
            return [(r, n) for r, n in neighbours if n in cores]
        if tier == "leaf":
            return [(r, n) for r, n in neighbours if n in above] or [
                (r, n) for r, n in neighbours if self._cores_of(n) & cores]
        return []

    def _above(self, leaf: str) -> frozenset[str]:
        return frozenset(n for _, n in self.fabric.neighbours[leaf])

    def _cores_of(self, spine: str) -> frozenset[str]:
        if spine not in self._cores:
            self._cores[spine] = frozenset(n for _, n in self.fabric.neighbours[spine]
                                           if self.fabric.switch_tier.get(n) == "core")
        return self._cores[spine]

    def _cores_over(self, spines: frozenset[str]) -> frozenset[str]:
        if spines not in self._cores_above:
            self._cores_above[spines] = frozenset().union(*(self._cores_of(s) for s in spines))
        return self._cores_above[spines]

    def _searched(self, switch: str, target: str) -> list[tuple[int, str]]:
        """Next hops from a breadth-first search of the whole switch graph (one per set of spines over
        a leaf, kept): where paths run through other leaves after failures."""
        distance = self._distance_to(target)

        def hops_to(name: str) -> int | None:
            return 0 if name == target else distance.get(name)

        here = hops_to(switch)
        return [] if here is None else [
            (r, n) for r, n in self.fabric.neighbours[switch] if hops_to(n) == here - 1]

    def _distance_to(self, target: str) -> dict[str, int]:
        above = frozenset(n for _, n in self.fabric.neighbours[target])
        if above not in self._distances:
            self._distances[above] = self._search(above)
        return self._distances[above]

    def _search(self, above: frozenset[str]) -> dict[str, int]:
        """Hops from every switch to a leaf under `above` (the leaf itself left out: paths through
        it go through `above` anyway)."""
        distance = dict.fromkeys(above, 1)
        queue = deque(above)
        while queue:
            switch = queue.popleft()
            for _, nxt in self.fabric.neighbours[switch]:
                if nxt not in distance:
                    distance[nxt] = distance[switch] + 1
                    queue.append(nxt)
        return distance

    def _salt_of(self, switch: str) -> int:
        if switch not in self._salt:
            self._salt[switch] = mix(zlib.crc32(switch.encode()) ^ (self.seed << 32))
        return self._salt[switch]
