"""Fabric sizing: how many leaves, spines and cores, and how they are wired, from radix and
oversubscription. Pure arithmetic; every count is the fewest that keeps ECMP balanced
(each leaf has the same number of links to every spine of its pod, and each spine the same
number to every core of its group)."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil


@dataclass(frozen=True)
class LeafShape:
    """How nodes attach: `slots_per_group` node slots share `leaves_per_group` leaves."""

    leaves_per_group: int  # rails for a rail-optimized fabric, else 1
    slots_per_group: int  # nodes per scalable unit (rail) or per leaf
    nics_per_slot: int  # NICs of one node on one leaf (1 when rail-optimized)
    down_ports: int  # node-facing ports used per leaf
    up_ports: int  # uplinks per leaf


@dataclass(frozen=True)
class UpperShape:
    """Spine and core layers; `tiers` is 1 (single switch), 2 or 3."""

    tiers: int
    leaves: int
    leaves_per_pod: int = 0
    pods: int = 0
    spines_per_pod: int = 0
    links_leaf_spine: int = 0  # per leaf-spine pair
    spine_down_ports: int = 0
    spine_up_ports: int = 0
    cores_per_group: int = 0  # a core group serves spine j of every pod
    links_spine_core: int = 0  # per spine-core pair
    last_pod_spines: int = 0  # a partly filled last pod needs fewer spines (0: a full pod)

    @property
    def spines(self) -> int:
        return (self.pods - 1) * self.spines_per_pod + self.spines_in(self.pods - 1) if self.pods else 0

    def spines_in(self, pod: int) -> int:
        return self.last_pod_spines if pod == self.pods - 1 and self.last_pod_spines else self.spines_per_pod

    def links_per_pair(self, pod: int) -> int:
        """Cables between a leaf of `pod` and each spine of it: the leaf's uplinks spread evenly."""
        return self.links_leaf_spine * self.spines_per_pod // self.spines_in(pod)

    @property
    def cores(self) -> int:
        return self.spines_per_pod * self.cores_per_group if self.tiers == 3 else 0


class SizingError(ValueError):
    """The radix cannot hold the asked shape; the message says why."""


def max_down_ports(radix: int, ratio: float, down_gbps: int, up_gbps: int) -> int:
    """Most node-facing ports that leave enough uplinks for down:up <= ratio."""
    best = 0
    for down in range(1, radix):
        if down + uplinks_needed(down, ratio, down_gbps, up_gbps) <= radix:
            best = down
    return best


def uplinks_needed(down: int, ratio: float, down_gbps: int, up_gbps: int) -> int:
    """Uplinks for `down` ports at `down_gbps` to stay within ratio (a tiny epsilon absorbs
    float noise such as 3:1 written as 3.0000001)."""
    return max(1, ceil(down * down_gbps / (ratio * up_gbps) - 1e-9))


def smallest_balanced_divisor(
    links: int, fan_in: int, capacity: int, at_least: int = 1
) -> int | None:
    """Fewest upper switches n dividing `links` such that fan_in * (links / n) <= capacity."""
    for n in range(min(at_least, links), links + 1):
        if links % n == 0 and fan_in * (links // n) <= capacity:
            return n
    return None


def leaf_shape(
    *, rails: int, nics: int, nodes_per_leaf: int | None, radix: int, ratio: float,
    nic_gbps: int, port_gbps: int, min_spines: int = 1,
) -> LeafShape:
    """Leaf ports for `rails` > 0 (one leaf per rail per unit) or plain leaves holding whole nodes.
    Without nodes_per_leaf, the most node ports whose uplink count spreads evenly over
    min_spines spines (51 down + 13 up would force 13 spines; 50 + 14 allows 2)."""
    per_node = 1 if rails else nics
    d_max = max_down_ports(radix, ratio, nic_gbps, port_gbps)
    wanted = [nodes_per_leaf] if nodes_per_leaf else range(d_max // per_node, 0, -1)
    fallback = None
    for slots in wanted:
        down = slots * per_node
        need = uplinks_needed(down, ratio, nic_gbps, port_gbps)
        if down + need > radix:
            continue
        even = [u for u in range(need, radix - down + 1) if u % min_spines == 0]
        if even:
            return LeafShape(rails or 1, slots, per_node, down, even[0])
        fallback = fallback or LeafShape(rails or 1, slots, per_node, down, need)
    if fallback is not None:
        return fallback
    slots = nodes_per_leaf or 1
    raise SizingError(
        f"a {radix}-port leaf cannot hold {slots} node(s) of {per_node} NIC(s) at {ratio:g}:1 "
        f"(needs {slots * per_node} down + {uplinks_needed(slots * per_node, ratio, nic_gbps, port_gbps)} up ports)"
    )


def two_tier(leaves: int, up: int, radix: int, min_spines: int = 1) -> UpperShape | None:
    spines = smallest_balanced_divisor(up, leaves, radix, min_spines)
    if spines is None:
        return None
    return UpperShape(
        tiers=2, leaves=leaves, leaves_per_pod=leaves, pods=1, spines_per_pod=spines,
        links_leaf_spine=up // spines, spine_down_ports=leaves * (up // spines),
    )


def three_tier(
    *, leaves: int, up: int, radix: int, ratio: float, leaves_per_group: int, min_spines: int = 1
) -> UpperShape:
    """Pods of leaves under their own spines; spine j of every pod joins core group j."""
    ds_max = max_down_ports(radix, ratio, 1, 1)
    per_pod = min(ds_max, leaves)  # with `up` spines per pod, one link per leaf-spine pair
    per_pod -= per_pod % leaves_per_group  # whole scalable units per pod
    if per_pod < 1:
        raise SizingError(f"a {radix}-port spine cannot hold one unit of {leaves_per_group} leaves")
    spines_per_pod = smallest_balanced_divisor(up, per_pod, ds_max, min_spines)
    assert spines_per_pod is not None  # per_pod * 1 link <= ds_max by construction
    lls = up // spines_per_pod
    spine_down = per_pod * lls
    spine_up = uplinks_needed(spine_down, ratio, 1, 1)
    pods = ceil(leaves / per_pod)
    in_last = leaves - (pods - 1) * per_pod
    last_spines = smallest_balanced_divisor(up, in_last, ds_max, min_spines) if in_last < per_pod else 0
    cores = smallest_balanced_divisor(spine_up, pods, radix)
    if cores is None:
        raise SizingError(
            f"{pods} pods exceed what {radix}-port cores join in three tiers "
            f"(at most {radix} pods, {radix ** 3 // 4} endpoints at 1:1)"
        )
    return UpperShape(
        tiers=3, leaves=leaves, leaves_per_pod=per_pod, pods=pods, spines_per_pod=spines_per_pod,
        links_leaf_spine=lls, spine_down_ports=spine_down, spine_up_ports=spine_up,
        cores_per_group=cores, links_spine_core=spine_up // cores, last_pod_spines=last_spines or 0,
    )


def upper_shape(
    *, leaves: int, up: int, radix: int, ratio: float, leaves_per_group: int, min_tiers: int,
    min_spines: int = 1,
) -> UpperShape:
    """Two tiers when they hold the leaves (and three are not forced), else three."""
    if min_tiers <= 2:
        shape = two_tier(leaves, up, radix, min_spines)
        if shape is not None:
            return shape
    return three_tier(leaves=leaves, up=up, radix=radix, ratio=ratio, leaves_per_group=leaves_per_group,
                      min_spines=min_spines)
