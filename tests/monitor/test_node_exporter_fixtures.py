"""gpunet's collectors against node_exporter's own fixture tree and prometheus/procfs's: for every
quantity both export, gpunet's value is node_exporter's (tests/fixtures/node_exporter/SOURCE.md).

Two trees. node_exporter's sys.ttar (net, bonding, InfiniBand) with its proc/net/{snmp,netstat,
snmp6}, against the e2e-output.txt node_exporter's end-to-end test expects from it. procfs's
fixtures.ttar (/proc/net/dev, sysfs eth0, four InfiniBand ports, mlx5_0 with hw_counters and
phys_state "4: ACTIVE"), against node_exporter 1.5.0's output on that tree, recorded here.

The mapping, node_exporter name -> gpunet name, with the unit conversion each side applies, is
SAME_QUANTITY below; every node_exporter series of these collectors is either in it or in
NOT_EXPORTED with the reason, so a new upstream series cannot slip by uncompared."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from gpunet.monitor.collectors import CollectorError, NodeView, collect_bonding
from gpunet.monitor.exporter import GpunetCollector, node_collectors
from tests.ttar import extract_ttar

FIXTURES = Path(__file__).parent.parent / "fixtures" / "node_exporter"
Key = tuple[str, frozenset[tuple[str, str]]]

# node_exporter series -> gpunet series (the same number unless noted). Units: IB data counters
# are 4-byte words in sysfs, both multiply by 4; IB rate "40 Gb/sec" -> bytes/s (x 1e9/8) on both
# sides; speed is sysfs Mb/s, both x 1e6/8; IB states are the number before the colon.
SAME_QUANTITY = {
    "node_network_carrier": "gpunet_network_carrier",
    "node_network_up": "gpunet_network_up",  # 1 when operstate is "up", on both sides
    "node_network_mtu_bytes": "gpunet_network_mtu_bytes",
    "node_network_speed_bytes": "gpunet_network_speed_bytes_per_second",
    "node_network_receive_bytes_total": "gpunet_network_receive_bytes_total",
    "node_network_transmit_bytes_total": "gpunet_network_transmit_bytes_total",
    "node_network_receive_packets_total": "gpunet_network_receive_packets_total",
    "node_network_transmit_packets_total": "gpunet_network_transmit_packets_total",
    "node_network_receive_errs_total": "gpunet_network_receive_errors_total",
    "node_network_transmit_errs_total": "gpunet_network_transmit_errors_total",
    "node_network_receive_drop_total": "gpunet_network_receive_drops_total",
    "node_network_transmit_drop_total": "gpunet_network_transmit_drops_total",
    "node_bonding_slaves": "gpunet_bond_members",  # label master -> bond
    "node_bonding_active": "gpunet_bond_active_members",
    "node_netstat_Tcp_OutSegs": "gpunet_tcp_out_segments_total",
    "node_netstat_Tcp_RetransSegs": "gpunet_tcp_retransmitted_segments_total",
    "node_infiniband_state_id": "gpunet_infiniband_port_state",
    "node_infiniband_physical_state_id": "gpunet_infiniband_port_physical_state",
    "node_infiniband_rate_bytes_per_second": "gpunet_infiniband_rate_bytes_per_second",
    "node_infiniband_port_data_received_bytes_total": "gpunet_infiniband_port_data_received_bytes_total",
    "node_infiniband_port_data_transmitted_bytes_total": "gpunet_infiniband_port_data_transmitted_bytes_total",
    "node_infiniband_port_packets_received_total": "gpunet_infiniband_port_packets_received_total",
    "node_infiniband_port_packets_transmitted_total": "gpunet_infiniband_port_packets_transmitted_total",
    "node_infiniband_unicast_packets_received_total": "gpunet_infiniband_port_unicast_packets_received_total",
    "node_infiniband_unicast_packets_transmitted_total": "gpunet_infiniband_port_unicast_packets_transmitted_total",
    "node_infiniband_multicast_packets_received_total": "gpunet_infiniband_port_multicast_packets_received_total",
    "node_infiniband_multicast_packets_transmitted_total":
        "gpunet_infiniband_port_multicast_packets_transmitted_total",
    "node_infiniband_port_transmit_wait_total": "gpunet_infiniband_port_transmit_wait_total",  # ticks
    "node_infiniband_port_errors_received_total": "gpunet_infiniband_port_receive_errors_total",
    "node_infiniband_port_discards_received_total": "gpunet_infiniband_port_receive_discards_total",
    "node_infiniband_port_discards_transmitted_total": "gpunet_infiniband_port_transmit_discards_total",
    "node_infiniband_port_constraint_errors_received_total":
        "gpunet_infiniband_port_receive_constraint_errors_total",
    "node_infiniband_port_constraint_errors_transmitted_total":
        "gpunet_infiniband_port_transmit_constraint_errors_total",
    "node_infiniband_port_receive_remote_physical_errors_total":
        "gpunet_infiniband_port_receive_remote_physical_errors_total",
    "node_infiniband_port_receive_switch_relay_errors_total":
        "gpunet_infiniband_port_receive_switch_relay_errors_total",
    "node_infiniband_symbol_error_total": "gpunet_infiniband_symbol_errors_total",
    "node_infiniband_link_downed_total": "gpunet_infiniband_link_downed_total",
    "node_infiniband_link_error_recovery_total": "gpunet_infiniband_link_error_recovery_total",
    "node_infiniband_local_link_integrity_errors_total": "gpunet_infiniband_local_link_integrity_errors_total",
    "node_infiniband_excessive_buffer_overrun_errors_total":
        "gpunet_infiniband_excessive_buffer_overrun_errors_total",
    "node_infiniband_vl15_dropped_total": "gpunet_infiniband_vl15_dropped_total",
}
NETSTAT = re.compile(r"node_netstat_(?P<group>[A-Za-z0-9]+?)_(?P<counter>\w+)")  # -> gpunet_netstat_total
NOT_EXPORTED = {  # node_exporter series gpunet leaves out, and why
    r"node_infiniband_info": "labels only (board id, firmware)",
    r"node_infiniband_legacy_\w+": "counters_ext of kernels before 4.5",
    r"node_netstat_(Ip_Forwarding|Tcp_CurrEstab)": "gauges; gpunet_netstat_total holds counters",
    r"node_network_(receive|transmit)_(compressed|fifo|frame|multicast|nohandler|carrier|colls)_total":
        "/proc/net/dev columns gpunet does not export",
    r"node_network_(address_assign_type|carrier_(up_|down_)?changes_total|device_id|dormant|flags|iface_\w+"
    r"|info|name_assign_type|net_dev_group|protocol_type|transmit_queue_length)": "netclass details",
    r"node_scrape_collector_success": "node_exporter's own (gpunet_collector_success)",
}
# hw_counters/<file>: node_exporter's name (infiniband_linux.go); gpunet exports the file's value
# unchanged as gpunet_infiniband_hw_counter_total{counter="<file>"}, as node_exporter does.
HW_COUNTER_NAMES = {
    "duplicate_request": "duplicate_requests_packets_total", "implied_nak_seq_err": "implied_nak_seq_errors_total",
    "local_ack_timeout_err": "local_ack_timeout_errors_total", "np_cnp_sent": "np_cnp_packets_sent_total",
    "np_ecn_marked_roce_packets": "np_ecn_marked_roce_packets_received_total",
    "out_of_buffer": "out_of_buffer_drops_total", "out_of_sequence": "out_of_sequence_packets_received_total",
    "packet_seq_err": "packet_sequence_errors_total", "req_cqe_error": "req_cqes_errors_total",
    "req_cqe_flush_error": "req_cqes_flush_errors_total", "req_remote_access_errors": "req_remote_access_errors_total",
    "req_remote_invalid_request": "req_remote_invalid_request_errors_total",
    "resp_cqe_error": "resp_cqes_errors_total", "resp_cqe_flush_error": "resp_cqes_flush_errors_total",
    "resp_local_length_error": "resp_local_length_errors_total",
    "resp_remote_access_errors": "resp_remote_access_errors_total",
    "rnr_nak_retry_err": "rnr_nak_retry_packets_received_total", "roce_adp_retrans": "roce_adp_retransmits_total",
    "roce_adp_retrans_to": "roce_adp_retransmits_timeout_total", "roce_slow_restart": "roce_slow_restart_used_total",
    "roce_slow_restart_cnps": "roce_slow_restart_cnps_total", "roce_slow_restart_trans": "roce_slow_restart_total",
    "rp_cnp_handled": "rp_cnp_packets_handled_total", "rp_cnp_ignored": "rp_cnp_ignored_packets_received_total",
    "rx_atomic_requests": "rx_atomic_requests_total", "rx_dct_connect": "rx_dct_connect_requests_total",
    "rx_icrc_encapsulated": "rx_icrc_encapsulated_errors_total", "rx_read_requests": "rx_read_requests_total",
    "rx_write_requests": "rx_write_requests_total",
}
# node_exporter's end-to-end test reads netdev from its CI host's own lo over netlink
# (--collector.netdev.device-include=lo), not from the fixture tree: those rows are no fixture's.
E2E_LIVE_HOST = re.compile(r"node_network_(receive|transmit)_\w+_total")


@pytest.fixture(scope="module")
def node_exporter_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("node_exporter")
    extract_ttar(FIXTURES / "sys.ttar", root)
    shutil.copytree(FIXTURES / "proc", root / "proc")
    return root


@pytest.fixture(scope="module")
def procfs_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("procfs")
    extract_ttar(FIXTURES / "procfs/fixtures.ttar", root)
    return root / "fixtures"


def samples(text: str) -> dict[Key, float]:
    """(name, labels) -> value; gpunet's `plane` (always "" without a Plan) left out."""
    return {(s.name, frozenset((k, v) for k, v in s.labels.items() if k != "plane")): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def gpunet_scrape(root: Path) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpunetCollector(node_collectors(NodeView(root=root, include_virtual=True), False)))
    return generate_latest(registry).decode()


