"""Cross-field checks a schema cannot express; each returns SpecProblems located by key path."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import combinations

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import SpecProblem
from gpunet.model.spec import MTU_LIMITS, NodeGroup, PlaneName, Spec, nic_devices, plane_mtu
from gpunet.model.units import speed_gbps

Problems = Iterator[SpecProblem]


def spec_problems(spec: Spec) -> list[SpecProblem]:
    """Every semantic problem of a schema-valid spec, in file order."""
    checks: tuple[Callable[[Spec], Problems], ...] = (
        _overlapping_subnets, _gateways, _mtus, _unknown_planes, _unused_planes,
        _unique_groups, _unique_nodes, _devices, _bonds, _nic_speeds, _subnet_sizes,
    )
    return [problem for check in checks for problem in check(spec)]


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
    seen = NodeSet()
    for i, group in enumerate(spec.groups):
        again = NodeSet(group.nodes) & seen
        if again:
            yield SpecProblem(f"nodes {again} are already in an earlier group",
                              ("groups", i, "nodes"), "each node belongs to exactly one group")
        seen.update(group.nodes)


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
        elif nic.devices is not None and len(set(nic.devices)) != len(nic.devices):
            yield SpecProblem("a device name is listed twice",
                              ("groups", i, "nics", plane, "devices"), "device names must be unique")


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
        needed = sum(len(NodeSet(g.nodes)) * addressed_interfaces(g, name)
                     for g in spec.groups if name in g.nics)
        usable = plane.subnet.num_addresses - 2 - (plane.gateway is not None)
        if needed > usable:
            yield SpecProblem(
                f"{plane.subnet} has {max(usable, 0)} host addresses; this plane needs {needed}",
                ("planes", name, "subnet"),
                f"use a /{_prefix_for(needed + 3)} or larger",
            )


def _prefix_for(addresses: int) -> int:
    return 32 - max(addresses - 1, 1).bit_length()
