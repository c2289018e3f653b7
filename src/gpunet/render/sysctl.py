"""sysctl.d: TCP buffers from bandwidth x delay, MTU probing, congestion control, backlogs, and
the ARP / reverse-path settings hosts with several NICs on one subnet need."""

from __future__ import annotations

import textwrap

from gpunet.model.plan import Node, Plan
from gpunet.model.tuning import (
    CONGESTION_KEY,
    DEFAULT_CONGESTION,
    PLANNING_RTT_S,
    fastest_tcp_gbps,
    node_congestion,
    tcp_buffer_max,
    tcp_buffer_sysctls,
)
from gpunet.model.types import port_range
from gpunet.render.common import header, shared_subnet_groups

NET_PATH = "etc/sysctl.d/90-gpunet-net.conf"  # per network namespace keys
HOST_PATH = "etc/sysctl.d/91-gpunet-host.conf"  # keys that exist only in the host's namespace
def render_sysctl_net(plan: Plan, node: Node) -> str:
    gbps = fastest_tcp_gbps(node)
    buffers = tcp_buffer_sysctls(node)
    bdp_mb = gbps * 1e9 / 8 * PLANNING_RTT_S / 2**20
    return header("sysctl, network namespace keys") + f"""\
# TCP buffers: bandwidth x delay of the fastest TCP interface, {gbps} Gb/s x {PLANNING_RTT_S * 1e3:g} ms
# = {bdp_mb:.1f} MiB; the maximum is 2 x BDP rounded up to a power of two, since the kernel counts
# up to half of a buffer as overhead (tcp_adv_win_scale). Autotuning grows buffers up to these;
# the same ceiling for SO_RCVBUF/SO_SNDBUF (net.core.*mem_max) is in 91-gpunet-host.conf.
net.ipv4.tcp_rmem = {buffers["net.ipv4.tcp_rmem"]}
net.ipv4.tcp_wmem = {buffers["net.ipv4.tcp_wmem"]}
# Probe the path MTU when ICMP "fragmentation needed" is lost (an MTU mismatch otherwise hangs
# large transfers while small ones work).
net.ipv4.tcp_mtu_probing = 1
{_congestion(plan, node)}# Do not reuse a previous connection's slow-start threshold for a new one.
net.ipv4.tcp_no_metrics_save = 1
# Ports a connection's own end takes (and NCCL, MPI and PMIx listen on): the job-bootstrap flow
# the firewall opens, kept below Slurm's SrunPortRange so the two never collide.
net.ipv4.ip_local_port_range = {_ports(plan)}
# Accept backlog for many peers connecting at once (NCCL bootstrap, MPI wire-up).
net.core.somaxconn = 8192
net.ipv4.tcp_max_syn_backlog = 8192
""" + (MULTI_NIC if any(shared_subnet_groups(node)) else "")


MULTI_NIC = """\
# Several NICs on one subnet: answer ARP only for addresses on the asking interface, announce
# with the interface's own address, and use loose reverse-path filtering, so replies leave by
# the NIC they arrived on (with the per-NIC routing tables of the network config).
net.ipv4.conf.all.arp_ignore = 1
net.ipv4.conf.all.arp_announce = 2
net.ipv4.conf.all.rp_filter = 2
net.ipv4.conf.default.rp_filter = 2
"""


def _congestion(plan: Plan, node: Node) -> str:
    """The congestion-control key with each plane's reason. The key is per network namespace, not
    per interface: the planes agree (model/tuning.py), so no route needs its own `congctl`."""
    chosen = node_congestion(plan, node)
    value = chosen[0][1].value if chosen else DEFAULT_CONGESTION
    lines = [line for p, c in chosen for line in textwrap.wrap(
        f"{p.name} ({p.technology} {p.speed_gbps}G, MTU {p.mtu}): {c.why}", width=96,
        initial_indent="#   ", subsequent_indent="#     ")]
    return "\n".join(["# TCP congestion control, chosen per plane; the key is per network namespace, not per",
                      "# interface, so the planes agree on it:", *lines, f"{CONGESTION_KEY} = {value}", ""])


def _ports(plan: Plan) -> str:
    span = port_range(plan.site.ephemeral_ports)
    return f"{span.low} {span.high}" if span else "32768 60999"


def render_sysctl_host(plan: Plan, node: Node) -> str:
    top = tcp_buffer_max(fastest_tcp_gbps(node))
    return header("sysctl, host-wide keys") + f"""\
# Ceiling for buffers applications ask for (iperf3 -w, NCCL's socket transport): 2 x BDP as
# in 90-gpunet-net.conf. Only the host's own network namespace may set these.
net.core.rmem_max = {top}
net.core.wmem_max = {top}
# Packets queued per CPU between the NIC and the stack: 100G+ bursts overflow the 1000 default.
net.core.netdev_max_backlog = 250000
# Fair queueing paces each flow (TCP pacing relies on it for smooth sending).
net.core.default_qdisc = fq
"""
