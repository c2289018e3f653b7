"""Switch management ports in the lab, as a real fabric has them: every switch with a management
address in the Plan gets an `eth0` (a Linux NOS's management port: SONiC's, Cumulus') cabled to its
management plane's first switch, that address in lab numbering, and an sshd there with the lab's key,
so `gpunet localize --switches --lab ID` reads switch counters over SSH as it does on a real cluster.
The host (the admin's box) gets a port on that plane too when it is not the servers' management plane
(the Plan puts switch management on the out-of-band plane, from the top of its subnet)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from ipaddress import IPv4Interface, IPv4Network, ip_interface

from gpunet.lab.addressing import PlaneAddressing
from gpunet.lab.routes import Endpoint
from gpunet.lab.state import VethState as Veth
from gpunet.model.plan import Plan, Switch
from gpunet.render.switch.common import SWITCH_MTU

MGMT_IF = "eth0"
MGMT_PORT_PREFIX = "mgmt"  # the management switch's ports to the other switches' eth0: mgmt0, mgmt1, ...
MANAGEMENT_PORTS = (MGMT_IF, f"{MGMT_PORT_PREFIX}*")  # no LLDP there: they are not cables of the Plan
HOST_PORT = "host"  # the switch port the host's veth plugs into (each plane it is on)


@dataclass
class SwitchManagement:
    """What the lab adds for switch management; every field keyed by the Plan's names."""

    ports: list[Veth] = field(default_factory=list)  # switch eth0 <-> management switch mgmtN
    host_links: list[Veth] = field(default_factory=list)  # the host's ports on other management planes
    host_addresses: dict[str, IPv4Interface] = field(default_factory=dict)  # host interface -> address
    addresses: dict[str, IPv4Interface] = field(default_factory=dict)  # switch -> lab management address
    endpoints: dict[str, list[Endpoint]] = field(default_factory=lambda: defaultdict(list))  # routed planes
    links_up: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # switch -> ip lines
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Where:
    """A management plane as the lab built it."""

    plane: str
    leaf: str  # the plane's first switch: every management port is cabled to it
    bridged: bool  # a flat L2 switch (else a router that needs /32 routes)
    mtu: int


def plan_management(plan: Plan, addressing: dict[str, PlaneAddressing], ns: dict[str, str], lab_id: str, *,
                    host_plane: str, bridged: AbstractSet[str]) -> SwitchManagement:
    """The management ports of every switch whose management address lies in one of the Plan's
    planes; the others are said in a note (no lab plane to put them on)."""
    found = SwitchManagement()
    by_plane: dict[str, list[Switch]] = defaultdict(list)
    for switch in plan.switches:
        plane = _plane_of(plan, switch.management) if switch.management else None
        if switch.management and plane is None:
            found.notes.append(f"{switch.name}: its management address {switch.management} is in no plane of the "
                               "plan, so the lab gives it no management port (no SSH to it)")
        elif plane is not None:
            by_plane[plane].append(switch)
    mtu: dict[str, int] = {p.name: p.mtu for p in plan.planes}
    for number, (plane, switches) in enumerate(sorted(by_plane.items())):
        leaf = next((s.name for s in plan.switches if s.plane == plane and s.tier == "leaf"), None)
        if leaf is None:
            found.notes.append(f"the {plane} plane has no switch to cable the switches' management ports to")
            continue
        where = Where(plane, leaf, plane in bridged, mtu[plane])
        for index, switch in enumerate(switches):
            _attach(found, where, switch, addressing[plane].to_lab(str(switch.management)), (ns, index))
        if plane != host_plane:
            _attach_host(found, where, addressing[plane], ns, f"gn{lab_id}o{number}")
    return found


def _plane_of(plan: Plan, address: str) -> str | None:
    ip = ip_interface(address).ip
    return next((p.name for p in plan.planes if ip in IPv4Network(p.subnet)), None)


def _attach(found: SwitchManagement, where: Where, switch: Switch, address: IPv4Interface,
            slot: tuple[dict[str, str], int]) -> None:
    """One switch's management port (slot: the namespaces, and its index on the management switch)."""
    ns, index = slot
    found.addresses[switch.name] = address
    if switch.name == where.leaf:  # the management switch itself: on its bridge, or a router's loopback
        found.links_up[switch.name].append(f"addr add {address if where.bridged else f'{address.ip}/32'} dev "
                                           f"{'br0' if where.bridged else 'lo'}")
        return
    port = f"{MGMT_PORT_PREFIX}{index}"
    found.ports.append(Veth(a_ns=ns[switch.name], a_if=MGMT_IF, b_ns=ns[where.leaf], b_if=port, mtu=where.mtu,
                            mbit=0, plane=where.plane, a_end=f"{switch.name}:{MGMT_IF}",
                            b_end=f"{where.leaf}:{port}"))
    found.links_up[switch.name] += [f"link set dev {MGMT_IF} mtu {where.mtu} up", f"addr add {address} dev {MGMT_IF}"]
    _leaf_port_up(found, where, port, str(address.ip))


def _attach_host(found: SwitchManagement, where: Where, addressing: PlaneAddressing, ns: dict[str, str],
                 host_if: str) -> None:
    """The host's own port on a management plane it is not on yet: the last address of the plane's
    lab subnet, which the lab keeps clear of every planned index."""
    address = addressing.host_address(None)
    found.host_links.append(Veth(a_ns="", a_if=host_if, b_ns=ns[where.leaf], b_if=HOST_PORT, mtu=where.mtu, mbit=0,
                                 plane=where.plane, a_end="host", b_end=f"{where.leaf}:{HOST_PORT}"))
    found.host_addresses[host_if] = address
    _leaf_port_up(found, where, HOST_PORT, str(address.ip))


def _leaf_port_up(found: SwitchManagement, where: Where, port: str, address: str) -> None:
    """The management switch's port up at the switch MTU, as every switch port: a bridge port, or a
    routed port with a /32 route to the address."""
    master = " master br0" if where.bridged else ""
    found.links_up[where.leaf].append(f"link set dev {port} mtu {SWITCH_MTU}{master} up")
    if not where.bridged:
        found.endpoints[where.plane].append((where.leaf, port, address))
