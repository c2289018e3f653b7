"""Interfaces of every node and their addresses: stable, sticky to the previous plan."""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, ip_address
from socket import AF_INET, inet_ntop, inet_pton

from gpunet.design.naming import plane_hostname
from gpunet.errors import DesignError, SpecProblem
from gpunet.model.base import updated
from gpunet.model.plan import Interface, Plan
from gpunet.model.spec import NodeGroup, PlaneName, PlaneSpec, nic_devices, plane_mtu
from gpunet.model.units import speed_gbps

AddressKey = tuple[str, str]  # (node, interface)


def plane_interfaces(plane: PlaneName, spec: PlaneSpec, group: NodeGroup, rails: bool,
                     first_hca: int = 0) -> list[Interface]:
    """A node's interfaces on one plane, unaddressed: NICs, then the bond over them (the same for
    every node of the group). Unnamed RDMA devices are numbered from first_hca, which the caller
    advances plane by plane: one node's HCAs are one namespace (mlx5_0..7 for the compute rails,
    mlx5_8.. for storage), never two planes' mlx5_0."""
    nic = group.nics[plane]
    devices = nic_devices(plane, spec, nic)
    gbps = speed_gbps(nic.speed) if nic.speed else spec.gbps
    bond = nic.bond
    members = tuple(d for d in devices if bond and d in (bond.members or devices))
    common = {"plane": plane, "mtu": plane_mtu(plane, spec), "speed_gbps": gbps}
    hcas = _hcas(spec, nic.hcas, len(devices), first_hca)
    nics = [
        Interface(name=dev, rail=i if rails else None, master=bond.name if bond and dev in members else None,
                  vlan=None if dev in members else spec.vlan, hca=hcas[i], **common)
        for i, dev in enumerate(devices)
    ]
    if bond is None:
        return nics
    lanes = 1 if bond.mode == "active-backup" else len(members)
    bond_gbps = {**common, "speed_gbps": gbps * lanes}
    bond_if = Interface(name=bond.name, bond=bond, members=members, cabled=False,
                        vlan=spec.vlan, **bond_gbps)
    return [*nics, bond_if]


def _hcas(spec: PlaneSpec, given: tuple[str, ...] | None, count: int, first: int) -> list[str | None]:
    if spec.technology == "ethernet":
        return [None] * count
    return list(given) if given else [f"mlx5_{first + i}" for i in range(count)]


def rdma_nic_count(spec: PlaneSpec, group: NodeGroup, plane: PlaneName) -> int:
    """How many RDMA devices the group's NICs on this plane add to each node."""
    return 0 if spec.technology == "ethernet" else len(nic_devices(plane, spec, group.nics[plane]))


def ipv4_int(text: str) -> int | None:
    """The address `text` names as an integer; None for IPv6. A dotted quad in normal form (every
    address a previous plan holds: a re-plan at 1M GPUs claims a million) is read by the C library
    and kept only where it writes it back the same; anything else is read as before."""
    try:
        packed = inet_pton(AF_INET, text)
    except (OSError, UnicodeError, ValueError):
        packed = None
    if packed is not None and inet_ntop(AF_INET, packed) == text:
        return int.from_bytes(packed, "big")
    ip = ip_address(text)  # anything else, as before (its ValueError included)
    return int(ip) if ip.version == 4 else None


class AddressPool:
    """Host indexes of one subnet: index i is network + i; the gateway is never handed out."""

    def __init__(self, subnet: IPv4Network, gateway: IPv4Address | None) -> None:
        self.subnet = subnet
        self.base = int(subnet.network_address)
        self.last = subnet.num_addresses - 2
        self.taken: set[int] = {int(gateway) - self.base} if gateway else set()
        self.cursor = 1

    def claim(self, address: str) -> int | None:
        """Keep an address from the previous plan if it still fits and is free."""
        value = ipv4_int(address.split("/", maxsplit=1)[0])
        if value is None:
            return None
        index = value - self.base
        if not 1 <= index <= self.last or index in self.taken:
            return None
        self.taken.add(index)
        return index

    def next_free(self) -> int | None:
        while self.cursor <= self.last and self.cursor in self.taken:
            self.cursor += 1
        if self.cursor > self.last:
            return None
        self.taken.add(self.cursor)
        return self.cursor


def previous_addresses(previous: Plan | None, plane: PlaneName) -> dict[AddressKey, str]:
    if previous is None:
        return {}
    return {
        (node.name, iface.name): iface.address
        for node in previous.nodes for iface in node.interfaces
        if iface.plane == plane and iface.address
    }


def assign_addresses(
    plane: PlaneName, spec: PlaneSpec, wanted: Iterable[AddressKey], previous: dict[AddressKey, str],
    reserved: Iterable[str] = (),
) -> dict[AddressKey, int]:
    """Host index per (node, interface): previous ones kept, new ones lowest free first; `reserved`
    addresses (switch management addresses of the previous plan) are never handed out."""
    pool = AddressPool(spec.subnet, spec.gateway)
    switches = sum(pool.claim(address) is not None for address in reserved)
    keys = list(wanted)
    chosen = {k: i for k in keys if k in previous and (i := pool.claim(previous[k])) is not None}
    for key in keys:
        if key not in chosen:
            index = pool.next_free()
            if index is None:
                held = f" ({switches} of its addresses are switch management addresses)" if switches else ""
                raise DesignError([SpecProblem(f"subnet {spec.subnet} is full{held}", ("planes", plane, "subnet"),
                                               "use a larger subnet" + (", or give the switches their own: "
                                               "site.switch_management" if switches else ""))])
            chosen[key] = index
    return chosen


def with_address(
    iface: Interface, node: str, index: int, spec: PlaneSpec, addressed_count: int
) -> Interface:
    v4 = _dotted(int(spec.subnet.network_address) + index)  # str(IPv4Address(...)) at a tenth of the cost
    v6 = None
    if spec.subnet6 is not None:
        v6 = f"{IPv6Address(int(spec.subnet6.network_address) + index)}/{spec.subnet6.prefixlen}"
    return updated(iface, {
        "address": f"{v4}/{spec.subnet.prefixlen}", "address6": v6,
        "hostname": plane_hostname(node, iface.plane, iface.name, addressed_count),
    })


def _dotted(address: int) -> str:
    return f"{address >> 24}.{(address >> 16) & 255}.{(address >> 8) & 255}.{address & 255}"
