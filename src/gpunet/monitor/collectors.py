"""What the exporter reads at scrape time. Each collector is a function from what it reads (a root
path, the Plan's view of this node) to metric families; probe/'s readers do the reading, so the
exporter and `gpunet doctor` see a node the same way. Names are in docs/metrics.md.

Against node_exporter (tests/monitor/test_node_exporter_fixtures.py holds both to the same
recorded trees): gpunet_network_<x>_total is node_network_<x>_total for bytes and packets,
receive/transmit_errors is *_errs_total, *_drops is *_drop_total (from /proc/net/dev, the same
columns); carrier, up and mtu_bytes are node_exporter's netclass series; speed_bytes_per_second is
node_network_speed_bytes (sysfs Mb/s x 1e6 / 8). gpunet_netstat_total{group="Tcp",counter="InErrs"}
is node_netstat_Tcp_InErrs, and gpunet_tcp_out_segments_total / _retransmitted_segments_total are
node_netstat_Tcp_OutSegs / _RetransSegs. gpunet_bond_members / _active_members are
node_bonding_slaves / node_bonding_active."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.samples import Sample

from gpunet.errors import ParseError, ProbeError
from gpunet.model.plan import Interface
from gpunet.model.state import InterfaceState, NetDevCounters
from gpunet.probe.links import LinkReader
from gpunet.probe.node import read_bonds, read_snmp
from gpunet.probe.procnet import read_proc_net_dev, read_snmp6
from gpunet.probe.sysfs import read_interfaces, read_sysfs_bonds
from gpunet.runner import CommandRunner, run_local

Collect = Callable[[], Iterable[Metric]]
AddressReader = Callable[[], dict[str, tuple[str, ...]]]  # device -> its CIDRs (ip -j addr)

log = logging.getLogger("gpunet.exporter")
BITS_PER_BYTE = 8
WARN_EVERY_S = 600.0  # a source that stays bad is logged again after this long, not on every scrape
INTERFACE_COUNTERS = {  # /sys/class/net/<dev>/statistics file -> metric (without _total)
    "rx_bytes": ("gpunet_network_receive_bytes", "Bytes received."),
    "tx_bytes": ("gpunet_network_transmit_bytes", "Bytes sent."),
    "rx_packets": ("gpunet_network_receive_packets", "Packets received."),
    "tx_packets": ("gpunet_network_transmit_packets", "Packets sent."),
    "rx_errors": ("gpunet_network_receive_errors", "Receive errors (CRC, frame, FIFO, ...)."),
    "tx_errors": ("gpunet_network_transmit_errors", "Transmit errors."),
    "rx_dropped": ("gpunet_network_receive_drops", "Received packets dropped."),
    "tx_dropped": ("gpunet_network_transmit_drops", "Packets dropped before sending."),
}
# The netstat counters worth a series: node_exporter's default --collector.netstat.fields less its
# two gauges (Ip_Forwarding, Tcp_CurrEstab), plus a few congestion and drop counters. The rest of
# /proc/net/netstat is hundreds of series nobody alerts on.
NETSTAT_KEPT = re.compile(
    r"(\w+_(InErrors|InErrs|InCsumErrors)|Ip(6|Ext)_(InOctets|OutOctets)|IpExt_(InCEPkts|InECT0Pkts)"
    r"|Ip_(InDiscards|OutDiscards)|Icmp6?_(InMsgs|OutMsgs)"
    r"|TcpExt_(Listen\w*|Syncookies\w*|TCPSynRetrans|TCPTimeouts|TCPLostRetransmit|TCPFastRetrans|TCPOFOQueue"
    r"|TCPRcvQDrop)"
    r"|Tcp_(ActiveOpens|InSegs|OutRsts|PassiveOpens|AttemptFails|EstabResets)"
    r"|Udp6?_(InDatagrams|OutDatagrams|NoPorts|RcvbufErrors|SndbufErrors))")


class CollectorError(ProbeError):
    """A collector could read nothing; the exporter reports it as gpunet_collector_success 0."""


@dataclass(frozen=True)
class NodeView:
    """What the exporter reads from: a root path, this node's interfaces in the Plan (empty without
    one), and whether virtual interfaces (veth, bridges, lo) not in the Plan are exported too."""

    root: Path = Path("/")
    planned: tuple[Interface, ...] = ()
    include_virtual: bool = False
    addresses: AddressReader = field(default=lambda: {})
    run: CommandRunner = run_local  # the ethtool collector's `ethtool -S`

    @property
    def plane_of(self) -> dict[str, str]:
        return {i.name: i.plane for i in self.planned}

    @cached_property
    def links(self) -> LinkReader:
        """The netdev collector's reader: it keeps the interfaces' sysfs files open between scrapes."""
        return LinkReader(self.root)


def exported_interfaces(view: NodeView, counters: NetDevCounters | None) -> list[InterfaceState]:
    """Physical interfaces, plus virtual ones the Plan names (a lab's veths) or all with include_virtual;
    counters from /proc/net/dev (one read for all) where it exists, else each statistics/ file."""
    planned = view.plane_of
    every = view.links.read(counters.interfaces) if counters is not None else read_interfaces(view.root, full=True)
    return [i for i in every if not i.virtual or view.include_virtual or i.name in planned]


def _proc_net_dev(root: Path) -> NetDevCounters | None:
    try:
        return read_proc_net_dev(root)
    except (OSError, ParseError) as exc:
        raise CollectorError(f"{root / 'proc/net/dev'}: {exc}") from None


def collect_netdev(view: NodeView) -> list[Metric]:
    """Link facts where /sys/class/net has the interface's directory, counters where /proc/net/dev
    has its line. A /proc/net/dev line that cannot be read costs that interface's counters only
    (gpunet_skipped_lines, and a warning); a line without a sysfs directory (sysfs not of this
    namespace, or a race) gets its counters only, like a virtual interface."""
    counters = _proc_net_dev(view.root)
    interfaces = exported_interfaces(view, counters)
    if not interfaces and not (view.root / "sys/class/net").is_dir():
        raise CollectorError(f"{view.root / 'sys/class/net'} is missing")
    seen = {i.name for i in interfaces}
    unlisted = {name: values for name, values in (counters.interfaces if counters else {}).items()
                if name not in seen and (view.include_virtual or name in view.plane_of)}
    families = _interface_families(interfaces, unlisted, view.plane_of)
    if counters is not None:
        families.append(_skipped_lines(str(view.root / "proc/net/dev"), counters.skipped))
    return families


def _interface_families(interfaces: list[InterfaceState], unlisted: dict[str, dict[str, int]],
                        planes: dict[str, str]) -> list[Metric]:
    """Samples are appended directly, one label dict shared by an interface's 12 series (nothing
    downstream mutates it): add_metric's per-call dict and zip were a fifth of a 200-interface scrape."""
    labels = ["device", "plane"]
    counters = [(key, CounterMetricFamily(name, text, labels=labels))
                for key, (name, text) in INTERFACE_COUNTERS.items()]
    carrier = GaugeMetricFamily("gpunet_network_carrier", "1 when the link has carrier.", labels=labels)
    up = GaugeMetricFamily("gpunet_network_up", "1 when the operational state is up.", labels=labels)
    speed = GaugeMetricFamily("gpunet_network_speed_bytes_per_second", "Negotiated link speed.", labels=labels)
    mtu = GaugeMetricFamily("gpunet_network_mtu_bytes", "Interface MTU.", labels=labels)
    totals = [(key, family.samples, family.name + "_total") for key, family in counters]
    for iface in interfaces:
        values = {"device": iface.name, "plane": planes.get(iface.name, "")}
        _counter_samples(totals, values, iface.statistics)
        carrier.samples.append(Sample(carrier.name, values, 1 if iface.carrier else 0))
        up.samples.append(Sample(up.name, values, 1 if iface.operstate == "up" else 0))
        mtu.samples.append(Sample(mtu.name, values, iface.mtu))
        if iface.speed_mbps is not None:
            speed.samples.append(Sample(speed.name, values, iface.speed_mbps * 1e6 / BITS_PER_BYTE))
    for name, statistics in sorted(unlisted.items()):
        _counter_samples(totals, {"device": name, "plane": planes.get(name, "")}, statistics)
    return [*(family for _, family in counters), carrier, up, speed, mtu]


