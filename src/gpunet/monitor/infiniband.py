"""The infiniband collector: each InfiniBand/RoCE port's state, rate, port counters and hw_counters,
from /sys/class/infiniband as node_exporter's infiniband collector reads them. Names are gpunet's
(docs/metrics.md); node_exporter's are beside each counter below. Units: port_rcv_data and
port_xmit_data count 4-byte words, both exporters multiply by 4 (bytes); the rate file says Gb/s,
both export bytes per second (x 1e9 / 8); states are the number sysfs writes before the name
(node_infiniband_state_id, node_infiniband_physical_state_id). hw_counters are one family here,
`gpunet_infiniband_hw_counter_total{counter="<file>"}`, the file's value unchanged; node_exporter
names each (np_cnp_sent -> node_infiniband_np_cnp_packets_sent_total, ...). `lifespan` (ms
between hardware counter refreshes, node_infiniband_lifespan_seconds) is a setting, not exported.
The pre-4.5 kernels' counters_ext (node_infiniband_legacy_*) are not read."""

from __future__ import annotations

import re

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpunet.model.state import IbPort
from gpunet.monitor.collectors import BITS_PER_BYTE, NodeView
from gpunet.probe.sysfs import read_ib_ports

IB_COUNTERS = {  # counters/<file> -> (gpunet metric without _total, multiplier); node_exporter's name after #
    "port_rcv_data": ("gpunet_infiniband_port_data_received_bytes", 4),  # port_data_received_bytes_total
    "port_xmit_data": ("gpunet_infiniband_port_data_transmitted_bytes", 4),  # port_data_transmitted_bytes_total
    "port_rcv_packets": ("gpunet_infiniband_port_packets_received", 1),  # port_packets_received_total
    "port_xmit_packets": ("gpunet_infiniband_port_packets_transmitted", 1),  # port_packets_transmitted_total
    "unicast_rcv_packets": ("gpunet_infiniband_port_unicast_packets_received", 1),  # unicast_packets_received_total
    "unicast_xmit_packets": ("gpunet_infiniband_port_unicast_packets_transmitted", 1),  # unicast_..._transmitted
    "multicast_rcv_packets": ("gpunet_infiniband_port_multicast_packets_received", 1),  # multicast_..._received
    "multicast_xmit_packets": ("gpunet_infiniband_port_multicast_packets_transmitted", 1),  # multicast_..._transm.
    # Ticks in which the port had data to send and sent none: the fabric's congestion signal.
    "port_xmit_wait": ("gpunet_infiniband_port_transmit_wait", 1),  # port_transmit_wait_total
    "port_rcv_errors": ("gpunet_infiniband_port_receive_errors", 1),  # port_errors_received_total
    "port_rcv_discards": ("gpunet_infiniband_port_receive_discards", 1),  # port_discards_received_total
    "port_xmit_discards": ("gpunet_infiniband_port_transmit_discards", 1),  # port_discards_transmitted_total
    "port_rcv_constraint_errors": ("gpunet_infiniband_port_receive_constraint_errors", 1),  # port_constraint_
    "port_xmit_constraint_errors": ("gpunet_infiniband_port_transmit_constraint_errors", 1),  # errors_received/_tr.
    "port_rcv_remote_physical_errors": ("gpunet_infiniband_port_receive_remote_physical_errors", 1),  # same name
    "port_rcv_switch_relay_errors": ("gpunet_infiniband_port_receive_switch_relay_errors", 1),  # same name
    "symbol_error": ("gpunet_infiniband_symbol_errors", 1),  # symbol_error_total
    "link_downed": ("gpunet_infiniband_link_downed", 1),  # link_downed_total
    "link_error_recovery": ("gpunet_infiniband_link_error_recovery", 1),  # link_error_recovery_total
    "local_link_integrity_errors": ("gpunet_infiniband_local_link_integrity_errors", 1),  # same name
    "excessive_buffer_overrun_errors": ("gpunet_infiniband_excessive_buffer_overrun_errors", 1),  # same name
    "VL15_dropped": ("gpunet_infiniband_vl15_dropped", 1),  # vl15_dropped_total
}
IB_HW_NOT_COUNTERS = {"lifespan"}  # a setting (ms between hw counter refreshes), not a count
# Names for a state file without its number (sysfs always writes one; ibstat-style text has none).
IB_PORT_STATES = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
IB_PHYSICAL_STATES = {"SLEEP": 1, "POLLING": 2, "DISABLED": 3, "PORTCONFIGURATIONTRAINING": 4, "LINKUP": 5,
                      "LINKERRORRECOVERY": 6, "PHYTEST": 7}


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
        state.add_metric(values, _state_number(port.state_id, port.state, IB_PORT_STATES))
        physical.add_metric(values, _state_number(port.physical_state_id, port.physical_state, IB_PHYSICAL_STATES))
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


def _state_number(number: int | None, name: str, numbers: dict[str, int]) -> int:
    """The number the state file gives; else the name's (ibstat-style text); 0 when neither is
    known, so an 'is it ACTIVE' alert fires rather than goes quiet."""
    if number is not None:
        return number
    return numbers.get(re.sub(r"[\s_]", "", name).upper(), numbers.get(name.upper(), 0))
