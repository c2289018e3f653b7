"""NCCL's network environment per node, each setting with why (sourced by job prologs)."""

from __future__ import annotations

from gpunet.model.plan import Interface, Node, Plan
from gpunet.render.common import header, plane_of
from gpunet.render.quote import shell_word

PATH = "etc/gpunet/nccl.env"
ROCE_V2_IPV4_GID_INDEX = 3  # mlx5 GID table: 0/1 RoCE v1/v2 link-local, 2/3 RoCE v1/v2 IPv4
ROCE_TRAFFIC_CLASS = 106  # DSCP 26 (the usual lossless RoCE class) << 2, ECN-capable


def _setting(name: str, value: str, why: str) -> str:
    return f"# {why}\nexport {name}={shell_word(value)}\n"


def render_nccl_env(plan: Plan, node: Node) -> str:
    compute = [i for i in node.interfaces if i.plane == "compute" and i.master is None and i.address]
    mgmt = [i.name for i in node.interfaces if i.plane == "management" and i.address]
    text = header("NCCL environment")
    if not compute:
        return text + "# This node has no compute-plane interface: NCCL traffic does not start here.\n"
    technology = plane_of(plan, "compute").technology
    if technology == "ethernet":
        return text + _tcp_only(compute)
    text += _setting("NCCL_SOCKET_IFNAME", "=" + ",".join(mgmt),
                     "bootstrap and out-of-band exchange over the management plane; data goes over RDMA")
    text += _setting("NCCL_IB_HCA", "=" + ",".join(f"{i.hca}:1" for i in sorted(compute, key=_rail)),
                     "the compute HCAs in rail order ('=' means exactly these): rank i's NIC i is rail i")
    text += _setting("NCCL_IB_DISABLE", "0", "use the RDMA transport")
    if plane_of(plan, "compute").style == "rail-optimized":
        text += _setting("NCCL_CROSS_NIC", "0", "rail-optimized fabric: keep each ring/tree on one rail, so "
                         "traffic stays under the rail leaf instead of crossing spines")
    if technology == "roce":
        text += _setting("NCCL_IB_GID_INDEX", str(ROCE_V2_IPV4_GID_INDEX),
                         "RoCE v2 with the IPv4 address (routable across leaves), mlx5's index 3")
        text += _setting("NCCL_IB_TC", str(ROCE_TRAFFIC_CLASS),
                         "traffic class 106 = DSCP 26 with ECN, the lossless (PFC) class on the switches")
    return text


def _rail(iface: Interface) -> int:
    return iface.rail if iface.rail is not None else 0


def _tcp_only(compute: list[Interface]) -> str:
    return _setting("NCCL_SOCKET_IFNAME", "=" + ",".join(i.name for i in compute),
                    "Ethernet without RDMA: NCCL's socket transport carries the data over the compute NICs") + \
        _setting("NCCL_IB_DISABLE", "1", "no RDMA devices on this plane") + \
        _setting("NCCL_SOCKET_NTHREADS", "4", "more socket threads per connection to fill 25G+ links") + \
        _setting("NCCL_NSOCKS_PERTHREAD", "4", "and more sockets per thread (product at most 64)")
