"""Cross-field checks a schema cannot express; each returns SpecProblems located by key path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import combinations

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet

from gpunet.design.flows import port_conflicts
from gpunet.design.media import cabling_problems
from gpunet.errors import SpecProblem
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.spec import MTU_LIMITS, SWITCH_NAME, NodeGroup, PlaneName, Spec, nic_devices, plane_mtu
from gpunet.model.types import port_range
from gpunet.model.units import speed_gbps

Problems = Iterator[SpecProblem]


def spec_problems(spec: Spec) -> list[SpecProblem]:
    """Every semantic problem of a schema-valid spec, in file order."""
    checks: tuple[Callable[[Spec], Problems], ...] = (
        _overlapping_subnets, _gateways, _mtus, _unknown_planes, _unused_planes,
        _unique_groups, _unique_nodes, _switch_named_nodes, _devices, _unique_interfaces, _unique_hcas, _bonds,
        _nic_speeds, _subnet_sizes, _subnet6_sizes, _scheduler, _ports, _dual_homing, cabling_problems,
    )
    return [problem for check in checks for problem in check(spec)]


def spec_warnings(spec: Spec) -> list[SpecProblem]:
    """What a valid spec leaves out that a running cluster needs: said, not refused."""
    site, gpus = spec.site, sum(len(parse_nodeset(g.nodes)) for g in spec.groups if g.role == "gpu")
    found = []
    if site.monitoring is None:
        found.append(SpecProblem("no monitoring subnet: the firewalls will admit no Prometheus scrape (every "
                                 "exporter would show down)", ("site",), "add site.monitoring: <Prometheus "
                                 "address>/32"))
    if not site.ntp_servers:
        found.append(SpecProblem("no NTP servers: clocks drift apart (Slurm, Kerberos and logs need them to agree)",
                                 ("site",), "add site.ntp_servers: [<address>]"))
    found += list(_needless_third_tier(spec))
    switched = any(p.fabric.style != "direct" for p in spec.planes.values())
    if switched and spec.site.switch_management is None and not {"oob", "management"} & spec.planes.keys():
        found.append(SpecProblem("no oob or management plane and no site.switch_management: the switches get no "
                                 "management address", ("site",), "add site.switch_management: {subnet: CIDR}"))
    if site.scheduler is None and gpus > 1:
        found.append(SpecProblem("no scheduler: no Slurm ports are opened in the firewalls", ("site",),
                                 "add site.scheduler: {controller: <node running slurmctld>}"))
    return found


def _needless_third_tier(spec: Spec) -> Problems:
    """A forced three-tier plane whose endpoints two tiers of the same switches hold (k*k/2 at 1:1):
    a core layer and two more hops for the same bisection."""
    for name, plane in spec.planes.items():
        if plane.fabric.style != "three-tier":
            continue
        endpoints = sum(len(parse_nodeset(g.nodes)) * g.nics[name].count for g in spec.groups if name in g.nics)
        wanted = max(endpoints, plane.fabric.planned_nodes or 0)
        radix = plane.fabric.switch.radix
        if wanted <= radix * radix // 2:
            yield SpecProblem(f"three tiers for {wanted} endpoints, which two tiers of {radix}-port switches hold "
                              f"(up to {radix * radix // 2}): a core layer and two more hops for the same bisection",
                              ("planes", name, "fabric", "style"), "use spine-leaf (or auto) unless the plane will "
                              "grow past two tiers; planned_nodes sizes for growth")


_NO_DUAL_HOMING = {"single-switch": "has one switch", "rail-optimized": "puts each NIC on its own rail leaf already",
                   "direct": "has no switch"}


def _dual_homing(spec: Spec) -> Problems:
    for name, plane in spec.planes.items():
        why = _NO_DUAL_HOMING.get(plane.fabric.style)
        if plane.fabric.dual_homed and why:
            yield SpecProblem(f"dual_homed spreads a node's NICs over leaves; style {plane.fabric.style} {why}",
                              ("planes", name, "fabric", "dual_homed"), "use style spine-leaf (or auto)")


def _scheduler(spec: Spec) -> Problems:
    slurm = spec.site.scheduler
    if slurm is not None and not any(slurm.controller in parse_nodeset(g.nodes) for g in spec.groups):
        yield SpecProblem(f"controller {slurm.controller!r} is not a node of the spec", ("site", "scheduler",
                          "controller"), "name the node that runs slurmctld (a login or management node)")


def _ports(spec: Spec) -> Problems:
    ephemeral = port_range(spec.site.ephemeral_ports)
    if ephemeral is not None and ephemeral.low < 1024:
        yield SpecProblem(f"ephemeral ports {ephemeral} reach below 1024, the privileged ports",
                          ("site", "ephemeral_ports"), "e.g. 32768-59999")
    for key in port_conflicts(spec):
        yield SpecProblem(f"ephemeral ports {spec.site.ephemeral_ports} overlap scheduler.{key}: a connection's "
                          "own port could take a listening port", ("site", "ephemeral_ports"),
                          "keep them apart, e.g. ephemeral 32768-59999 and srun 60001-63000")


def _overlapping_subnets(spec: Spec) -> Problems:
    for (a, pa), (b, pb) in combinations(spec.planes.items(), 2):
        if pa.subnet.overlaps(pb.subnet):
            yield SpecProblem(
                f"subnet {pb.subnet} overlaps plane {a}'s {pa.subnet}",
                ("planes", b, "subnet"), "give each plane its own, disjoint subnet",
            )


def _gateways(spec: Spec) -> Problems:
    for name, plane in spec.planes.items():
        gw = plane.gateway
        if gw is None:
            continue
        if gw not in plane.subnet or gw in (plane.subnet.network_address, plane.subnet.broadcast_address):
            yield SpecProblem(
                f"gateway {gw} is not a host address of {plane.subnet}",
                ("planes", name, "gateway"), "pick a host address inside the plane's subnet",
            )


def _mtus(spec: Spec) -> Problems:
    for name, plane in spec.planes.items():
        low, high = MTU_LIMITS[plane.technology]
        mtu = plane_mtu(name, plane)
        if not low <= mtu <= high:
            yield SpecProblem(
                f"MTU {mtu} is outside {low}..{high} for {plane.technology}",
                ("planes", name, "mtu"),
                "InfiniBand IPoIB: 4092 (datagram) or up to 65520 (connected); "
                "Ethernet/RoCE: at most 9216, the usual switch maximum",
            )


def _unknown_planes(spec: Spec) -> Problems:
    for i, group in enumerate(spec.groups):
        for plane in group.nics:
            if plane not in spec.planes:
                yield SpecProblem(
                    f"NICs on plane {plane!r}, which is not defined",
                    ("groups", i, "nics", plane), f"define planes.{plane} or remove these NICs",
                )


def _unused_planes(spec: Spec) -> Problems:
    used = {plane for group in spec.groups for plane in group.nics}
    for name in spec.planes:
        if name not in used:
            yield SpecProblem(
                f"no group has NICs on plane {name!r}",
                ("planes", name), f"add nics.{name} to a group or remove the plane",
            )


def _unique_groups(spec: Spec) -> Problems:
    seen: set[str] = set()
    for i, group in enumerate(spec.groups):
        if group.name in seen:
            yield SpecProblem(f"group name {group.name!r} is used twice",
                              ("groups", i, "name"), "group names must be unique")
        seen.add(group.name)


def _unique_nodes(spec: Spec) -> Problems:
    seen = NodeSet(resolver=RESOLVER_NOGROUP)
    for i, group in enumerate(spec.groups):
        again = parse_nodeset(group.nodes) & seen
        if again:
            yield SpecProblem(f"nodes {again} are already in an earlier group",
                              ("groups", i, "nodes"), "each node belongs to exactly one group")
        seen.update(group.nodes)


def _switch_named_nodes(spec: Spec) -> Problems:
    """A node called comp-leaf001 would be both ends of its own cable in the plan."""
    for i, group in enumerate(spec.groups):
        clash = [n for n in parse_nodeset(group.nodes) if SWITCH_NAME.fullmatch(n)]
        if clash:
            yield SpecProblem(f"node name {clash[0]!r} is the form gpunet gives switches (PLANE-leafNNN, "
                              "-spineNNN, -coreNNN)", ("groups", i, "nodes"), "rename the node")


def _each_nic(spec: Spec) -> Iterator[tuple[int, NodeGroup, PlaneName]]:
    for i, group in enumerate(spec.groups):
        for plane in group.nics:
            if plane in spec.planes:
                yield i, group, plane


def _devices(spec: Spec) -> Problems:
    for i, group, plane in _each_nic(spec):
        nic = group.nics[plane]
        if nic.devices is not None and len(nic.devices) != nic.count:
            yield SpecProblem(
                f"{len(nic.devices)} device names for {nic.count} NIC(s)",
                ("groups", i, "nics", plane, "devices"), "list exactly `count` device names",
            )
        elif nic.hcas is not None and len(nic.hcas) != nic.count:
            yield SpecProblem(
                f"{len(nic.hcas)} HCA names for {nic.count} NIC(s)",
                ("groups", i, "nics", plane, "hcas"), "list one RDMA device per NIC, in NIC order",
            )
        elif nic.devices is not None and len(set(nic.devices)) != len(nic.devices):
            yield SpecProblem("a device name is listed twice",
                              ("groups", i, "nics", plane, "devices"), "device names must be unique")


def _unique_interfaces(spec: Spec) -> Problems:
    """A node's interface names across all its planes (NICs and bonds) must differ."""
    for i, group in enumerate(spec.groups):
        seen: dict[str, str] = {}
        for plane, nic in group.nics.items():
            if plane not in spec.planes:
                continue
            names = list(nic_devices(plane, spec.planes[plane], nic)) + ([nic.bond.name] if nic.bond else [])
            for name in names:
                if name in seen:
                    yield SpecProblem(f"interface {name!r} is on planes {seen[name]} and {plane}",
                                      ("groups", i, "nics", plane),
                                      "give each plane's NICs (and bonds) their own device names")
                seen.setdefault(name, plane)


