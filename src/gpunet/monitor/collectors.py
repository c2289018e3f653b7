"""What the exporter reads at scrape time. Each collector is a function from what it reads (a root
path, the Plan's view of this node) to metric families; probe/'s readers do the reading, so the
exporter and `gpunet doctor` see a node the same way. Names are in docs/metrics.md."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpunet.errors import ParseError, ProbeError
from gpunet.model.plan import Interface
from gpunet.model.state import IbPort, InterfaceState
from gpunet.probe.node import read_bonds, read_snmp
from gpunet.probe.parsers import parse_proc_net_dev
from gpunet.probe.sysfs import read_ib_ports, read_interfaces

Collect = Callable[[], Iterable[Metric]]
AddressReader = Callable[[], dict[str, tuple[str, ...]]]  # device -> its CIDRs (ip -j addr)

BITS_PER_BYTE = 8
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
# The netstat counters worth a series (node_exporter's default set, counters only): the rest of
# /proc/net/netstat is hundreds of series nobody alerts on.
NETSTAT_KEPT = re.compile(
    r"(\w+_(InErrors|InErrs|InCsumErrors)|IpExt_(InOctets|OutOctets|InCEPkts|InECT0Pkts)|Ip_(InDiscards|OutDiscards)"
    r"|TcpExt_(Listen\w*|TCPSynRetrans|TCPTimeouts|TCPLostRetransmit|TCPFastRetrans|TCPOFOQueue|TCPRcvQDrop)"
    r"|Tcp_(ActiveOpens|InSegs|OutRsts|PassiveOpens|AttemptFails|EstabResets)"
    r"|Udp_(InDatagrams|OutDatagrams|NoPorts|RcvbufErrors|SndbufErrors))")
IB_COUNTERS = {  # /sys/class/infiniband/<ca>/ports/<n>/counters file -> (metric, multiplier)
    "port_rcv_data": ("gpunet_infiniband_port_data_received_bytes", 4),  # counted in 4-byte words
    "port_xmit_data": ("gpunet_infiniband_port_data_transmitted_bytes", 4),
    "port_rcv_packets": ("gpunet_infiniband_port_packets_received", 1),
    "port_xmit_packets": ("gpunet_infiniband_port_packets_transmitted", 1),
    "symbol_error": ("gpunet_infiniband_symbol_errors", 1),
    "link_downed": ("gpunet_infiniband_link_downed", 1),
    "link_error_recovery": ("gpunet_infiniband_link_error_recovery", 1),
    "port_rcv_errors": ("gpunet_infiniband_port_receive_errors", 1),
    "port_xmit_discards": ("gpunet_infiniband_port_transmit_discards", 1),
}
IB_HW_NOT_COUNTERS = {"lifespan"}  # a setting (ms between hw counter refreshes), not a count
IB_PORT_STATES = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
IB_PHYSICAL_STATES = {"SLEEP": 1, "POLLING": 2, "DISABLED": 3, "PORTCONFIGURATIONTRAINING": 4, "LINKUP": 5,
                      "LINKERRORRECOVERY": 6, "PHYTEST": 7}


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

    @property
    def plane_of(self) -> dict[str, str]:
        return {i.name: i.plane for i in self.planned}


def exported_interfaces(view: NodeView) -> list[InterfaceState]:
    """Physical interfaces, plus virtual ones the Plan names (a lab's veths) or all with include_virtual;
    counters from /proc/net/dev (one read for all) where it exists, else each statistics/ file."""
    planned, counters = view.plane_of, _proc_net_dev(view.root)
    chosen = [i for i in read_interfaces(view.root, full=counters is None)
              if not i.virtual or view.include_virtual or i.name in planned]
    if counters is None:
        return chosen
    return [i.model_copy(update={"statistics": counters.get(i.name, {})}) for i in chosen]


def _proc_net_dev(root: Path) -> dict[str, dict[str, int]] | None:
    path = root / "proc/net/dev"
    try:
        return parse_proc_net_dev(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ParseError) as exc:
        raise CollectorError(f"{path}: {exc}") from None


def collect_netdev(view: NodeView) -> list[Metric]:
    interfaces, planes = exported_interfaces(view), view.plane_of
    if not interfaces and not (view.root / "sys/class/net").is_dir():
        raise CollectorError(f"{view.root / 'sys/class/net'} is missing")
    labels = ["device", "plane"]
    counters = {key: CounterMetricFamily(name, text, labels=labels) for key, (name, text) in INTERFACE_COUNTERS.items()}
    carrier = GaugeMetricFamily("gpunet_network_carrier", "1 when the link has carrier.", labels=labels)
    up = GaugeMetricFamily("gpunet_network_up", "1 when the operational state is up.", labels=labels)
    speed = GaugeMetricFamily("gpunet_network_speed_bytes_per_second", "Negotiated link speed.", labels=labels)
    mtu = GaugeMetricFamily("gpunet_network_mtu_bytes", "Interface MTU.", labels=labels)
    for iface in interfaces:
        values = [iface.name, planes.get(iface.name, "")]
        for key, family in counters.items():
            if key in iface.statistics:
                family.add_metric(values, iface.statistics[key])
        carrier.add_metric(values, 1 if iface.carrier else 0)
        up.add_metric(values, 1 if iface.operstate == "up" else 0)
        mtu.add_metric(values, iface.mtu)
        if iface.speed_mbps is not None:
            speed.add_metric(values, iface.speed_mbps * 1e6 / BITS_PER_BYTE)
    return [*counters.values(), carrier, up, speed, mtu]


def collect_netstat(view: NodeView) -> list[Metric]:
    problems: list[str] = []
    snmp = read_snmp(view.root, problems)
    if snmp is None:
        raise CollectorError("; ".join(problems) or f"no {view.root / 'proc/net/snmp'}")
    out = CounterMetricFamily("gpunet_tcp_out_segments", "TCP segments sent (Tcp OutSegs).")
    retrans = CounterMetricFamily("gpunet_tcp_retransmitted_segments", "TCP segments retransmitted (RetransSegs).")
    out.add_metric([], snmp.get("Tcp", "OutSegs") or 0)
    retrans.add_metric([], snmp.get("Tcp", "RetransSegs") or 0)
    other = CounterMetricFamily("gpunet_netstat", "Other /proc/net/snmp and netstat counters.",
                                labels=["group", "counter"])
    for group, counters in sorted(snmp.groups.items()):
        for name, value in sorted(counters.items()):
            if NETSTAT_KEPT.fullmatch(f"{group}_{name}"):
                other.add_metric([group, name], value)
    return [out, retrans, other]


def collect_bonding(view: NodeView) -> list[Metric]:
    problems: list[str] = []
    bonds = read_bonds(view.root, problems)
    if problems and not bonds:
        raise CollectorError("; ".join(problems))
    member = GaugeMetricFamily("gpunet_bond_member_up", "1 when the bond member's MII status is up.",
                               labels=["bond", "device"])
    active = GaugeMetricFamily("gpunet_bond_active_members", "Bond members up.", labels=["bond"])
    for bond in bonds:
        for slave in bond.slaves:
            member.add_metric([bond.name, slave.name], 1 if slave.mii_up else 0)
        active.add_metric([bond.name], sum(s.mii_up for s in bond.slaves))
    return [member, active]


def collect_infiniband(view: NodeView) -> list[Metric]:
    ports = read_ib_ports(view.root)
    planes = {i.hca: i.plane for i in view.planned if i.hca}
    labels = ["device", "port", "plane"]
    state = GaugeMetricFamily("gpunet_infiniband_port_state", "Port state (4 = ACTIVE).", labels=labels)
    physical = GaugeMetricFamily("gpunet_infiniband_port_physical_state", "Physical state (5 = LinkUp).",
                                 labels=labels)
    rate = GaugeMetricFamily("gpunet_infiniband_rate_bytes_per_second", "Port rate.", labels=labels)
    counters = {key: CounterMetricFamily(name, f"{key} from the port's counters.", labels=labels)
                for key, (name, _) in IB_COUNTERS.items()}
    hardware = CounterMetricFamily("gpunet_infiniband_hw_counter", "RoCE/IB hw_counters of the port.",
                                   labels=[*labels, "counter"])
    for port in ports:
        values = [port.ca, str(port.port), planes.get(port.ca, "")]
        state.add_metric(values, _state_number(port.state, IB_PORT_STATES))
        physical.add_metric(values, _state_number(port.physical_state, IB_PHYSICAL_STATES))
        if port.rate_gbps is not None:
            rate.add_metric(values, port.rate_gbps * 1e9 / BITS_PER_BYTE)
        _ib_counters(port, values, counters, hardware)
    return [state, physical, rate, *counters.values(), hardware]


def _ib_counters(port: IbPort, values: list[str], counters: dict[str, CounterMetricFamily],
                 hardware: CounterMetricFamily) -> None:
    for key, value in sorted(port.counters.items()):
        if key in counters:
            counters[key].add_metric(values, value * IB_COUNTERS[key][1])
        elif key.startswith("hw_") and key[3:] not in IB_HW_NOT_COUNTERS:
            hardware.add_metric([*values, key[3:]], value)


def _state_number(name: str, numbers: dict[str, int]) -> int:
    """sysfs says '4: ACTIVE'; the reader keeps the name, Prometheus wants the number (0: unknown)."""
    return numbers.get(re.sub(r"[\s_]", "", name).upper(), numbers.get(name.upper(), 0))
