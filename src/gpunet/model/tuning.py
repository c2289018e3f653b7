"""What a node's settings should be, computed from the Plan once: the renderers write these values
and doctor checks a node against the same values (a renderer change cannot silently move a check)."""

from __future__ import annotations

from dataclasses import dataclass

from gpunet.model.plan import Interface, Node, Plan, Plane

# Round-trip time the buffers are sized for: a 5-hop fat tree under load plus host stack jitter.
# In-cluster RTTs are 10-100 us idle; queues at line rate push them towards a millisecond.
PLANNING_RTT_S = 0.001
LINUX_DEFAULT_MAX = 6 * 1024 * 1024  # tcp_rmem max since 4.x: never go below it
HOST_PLANES = ("management", "compute", "storage")  # oob addresses belong to the BMC, not the OS
ROCE_V2_IPV4_GID_INDEX = 3  # mlx5 GID table: 0/1 RoCE v1/v2 link-local, 2/3 RoCE v1/v2 IPv4


def tcp_buffer_max(gbps: int, rtt_s: float = PLANNING_RTT_S) -> int:
    """2 x BDP (the kernel gives up to half a buffer to overhead), as a power of two."""
    bdp = gbps * 1e9 / 8 * rtt_s
    wanted = max(int(2 * bdp), LINUX_DEFAULT_MAX)
    return 1 << (wanted - 1).bit_length()


def tcp_buffer_sysctls(node: Node) -> dict[str, str]:
    """The TCP autotuning ranges render writes (90-gpunet-net.conf) and the lab applies: per network
    namespace keys, so a lab server holds what a deployed node would."""
    top = tcp_buffer_max(fastest_tcp_gbps(node))
    return {"net.ipv4.tcp_rmem": f"4096 131072 {top}", "net.ipv4.tcp_wmem": f"4096 65536 {top}"}


def fastest_tcp_gbps(node: Node) -> int:
    """Bandwidth of the node's fastest IP interface (RDMA does not go through TCP buffers)."""
    speeds = [i.speed_gbps for i in node.interfaces if i.plane in HOST_PLANES and i.address]
    return max(speeds, default=1)


@dataclass(frozen=True)
class Setting:
    name: str
    value: str
    why: str


CONGESTION_KEY = "net.ipv4.tcp_congestion_control"
DEFAULT_CONGESTION = "cubic"  # the kernel's own default, and every plane's choice below
# Why each plane's TCP gets the algorithm it gets (README "TCP congestion control"). BBRv1 is
# built for long paths with deep or policed buffers; inside one site it shares a link unevenly
# between flows (bench: worst cross-leaf pair 82-94 % of line under BBR, 99 % under cubic) and
# retransmits heavily into shallow switch buffers under incast. dctcp needs switches that mark
# ECN on the class TCP rides: gpunet's switch configs mark only RoCE's lossless class (DCQCN), so
# a dctcp sender would see no marks and fall back to halving on loss. htcp is for
# high-BDP long-distance paths; in-site BDPs (100G x 1 ms = 12 MB) are cubic's range. cubic is
# built into every distribution kernel, so it needs no module.
CONGESTION_WHY = {
    "management": "cubic, the kernel default: this plane also reaches the site network (gateway, DNS, "
                  "mirrors), where it shares links with other hosts' cubic flows",
    "ethernet": "cubic: the switches drop rather than mark ECN for TCP, so dctcp would get no marks; "
                "BBRv1 shares a link unevenly between flows inside a site",
    "roce": "cubic: TCP rides the default, lossy class and ECN marks only the RoCE lossless class, so "
            "dctcp would get no marks; BBRv1 shares a link unevenly between flows",
    "infiniband": "cubic over IPoIB: credit-based links drop nothing for congestion, so a loss-based "
                  "algorithm backs off only at the hosts; BBR's pacing buys nothing here",
}


def tcp_congestion(plane: Plane) -> Setting:
    """The TCP congestion control a plane's traffic should use, and why. The key is host-wide (per
    network namespace, not per interface); every plane chooses cubic today, for its own reason,
    so one value serves a node whatever planes it is on."""
    reason = "management" if plane.name == "management" and plane.technology == "ethernet" else plane.technology
    return Setting(CONGESTION_KEY, DEFAULT_CONGESTION, CONGESTION_WHY[reason])