def _counter_samples(totals: list[tuple[str, list[Sample], str]], values: dict[str, str],
                     statistics: dict[str, int]) -> None:
    for key, samples, name in totals:
        if key in statistics:
            samples.append(Sample(name, values, statistics[key]))


def _skipped_lines(source: str, skipped: tuple[str, ...]) -> Metric:
    for line in skipped:
        warn_now_and_then(source, f"{source}: {line}: skipped, the other lines are exported")
    family = GaugeMetricFamily("gpunet_skipped_lines", "Lines of a source that could not be read in this scrape "
                               "(each costs only its own series).", labels=["source"])
    family.add_metric([source], len(skipped))
    return family


_last_warned: dict[str, float] = {}
_warn_lock = threading.Lock()


def warn_now_and_then(source: str, message: str, clock: Callable[[], float] = time.monotonic) -> None:
    """Log `message`, unless this source was logged in the last WARN_EVERY_S: a line that stays
    bad would otherwise log on every scrape."""
    with _warn_lock:
        now, last = clock(), _last_warned.get(source)
        if last is not None and now - last < WARN_EVERY_S:
            return
        _last_warned[source] = now
    log.warning("%s", message)


def collect_netstat(view: NodeView) -> list[Metric]:
    """/proc/net/snmp, netstat and snmp6 (node_exporter's netstat collector reads the same three);
    fails only when none of them can be read."""
    problems: list[str] = []
    snmp, snmp6 = read_snmp(view.root, problems), read_snmp6(view.root, problems)
    groups = (snmp.groups if snmp else {}) | (snmp6.groups if snmp6 else {})
    if not groups:
        raise CollectorError("; ".join(problems) or f"no {view.root / 'proc/net/snmp'}")
    for problem in problems:
        warn_now_and_then(problem.split(":")[0], f"netstat: {problem}")
    out = CounterMetricFamily("gpunet_tcp_out_segments", "TCP segments sent (Tcp OutSegs).")
    retrans = CounterMetricFamily("gpunet_tcp_retransmitted_segments", "TCP segments retransmitted (RetransSegs).")
    if "Tcp" in groups:
        out.add_metric([], groups["Tcp"].get("OutSegs", 0))
        retrans.add_metric([], groups["Tcp"].get("RetransSegs", 0))
    other = CounterMetricFamily("gpunet_netstat", "Other /proc/net/snmp, snmp6 and netstat counters.",
                                labels=["group", "counter"])
    for group, counters in sorted(groups.items()):
        for name, value in sorted(counters.items()):
            if NETSTAT_KEPT.fullmatch(f"{group}_{name}"):
                other.add_metric([group, name], value)
    return [out, retrans, other]


