"""Routing of the Ethernet and RoCE fabrics gpunet lays out in tiers: eBGP only, as RFC 7938 builds
a Clos. Per routed plane every switch gets a loopback (also its router id) and an ASN, and every
switch-to-switch cable a /31; each is kept from the previous plan (by switch name, by cable), so
growth moves none of them.

ASNs (RFC 7938 section 5.2): the spines of a plane share one ASN (one per pod in three tiers),
the cores share one, each leaf has its own. The shared ASN is what stops a path leaf -> spine ->
leaf -> spine (a spine drops routes carrying its own ASN) without any policy. The default is
4-byte private ASNs (4200000000-4294967294, RFC 6996): 95 million of them, so every leaf of any
fabric gets its own and nothing needs `allowas-in`; 2-byte private ASNs (64512-65534) hold 1,023,
and a plane past that is refused with the way out rather than silently reusing ASNs.

Default pools, one slice per plane so planes never collide: loopbacks from 10.255.0.0/16 (a /18,
16,382 switches, per plane), /31s from 10.192.0.0/11 (a /13, 262,144 cables, per plane); the spec
sets its own with planes.X.routing."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network

from gpunet.design.addressing import ipv4_int
from gpunet.design.pools import IndexPool, sticky
from gpunet.errors import DesignError, SpecProblem
from gpunet.model.base import updated
from gpunet.model.plan import Link, Plan, PlaneRouting, Switch
from gpunet.model.spec import PlaneName, PlaneSpec
from gpunet.model.switch_spec import RoutingSpec, private_asn_range

ROUTED_STYLES = frozenset({"spine-leaf", "rail-optimized", "three-tier"})
PLANE_SLOT = {"management": 0, "compute": 1, "storage": 2, "oob": 3}
DEFAULT_LOOPBACKS = tuple(IPv4Network("10.255.0.0/16").subnets(new_prefix=18))
DEFAULT_P2P = tuple(IPv4Network("10.192.0.0/11").subnets(new_prefix=13))
DEFAULT_ASN, ASN_BLOCK = 4_200_000_000, 10_000_000  # plane k: 4200000000 + k * 10^7, 10^7 ASNs
SWITCH_TIERS = ("leaf_spine", "spine_core")


def is_routed(technology: str, style: str) -> bool:
    return technology != "infiniband" and style in ROUTED_STYLES


def plane_routing(name: PlaneName, spec: PlaneSpec, style: str) -> PlaneRouting | None:
    """The pools and options of a routed plane: the spec's, else the plane's default slice."""
    if not is_routed(spec.technology, style):
        return None
    asked, slot = spec.routing or RoutingSpec(), PLANE_SLOT[name]
    first = asked.asn_base if asked.asn_base is not None else DEFAULT_ASN + slot * ASN_BLOCK
    last = asked.asn_last
    if last is None:
        last = DEFAULT_ASN + (slot + 1) * ASN_BLOCK - 1 if asked.asn_base is None else _range_top(first)
    return PlaneRouting(loopbacks=str(asked.loopbacks or DEFAULT_LOOPBACKS[slot]),
                        p2p=str(asked.p2p or DEFAULT_P2P[slot]), asn_first=first, asn_last=last,
                        peering=asked.peering, bfd=asked.bfd)


def _range_top(asn: int) -> int:
    found = private_asn_range(asn)
    return found[1] if found else asn


def route_plane(plane: PlaneName, routing: PlaneRouting, switches: list[Switch], links: list[Link],
                previous: Plan | None) -> tuple[list[Switch], list[Link]]:
    """The plane's switches with ASN and loopback, its switch-to-switch cables with a /31."""
    before = [s for s in previous.switches if s.plane == plane] if previous else []
    asns, problems = _asns(plane, routing, switches, before)
    loopbacks, more = _loopbacks(plane, routing, switches, before)
    p2p, most = _p2p(plane, routing, links, previous)
    if problems + more + most:
        raise DesignError(problems + more + most)
    # trusted copies: the numbers are this module's own arithmetic, and the Plan's validator checks
    # every /31 and loopback once more
    routed = [updated(s, {"asn": asns[s.name], "loopback": loopbacks[s.name]}) for s in switches]
    return routed, [updated(c, {"p2p": p2p[_cable(c)]}) if _cable(c) in p2p else c for c in links]