def _unique_hcas(spec: Spec) -> Problems:
    """A node's RDMA devices across its planes must differ; unnamed ones are numbered on from the
    planes before (as design numbers them), so a named one can clash with a default."""
    for i, group in enumerate(spec.groups):
        seen: dict[str, str] = {}
        for plane in (p for p in spec.planes if p in group.nics and spec.planes[p].technology != "ethernet"):
            nic = group.nics[plane]
            names = nic.hcas or tuple(f"mlx5_{len(seen) + n}" for n in range(nic.count))
            for name in names:
                if name in seen:
                    yield SpecProblem(f"RDMA device {name!r} is on planes {seen[name]} and {plane}",
                                      ("groups", i, "nics", plane, "hcas"),
                                      "each NIC has its own RDMA device: list this plane's `hcas` explicitly")
                seen.setdefault(name, plane)


def _bonds(spec: Spec) -> Problems:
    for i, group, plane in _each_nic(spec):
        nic, path = group.nics[plane], ("groups", i, "nics", plane, "bond")
        if nic.bond is None:
            continue
        devices = nic_devices(plane, spec.planes[plane], nic)
        missing = [m for m in nic.bond.members or () if m not in devices]
        if missing:
            yield SpecProblem(f"bond member(s) {', '.join(missing)} are not NICs of this plane",
                              (*path, "members"), f"members must be among {', '.join(devices)}")
        if spec.planes[plane].fabric.style == "rail-optimized":
            yield SpecProblem("a bond on a rail-optimized plane puts its members on different rail "
                              "leaves, where LACP cannot form", path,
                              "use style spine-leaf (members share a leaf) or drop the bond")
        if spec.planes[plane].technology == "infiniband" and nic.bond.mode != "active-backup":
            yield SpecProblem(f"IPoIB bonds support only active-backup, not {nic.bond.mode}",
                              (*path, "mode"), "use mode: active-backup, or no bond on InfiniBand")


