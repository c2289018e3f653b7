"""Switch management addresses, and the pools of a routed fabric checked against each other.

Where a switch's management port (eth0/mgmt0) gets its address: `site.switch_management` when the
spec gives that subnet, else the oob plane's subnet (the out-of-band network is where switch
management ports are cabled, beside the BMCs), else the management plane's. On a plane's subnet
the switches take addresses from the top down while node addresses are handed out from the bottom
up, both kept from the previous plan: neither side moves the other as the cluster grows, node
addresses keep their values from before switches had any, and the two meet only when the subnet
is full, which is refused with the way out."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from itertools import combinations

from gpunet.design.addressing import ipv4_int
from gpunet.design.pools import IndexPool, sticky
from gpunet.errors import DesignError, SpecProblem
from gpunet.model.plan import Interface, Plan, PlaneRouting, Switch
from gpunet.model.spec import PlaneName, Spec

KeyPath = tuple[str | int, ...]


def management_home(spec: Spec) -> tuple[IPv4Network, IPv4Address | None, KeyPath] | None:
    """The subnet switch management addresses come from, its gateway, and its key in the spec."""
    own = spec.site.switch_management
    if own is not None:
        return own.subnet, own.gateway, ("site", "switch_management", "subnet")
    plane = next((p for p in ("oob", "management") if p in spec.planes), None)
    if plane is None:
        return None
    return spec.planes[plane].subnet, spec.planes[plane].gateway, ("planes", plane, "subnet")


def reserved_for_switches(spec: Spec, plane: PlaneName, previous: Plan | None) -> set[str]:
    """Addresses of this plane's subnet the previous plan gave switches: node addresses skip them."""
    home = management_home(spec)
    if previous is None or home is None or home[0] != spec.planes[plane].subnet:
        return set()
    return {s.management.split("/")[0] for s in previous.switches if s.management}


def with_management(spec: Spec, switches: list[Switch], interfaces: dict[str, list[Interface]],
                    previous: Plan | None) -> list[Switch]:
    """Every switch with its management address (none when the spec has no place for them)."""
    home = management_home(spec)
    if home is None or not switches:
        return switches
    subnet, gateway, key = home
    base = int(subnet.network_address)
    # Node addresses share the subnet only when it is a plane's (the own subnet overlaps none).
    plane = key[1] if key[0] == "planes" else None
    taken = {_address(i.address) - base for ifs in interfaces.values() for i in ifs if i.plane == plane and i.address}
    taken |= {int(gateway) - base} if gateway else set()
    kept = {s.name: address - base for s in (previous.switches if previous else ())
            if s.management and int(subnet.network_address) <= (address := _address(s.management))
            <= int(subnet.broadcast_address)}
    downward = key[0] == "planes"  # sharing a plane's subnet with nodes: from the top
    pool = IndexPool(1, subnet.num_addresses - 2, taken, downward=downward)
    chosen, left = sticky((s.name for s in switches), kept, pool)
    if left:
        raise DesignError([SpecProblem(
            f"{subnet} has no management address left for {len(left)} of {len(switches)} switches (nodes hold "
            f"{len(taken)})", key, "use a larger subnet, or give the switches their own: site.switch_management: "
            "{subnet: CIDR}")])
    return [s.model_copy(update={"management": f"{IPv4Address(base + chosen[s.name])}/{subnet.prefixlen}"})
            for s in switches]


def _address(interface: str) -> int:
    """10.0.0.5/24 -> the address as an integer (26 644 switches' at 1M GPUs, without an IPv4Interface each)."""
    value = ipv4_int(interface.split("/", maxsplit=1)[0])
    return int(IPv4Interface(interface).ip) if value is None else value


def pool_problems(spec: Spec, routing: dict[PlaneName, PlaneRouting]) -> list[SpecProblem]:
    """Routing pools and the switch management subnet where they overlap a plane's subnet or each other."""
    blocks = list(_blocks(spec, routing))
    found = []
    for (name_a, net_a, key_a), (name_b, net_b, key_b) in combinations(blocks, 2):
        both_planes = key_a[0] == key_b[0] == "planes" and key_a[-1] == key_b[-1] == "subnet"
        if net_a.overlaps(net_b) and not both_planes:  # planes among themselves: spec/checks.py
            found.append(SpecProblem(f"{name_b} {net_b} overlaps {name_a} {net_a}", key_b,
                                     "give every pool a block of its own, outside every plane's subnet"))
    return found


def _blocks(spec: Spec, routing: dict[PlaneName, PlaneRouting]) -> Iterator[tuple[str, IPv4Network, KeyPath]]:
    """Subnets first, then pools: each overlap is reported at the pool's key."""
    for name, plane in spec.planes.items():
        yield f"plane {name}'s subnet", plane.subnet, ("planes", name, "subnet")
    if spec.site.switch_management is not None:
        yield "the switch management subnet", spec.site.switch_management.subnet, ("site", "switch_management")
    for name, r in routing.items():
        asked = spec.planes[name].routing
        for pool in ("loopbacks", "p2p"):
            default = "" if asked is not None and getattr(asked, pool) is not None else "default "
            yield f"plane {name}'s {default}{pool} pool", IPv4Network(getattr(r, pool)), ("planes", name, "routing",
                                                                                         pool)