def node_congestion(plan: Plan, node: Node) -> list[tuple[Plane, Setting]]:
    """Each plane the node's own TCP uses (an addressed host interface), with its choice."""
    used = {i.plane for i in node.interfaces if i.plane in HOST_PLANES and i.address}
    return [(p, tcp_congestion(p)) for p in plan.planes if p.name in used]


def nccl_settings(plan: Plan, node: Node) -> list[Setting]:
    """NCCL's network environment for the node: sockets on the plane of the job-bootstrap flow
    (the plane the firewall opens for it), HCAs in rail order, RoCE GID and traffic class."""
    compute = [i for i in node.interfaces if i.plane == "compute" and i.master is None and i.address]
    bootstrap = next((f.plane for f in plan.flows if f.service == "job-bootstrap"), None)
    if not compute or bootstrap is None:
        return []
    sockets = [i.layer3 for i in node.interfaces if i.plane == bootstrap and i.address and i.master is None]
    technology = next(p.technology for p in plan.planes if p.name == "compute")
    if technology == "ethernet":
        return _tcp_only(sockets)
    settings = [
        Setting("NCCL_SOCKET_IFNAME", "=" + ",".join(sockets),
                f"bootstrap and out-of-band exchange over the {bootstrap} plane (the job-bootstrap flow); "
                "data goes over RDMA"),
        Setting("NCCL_IB_HCA", "=" + ",".join(f"{i.hca}:1" for i in sorted(compute, key=_rail)),
                "the compute HCAs in rail order ('=' means exactly these): rank i's NIC i is rail i"),
        Setting("NCCL_IB_DISABLE", "0", "use the RDMA transport"),
    ]
    if next(p.style for p in plan.planes if p.name == "compute") == "rail-optimized":
        settings.append(Setting("NCCL_CROSS_NIC", "0", "rail-optimized fabric: keep each ring/tree on one rail, so "
                                "traffic stays under the rail leaf instead of crossing spines"))
    plane = next(p for p in plan.planes if p.name == "compute")
    if plane.partition is not None:
        settings.append(Setting("NCCL_IB_PKEY", str(plane.partition.index),
                                f"partition 0x{plane.partition.key:04x}: its index in the HCAs' P_Key table "
                                "(the subnet manager's order; gpunet doctor GN-PKEY-02 checks it)"))
    if plane.sharp:
        settings.append(Setting("NCCL_COLLNET_ENABLE", "1", "the fabric reduces in the network (SHARP): "
                                "NCCL's CollNet needs the SHARP plugin (HPC-X nccl-rdma-sharp-plugins) loaded"))
    qos = plane.qos
    if technology == "roce" and qos is not None:
        settings += [Setting("NCCL_IB_GID_INDEX", str(ROCE_V2_IPV4_GID_INDEX),
                             "RoCE v2 with the IPv4 address (routable across leaves), mlx5's index 3"),
                     Setting("NCCL_IB_TC", str(qos.traffic_class),
                             f"traffic class {qos.traffic_class} = DSCP {qos.dscp}"
                             f"{' with ECN' if qos.ecn else ''}, the plane's lossless class (PFC on priority "
                             f"{qos.priority} on the switches)")]
    return settings


def _rail(iface: Interface) -> int:
    return iface.rail if iface.rail is not None else 0


def _tcp_only(sockets: list[str]) -> list[Setting]:
    return [Setting("NCCL_SOCKET_IFNAME", "=" + ",".join(sockets),
                    "Ethernet without RDMA: NCCL's socket transport carries the data over the compute NICs"),
            Setting("NCCL_IB_DISABLE", "1", "no RDMA devices on this plane"),
            Setting("NCCL_SOCKET_NTHREADS", "4", "more socket threads per connection to fill 25G+ links"),
            Setting("NCCL_NSOCKS_PERTHREAD", "4", "and more sockets per thread (product at most 64)")]
