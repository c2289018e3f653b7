"""A miswire for real: the far ends of two cables change places. The veth ends move between
namespaces (or are renamed within one switch), so LLDP, ARP and traffic all see the new wiring;
each port it lands in gets that port's own settings (MTU, bridge, addresses, routes, shaping).
Doing it again undoes it: that is how heal restores the plan's wiring."""

from __future__ import annotations

import json
import re

from gpunet.errors import LabUsageError
from gpunet.lab.blueprint import WIRE_SIZED
from gpunet.lab.netns import ip_batch, set_sysctls, tbf_line
from gpunet.lab.state import Fault, LabState, VethState
from gpunet.runner import CommandRunner

Slot = tuple[str, str]  # (namespace, interface) of a cable end
PARKED = ("gnmw0", "gnmw1")  # interim names while two ends change places
PLACEHOLDER = "gnmwh"  # holds an ifindex while a device moves in


def far_slot(cable: VethState, near: str) -> Slot:
    """The end of `cable` away from the end named `near` (DEVICE:PORT)."""
    return (cable.b_ns, cable.b_if) if near == cable.a_end else (cable.a_ns, cable.a_if)


def miswire_fault(state: LabState, first: VethState, second: VethState, near: tuple[str, str]) -> Fault:
    if first.cable == second.cable:
        raise LabUsageError("--miswire needs two different cables")
    slots = far_slot(first, near[0]), far_slot(second, near[1])
    if not all(ns for ns, _ in slots):
        raise LabUsageError("the far end of that cable is the host's own veth: name the other end")
    busy = {f.cable for f in state.faults} | {f.other for f in state.faults if f.other}
    if {first.cable, second.cable} & busy:
        raise LabUsageError("a cable with a fault already: `gpunet lab heal` it first")
    return Fault(cable=first.cable, kind="miswire", near=near, other=second.cable)


def swap_far_ends(state: LabState, fault: Fault, run: CommandRunner) -> None:
    """Exchange the far ends of the fault's two cables (an involution: twice is the plan again)."""
    assert fault.near is not None and fault.other is not None
    by_cable = {v.cable: v for v in state.veths}
    one, two = far_slot(by_cable[fault.cable], fault.near[0]), far_slot(by_cable[fault.other], fault.near[1])
    if one[0] == two[0]:
        _rename_pair(one[0], one[1], two[1], run)
    else:
        index = _ifindex(one, run)
        _move(one, (two[0], PARKED[0]), run)  # `two` still holds its index there: no reuse
        # A device keeps its ifindex when it is free in the namespace it enters, so the second one
        # could take the index the first just left, and lldpd (keyed by ifindex, same name) would
        # keep its socket on the departed device: hold that index until the second one is in.
        ip_batch(run, [f"link add {PLACEHOLDER} index {index} type veth peer name {PLACEHOLDER}p"], one[0])
        _move(two, (one[0], PARKED[1]), run)
        ip_batch(run, [f"link del {PLACEHOLDER}", f"link set dev {PARKED[1]} name {one[1]}"], one[0])
        ip_batch(run, [f"link set dev {PARKED[0]} name {two[1]}"], two[0])
    for slot, cable in ((one, by_cable[fault.cable]), (two, by_cable[fault.other])):
        _configure(state, slot, cable, run)


def expected_neighbours(state: LabState, fault: Fault, *, swapped: bool) -> dict[Slot, str]:
    """Slot -> "device:interface" LLDP must show there, at all four ends of the two cables, with
    the far ends swapped or not (a stale neighbour on either side would be a wrong reading)."""
    assert fault.near is not None and fault.other is not None
    by_cable = {v.cable: v for v in state.veths}
    cables = by_cable[fault.cable], by_cable[fault.other]
    nears = [_near_slot(cable, near) for cable, near in zip(cables, fault.near, strict=True)]
    fars = [far_slot(cable, near) for cable, near in zip(cables, fault.near, strict=True)]
    if swapped:
        fars.reverse()
    devices = {ns: ns.removeprefix(f"gn{state.lab_id}-") for ns in state.namespaces}
    pairs = list(zip(nears, fars, strict=True))
    return {a: f"{devices[b[0]]}:{b[1]}" for near, far in pairs for a, b in ((near, far), (far, near))}


def _near_slot(cable: VethState, near: str) -> Slot:
    return (cable.a_ns, cable.a_if) if near == cable.a_end else (cable.b_ns, cable.b_if)


def _ifindex(slot: Slot, run: CommandRunner) -> int:
    shown = json.loads(run(["ip", "-n", slot[0], "-j", "link", "show", "dev", slot[1]]).stdout)
    return int(shown[0]["ifindex"])


def _rename_pair(ns: str, first: str, second: str, run: CommandRunner) -> None:
    ip_batch(run, [f"link set dev {first} down", f"link set dev {second} down",
                   f"link set dev {first} name {PARKED[0]}", f"link set dev {second} name {first}",
                   f"link set dev {PARKED[0]} name {second}"], ns)


def _move(slot: Slot, to: Slot, run: CommandRunner) -> None:
    ns, interface = slot
    ip_batch(run, [f"link set dev {interface} down", f"link set dev {interface} name {to[1]}",
                   f"link set dev {to[1]} netns {to[0]}"], ns)


def _configure(state: LabState, slot: Slot, cable: VethState, run: CommandRunner) -> None:
    """The port's own settings on whatever device now sits in it, as `lab up` gave them."""
    ns, interface = slot
    kind = state.namespaces.get(ns, "server")
    via = re.compile(rf" dev {re.escape(interface)}(\s|$)")
    master = " master br0" if kind == "bridge" else ""
    lines = [f"link set dev {interface} mtu {cable.mtu}{WIRE_SIZED}{master} up"]
    lines += [a for a in state.addresses.get(ns, ()) if via.search(a)]
    lines += [r.replace("route add ", "route replace ", 1) for r in state.routes.get(ns, ()) if via.search(r)]
    ip_batch(run, [f"addr flush dev {interface}", *lines], ns)
    if cable.mbit > 0:
        run(["tc", "-n", ns, *tbf_line(interface, cable.mbit, cable.mtu).split()])
    if kind == "router":
        set_sysctls(ns, {f"net.ipv4.neigh.{interface}.proxy_delay": "0"})
