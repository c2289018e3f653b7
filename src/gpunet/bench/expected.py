"""What a pair should carry, from the Plan: the bottleneck link on the path times TCP's
protocol efficiency at the plane MTU."""

from __future__ import annotations

from gpunet.model.plan import Interface

TCP_IP_HEADERS = 52  # IPv4 20 + TCP 20 + timestamps 12, inside every MTU-sized packet
WIRE_FRAMING = 38  # Ethernet header 14 + FCS 4 + preamble 8 + inter-frame gap 12, outside the MTU
SHAPER_FRAMING = 14  # a tbf shaper (the lab) counts only the 14-byte Ethernet header
BELOW_EXPECTED = 0.85  # flagged under 85 % of expected (the lab's acceptance: within 15 %)


def tcp_efficiency(mtu: int, framing: int = WIRE_FRAMING) -> float:
    """Goodput per line rate for full-size TCP segments: (MTU - headers) / (MTU + framing);
    9000 gives 0.990 on a wire, 1500 gives 0.941."""
    return (mtu - TCP_IP_HEADERS) / (mtu + framing)


def tcp_expected_gbps(a: Interface, b: Interface, scale: float | None = None) -> float:
    """TCP between two interfaces: the slower end's link (a 1:1 fabric's uplinks are at least as
    fast; a loaded oversubscribed tier is the scheduler's business) at TCP efficiency. With
    `scale` (lab Mbit/s per plan Gbit/s), the shaped lab rate in Gb/s."""
    line = min(a.speed_gbps, b.speed_gbps)
    if scale is None:
        return line * tcp_efficiency(min(a.mtu, b.mtu))
    return line * scale / 1000 * tcp_efficiency(min(a.mtu, b.mtu), SHAPER_FRAMING)


# RDMA data per packet: the path MTU is the largest InfiniBand MTU (4096) that fits the plane MTU.
RDMA_MTUS = (4096, 2048, 1024, 512, 256)
# RoCEv2 per packet: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 + preamble and gap 20.
ROCE_OVERHEAD = 82
# InfiniBand per packet: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 (the rate is already the data rate).
IB_OVERHEAD = 26
IPOIB_HEADER = 4


def rdma_efficiency(technology: str, plane_mtu: int) -> float:
    """RDMA WRITE/SEND goodput per line rate for full packets: 4096 / (4096 + 82) = 0.980 on RoCEv2
    at MTU 9000; 4096 / (4096 + 26) = 0.994 on InfiniBand."""
    overhead = IB_OVERHEAD if technology == "infiniband" else ROCE_OVERHEAD
    # IPoIB's MTU is the IB MTU less its 4-byte header (4092 on a 4096 link); RoCE's headers sit
    # inside the Ethernet MTU.
    room = plane_mtu + IPOIB_HEADER if technology == "infiniband" else plane_mtu - (ROCE_OVERHEAD - WIRE_FRAMING)
    payload = next((m for m in RDMA_MTUS if m <= room), RDMA_MTUS[-1])
    return payload / (payload + overhead)


def rdma_expected_gbps(a: Interface, b: Interface, technology: str) -> float:
    return min(a.speed_gbps, b.speed_gbps) * rdma_efficiency(technology, min(a.mtu, b.mtu))