def gpunet_key(key: Key) -> Key | None:
    """The gpunet series holding node_exporter's `key`, or None where gpunet does not export it."""
    name, labels = key
    if name in SAME_QUANTITY:
        return SAME_QUANTITY[name], frozenset(("bond" if k == "master" else k, v) for k, v in labels)
    if any(re.fullmatch(pattern, name) for pattern in NOT_EXPORTED):
        return None
    found = NETSTAT.fullmatch(name)
    assert found, f"{name}: neither mapped nor listed as not exported"
    return "gpunet_netstat_total", frozenset({("group", found["group"]), ("counter", found["counter"])})


def compared(expected: dict[Key, float], got: dict[Key, float]) -> dict[Key, tuple[float, float | None]]:
    """node_exporter's value and gpunet's, for every series node_exporter has that gpunet maps."""
    pairs = {key: gpunet_key(key) for key in expected}
    return {key: (expected[key], got.get(mapped)) for key, mapped in pairs.items() if mapped is not None}


def test_every_shared_value_is_node_exporters_on_its_own_fixture_tree(node_exporter_root: Path) -> None:
    expected = samples((FIXTURES / "e2e-output.txt").read_text())
    expected = {k: v for k, v in expected.items() if not E2E_LIVE_HOST.fullmatch(k[0])}
    pairs = compared(expected, samples(gpunet_scrape(node_exporter_root)))
    assert {k: p for k, p in pairs.items() if p[0] != p[1]} == {}
    assert len(pairs) >= 80, "the comparison must cover the tree (bonding, netclass, netstat, infiniband)"
    families = {key[0] for key in pairs}
    assert {"node_bonding_active", "node_netstat_Ip6_InOctets", "node_infiniband_port_transmit_wait_total",
            "node_network_speed_bytes"} <= families


