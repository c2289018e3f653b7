"""What a pair should carry, from the Plan: the bottleneck link on the path times TCP's
protocol efficiency at the plane MTU."""

from __future__ import annotations

from gpunet.model.plan import Interface

TCP_IP_HEADERS = 52  # IPv4 20 + TCP 20 + timestamps 12, inside every MTU-sized packet
WIRE_FRAMING = 38  # Ethernet header 14 + FCS 4 + preamble 8 + inter-frame gap 12, outside the MTU
SHAPER_FRAMING = 14  # a tbf shaper (the lab) counts only the 14-byte Ethernet header
BELOW_EXPECTED = 0.85  # flagged under 85 % of expected (the lab's acceptance: within 15 %)
# A pair across leaves spreads its streams over the equal-cost paths (one path a stream). A slow
# link on one path costs the pair little in all, since the streams on the other paths take up the
# NIC's rate, but its own streams fall far below their siblings: 0.1-0.3 of the mean stream
# through a leaf-spine cable shaped to 1 % of line in the lab, 0.5-0.7 for the slowest stream of
# a healthy pair (cubic shares one bottleneck unevenly over a few seconds).
SLOW_STREAM = 0.25  # of the mean stream: that stream's path is slow
MIN_STREAMS = 4  # fewer streams say nothing about paths apart


def slow_path(stream_gbps: tuple[float, ...]) -> str | None:
    """Why a pair's streams say one of its paths is slow (streams under SLOW_STREAM of their mean),
    or None."""
    if len(stream_gbps) < MIN_STREAMS:
        return None
    mean = sum(stream_gbps) / len(stream_gbps)
    slow = sorted(rate for rate in stream_gbps if rate < SLOW_STREAM * mean)
    if not slow or mean <= 0:
        return None
    return (f"a path below the rest: {len(slow)} of {len(stream_gbps)} streams under {100 * SLOW_STREAM:.0f} % of "
            f"their mean ({slow[0]:.3g} Gb/s against {mean:.3g}): a slow link on one of the pair's equal-cost paths")


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
