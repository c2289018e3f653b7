"""What a pair should carry, from the Plan: the bottleneck link on the path times TCP's
protocol efficiency at the plane MTU."""

from __future__ import annotations

from gpunet.model.plan import Interface, Plan

TCP_IP_HEADERS = 52  # IPv4 20 + TCP 20 + timestamps 12, inside every MTU-sized packet
WIRE_FRAMING = 38  # Ethernet header 14 + FCS 4 + preamble 8 + inter-frame gap 12, outside the MTU
SHAPER_FRAMING = 14  # a tbf shaper (the lab) counts only the 14-byte Ethernet header
BELOW_EXPECTED = 0.85  # flagged under 85 % of expected (the lab's acceptance: within 15 %)


def tcp_efficiency(mtu: int, framing: int = WIRE_FRAMING) -> float:
    """Goodput per line rate for full-size TCP segments: (MTU - headers) / (MTU + framing);
    9000 gives 0.990 on a wire, 1500 gives 0.941."""
    return (mtu - TCP_IP_HEADERS) / (mtu + framing)


def plane_interface(plan: Plan, node: str, plane: str) -> Interface:
    found = next((i for n in plan.nodes if n.name == node for i in n.interfaces
                  if i.plane == plane and i.address), None)
    if found is None:
        raise KeyError(f"{node} has no address on the {plane} plane")
    return found


def expected_gbps(plan: Plan, source: str, target: str, plane: str, scale: float | None = None) -> float:
    """One TCP flow source -> target: the slower end's link (a 1:1 fabric's uplinks are at least as
    fast; a loaded oversubscribed tier is the scheduler's business) at TCP efficiency. With
    `scale` (lab Mbit/s per plan Gbit/s), the shaped lab rate in Gb/s."""
    a, b = plane_interface(plan, source, plane), plane_interface(plan, target, plane)
    line = min(a.speed_gbps, b.speed_gbps)
    if scale is None:
        return line * tcp_efficiency(a.mtu)
    return line * scale / 1000 * tcp_efficiency(a.mtu, SHAPER_FRAMING)