def _nic_speeds(spec: Spec) -> Problems:
    for i, group, plane in _each_nic(spec):
        nic, plane_spec = group.nics[plane], spec.planes[plane]
        nic_gbps = speed_gbps(nic.speed) if nic.speed else plane_spec.gbps
        port_gbps = plane_spec.fabric.switch.port_gbps
        if nic_gbps > port_gbps and plane_spec.fabric.style != "direct":
            yield SpecProblem(
                f"{nic_gbps}G NICs are faster than the {port_gbps}G switch ports",
                ("groups", i, "nics", plane, "speed"), "use a switch with faster ports",
            )


def addressed_interfaces(group: NodeGroup, plane: PlaneName) -> int:
    nic = group.nics[plane]
    if nic.bond is None:
        return nic.count
    return 1 + nic.count - len(nic.bond.members or range(nic.count))


def _subnet_sizes(spec: Spec) -> Problems:
    for name, plane in spec.planes.items():
        needed = sum(len(parse_nodeset(g.nodes)) * addressed_interfaces(g, name)
                     for g in spec.groups if name in g.nics)
        usable = plane.subnet.num_addresses - 2 - (plane.gateway is not None)
        if needed > usable:
            yield SpecProblem(
                f"{plane.subnet} has {max(usable, 0)} host addresses; this plane needs {needed}",
                ("planes", name, "subnet"),
                f"use a /{_prefix_for(needed + 3)} or larger",
            )


def _subnet6_sizes(spec: Spec) -> Problems:
    """IPv6 addresses reuse the IPv4 host index, so subnet6 must hold the IPv4 subnet's indexes."""
    for name, plane in spec.planes.items():
        if plane.subnet6 is not None and plane.subnet6.num_addresses < plane.subnet.num_addresses:
            yield SpecProblem(f"{plane.subnet6} is smaller than the IPv4 {plane.subnet}",
                              ("planes", name, "subnet6"),
                              f"use a /{128 - (32 - plane.subnet.prefixlen)} or larger (a /64 is usual)")
    for (a, pa), (b, pb) in combinations(spec.planes.items(), 2):
        if pa.subnet6 and pb.subnet6 and pa.subnet6.overlaps(pb.subnet6):
            yield SpecProblem(f"subnet6 {pb.subnet6} overlaps plane {a}'s {pa.subnet6}",
                              ("planes", b, "subnet6"), "give each plane its own IPv6 prefix")


def _prefix_for(addresses: int) -> int:
    return 32 - max(addresses - 1, 1).bit_length()