def test_every_shared_value_is_node_exporters_on_procfs_tree(procfs_root: Path) -> None:
    """node_exporter 1.5.0 on procfs's tree: /proc/net/dev counters, eth0's sysfs facts, four IB
    ports; mlx5_0's phys_state file says "4: ACTIVE" and both export 4."""
    expected = samples((FIXTURES / "procfs/node_exporter-1.5.0-output.txt").read_text())
    got = samples(gpunet_scrape(procfs_root))
    pairs = compared(expected, got)
    assert {k: p for k, p in pairs.items() if p[0] != p[1]} == {}
    assert len(pairs) >= 100
    mlx5 = frozenset({("device", "mlx5_0"), ("port", "1")})
    assert pairs[("node_infiniband_physical_state_id", mlx5)] == (4, 4)


def test_hw_counters_are_the_files_values_under_node_exporters_names(procfs_root: Path) -> None:
    counters = procfs_root / "sys/class/infiniband/mlx5_0/ports/1/hw_counters"
    got = samples(gpunet_scrape(procfs_root))
    files = {p.name: int(p.read_text()) for p in counters.iterdir() if p.name != "lifespan"}
    assert set(files) <= set(HW_COUNTER_NAMES), "a hw counter node_exporter does not name"
    exported = {dict(labels)["counter"]: value for (name, labels), value in got.items()
                if name == "gpunet_infiniband_hw_counter_total" and dict(labels)["device"] == "mlx5_0"}
    assert exported == files and len(files) >= 20