def collect_bonding(view: NodeView) -> list[Metric]:
    """Bonds from /proc/net/bonding, and from sysfs those it does not show (a namespace without
    /proc/net/bonding, a file that does not parse). Fails when bonds exist and none could be read,
    or when there is neither source nor /sys/class/net to tell that there are none."""
    problems: list[str] = []
    bonds = read_bonds(view.root, problems)
    bonds += read_sysfs_bonds(view.root, problems, skip=frozenset(b.name for b in bonds))
    if problems and not bonds:
        raise CollectorError("; ".join(problems))
    if not bonds and not any((view.root / where).is_dir() for where in ("proc/net/bonding", "sys/class/net")):
        raise CollectorError(f"neither {view.root / 'proc/net/bonding'} nor {view.root / 'sys/class/net'} exists")
    for problem in problems:
        warn_now_and_then(f"bonding {problem.split(':')[0]}", f"bonding: {problem}")
    member = GaugeMetricFamily("gpunet_bond_member_up", "1 when the bond member's MII status is up.",
                               labels=["bond", "device"])
    members = GaugeMetricFamily("gpunet_bond_members", "Bond members configured.", labels=["bond"])
    active = GaugeMetricFamily("gpunet_bond_active_members", "Bond members up.", labels=["bond"])
    for bond in sorted(bonds, key=lambda b: b.name):
        for slave in bond.slaves:
            member.add_metric([bond.name, slave.name], 1 if slave.mii_up else 0)
        members.add_metric([bond.name], len(bond.slaves))
        active.add_metric([bond.name], sum(s.mii_up for s in bond.slaves))
    return [member, members, active]