def asn_group(switch: Switch) -> str:
    """Switches that share an ASN: the spines of a pod, the cores; a leaf alone. The spines of a
    two-tier plane are pod 0's: when it grows into three tiers they become pod 0 and keep their ASN."""
    if switch.tier == "spine":
        return f"spines-pod{switch.pod or 0}"
    return "cores" if switch.tier == "core" else switch.name


def _asns(plane: PlaneName, routing: PlaneRouting, switches: list[Switch],
          before: list[Switch]) -> tuple[dict[str, int], list[SpecProblem]]:
    """Shared groups first (cores, then spines by pod), then leaves in order; kept by group."""
    first, last = routing.asn_first, routing.asn_last
    kept = {asn_group(s): s.asn - first for s in before if s.asn is not None}
    order = sorted(switches, key=lambda s: {"core": 0, "spine": 1, "leaf": 2}[s.tier])
    chosen, left = sticky((asn_group(s) for s in order), kept, IndexPool(0, last - first))
    if left:
        leaves = sum(s.tier == "leaf" for s in switches)
        groups = len(chosen) + len(left)
        return {}, [SpecProblem(
            f"ASNs {first}-{last} hold {last - first + 1}; this plane needs {groups} ({leaves} leaves, one each, "
            f"and {groups - leaves} shared by the spines and cores)", ("planes", plane, "routing", "asn_base"),
            "use 4-byte private ASNs (asn_base: 4200000000, the default) or a wider asn_last; 2-byte private ASNs "
            "(64512-65534) run out past ~1,000 leaves (RFC 7938 5.2.2 then reuses them with allowas-in)")]
    return {s.name: first + chosen[asn_group(s)] for s in switches}, []


def _loopbacks(plane: PlaneName, routing: PlaneRouting, switches: list[Switch],
               before: list[Switch]) -> tuple[dict[str, str], list[SpecProblem]]:
    pool_net = IPv4Network(routing.loopbacks)
    base = int(pool_net.network_address)
    edge = 1 if pool_net.prefixlen <= 30 else 0  # the pool's own network and broadcast addresses stay out
    kept = {s.name: int(IPv4Address(s.loopback)) - base for s in before if s.loopback is not None}
    chosen, left = sticky((s.name for s in switches), kept, IndexPool(edge, pool_net.num_addresses - 1 - edge))
    if left:
        return {}, [SpecProblem(f"the loopback pool {pool_net} holds {len(chosen)} of this plane's {len(switches)} "
                                "switches", ("planes", plane, "routing", "loopbacks"),
                                f"use a /{_prefix_for(len(switches) + 2)} or larger")]
    return {name: str(IPv4Address(base + i)) for name, i in chosen.items()}, []


def _cable(link: Link) -> str:
    return f"{link.a.device}:{link.a.port}-{link.b.device}:{link.b.port}"


def _p2p(plane: PlaneName, routing: PlaneRouting, links: list[Link],
         previous: Plan | None) -> tuple[dict[str, str], list[SpecProblem]]:
    pool_net = IPv4Network(routing.p2p)
    base = int(pool_net.network_address)
    # a plan's /31s are networks in normal form (model/types.py), their address their first: read
    # without an IPv4Network each (10^5 of them at 1M GPUs)
    kept = {_cable(c): (_first_address(c.p2p) - base) // 2
            for c in (previous.links if previous else ()) if c.plane == plane and c.p2p is not None}
    cables = [_cable(c) for c in links if c.tier in SWITCH_TIERS]
    chosen, left = sticky(cables, kept, IndexPool(0, pool_net.num_addresses // 2 - 1))
    if left:
        return {}, [SpecProblem(f"the /31 pool {pool_net} holds {len(chosen)} of this plane's {len(cables)} "
                                "switch-to-switch cables", ("planes", plane, "routing", "p2p"),
                                f"use a /{_prefix_for(2 * len(cables))} or larger")]
    return {c: f"{IPv4Address(base + 2 * i)}/31" for c, i in chosen.items()}, []


def _first_address(network: str) -> int:
    value = ipv4_int(network.split("/", maxsplit=1)[0])
    return int(IPv4Network(network).network_address) if value is None else value


def _prefix_for(addresses: int) -> int:
    return 32 - max(addresses - 1, 1).bit_length()