def test_bonding_masters_is_a_file_not_an_interface(node_exporter_root: Path) -> None:
    assert (node_exporter_root / "sys/class/net/bonding_masters").is_file()
    devices = {dict(labels).get("device") for (name, labels) in samples(gpunet_scrape(node_exporter_root))
               if name.startswith("gpunet_network_")}
    assert devices == {"bond0", "dmz", "eth0", "int"}


def test_one_cut_line_of_proc_net_dev_costs_that_line_only(
        procfs_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """docker0's line cut short (node_exporter 1.5.0 panics on this file): the other interfaces'
    counters are node_exporter's values from the intact file, eth0's sysfs facts are all there,
    and the skipped line is counted and logged."""
    root = tmp_path / "root"
    shutil.copytree(procfs_root, root, symlinks=True)
    shutil.copy(FIXTURES / "procfs/proc-net-dev-one-line-cut-short", root / "proc/net/dev")
    with caplog.at_level(logging.WARNING, logger="gpunet.exporter"):
        text = gpunet_scrape(root)
    got = samples(text)
    expected = samples((FIXTURES / "procfs/node_exporter-1.5.0-output.txt").read_text())
    intact = {k: v for k, v in compared(expected, got).items() if ("device", "docker0") not in k[1]}
    assert {k: p for k, p in intact.items() if p[0] != p[1]} == {}
    assert not any(("device", "docker0") in labels for _, labels in got)
    assert got[("gpunet_network_speed_bytes_per_second", frozenset({("device", "eth0")}))] == 125e6
    source = str(root / "proc/net/dev")
    assert got[("gpunet_skipped_lines", frozenset({("source", source)}))] == 1
    assert got[("gpunet_collector_success", frozenset({("collector", "netdev")}))] == 1
    assert "docker0" in caplog.text and "line 5" in caplog.text


def test_bonds_come_from_sysfs_without_proc_net_bonding(node_exporter_root: Path) -> None:
    assert not (node_exporter_root / "proc/net/bonding").exists()
    got = samples(gpunet_scrape(node_exporter_root))
    int_bond = frozenset({("bond", "int"), ("device", "eth1")})
    assert got[("gpunet_bond_member_up", int_bond)] == 0  # int/slave_eth1/bonding_slave/mii_status: down


def test_bonding_fails_when_bonds_exist_and_none_can_be_read(node_exporter_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(node_exporter_root / "sys", root / "sys", symlinks=True)
    for slaves in (root / "sys/class/net").glob("*/bonding/slaves"):
        slaves.unlink()
    with pytest.raises(CollectorError, match="bonding/slaves"):
        collect_bonding(NodeView(root=root))
    (root / "sys/class/net/bonding_masters").unlink()  # no bonding driver: no bonds, and that is known
    assert [len(family.samples) for family in collect_bonding(NodeView(root=root))] == [0, 0, 0]
    with pytest.raises(CollectorError, match="neither"):
        collect_bonding(NodeView(root=tmp_path / "nothing"))
