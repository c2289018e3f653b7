"""The exporter's /metrics against recorded trees: byte-exact, parseable, promtool-clean, and a
stuck or failing source costs one collector, never the scrape."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from gpunet.model.plan import Interface
from gpunet.monitor.collectors import Collect, NodeView
from gpunet.monitor.exporter import GpunetCollector, node_collectors

FIXTURES = Path(__file__).parent.parent / "fixtures"
GOLDEN = FIXTURES / "monitor" / "recorded-node.metrics"
PLANNED = (
    # gnra is recorded at MTU 9000 and 10000 Mb/s with carrier: the Plan wants 4200 to show MTU drift.
    Interface(name="gnra", plane="compute", speed_gbps=100, mtu=4200, address="198.18.16.1/24"),
    Interface(name="ens9", plane="storage", speed_gbps=200, mtu=9000, address="198.18.32.1/24"),  # absent
    Interface(name="ib0", plane="compute", speed_gbps=40, mtu=4092, address="198.18.17.1/24", hca="mlx4_0"),
)


def recorded_root(tmp_path: Path) -> Path:
    """A node assembled from recorded pieces: this machine's veth pair, a ConnectX-3's InfiniBand
    port (prometheus/procfs), gpud's /proc/net/snmp and netstat, telegraf's active-backup bond."""
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "sysfs/veth-pair/sys", root / "sys")
    shutil.copytree(FIXTURES / "sysfs/ib-mlx4-qdr/sys/class/infiniband", root / "sys/class/infiniband")
    (root / "proc/net/bonding").mkdir(parents=True)
    shutil.copy(FIXTURES / "proc_net_snmp/gpud_host_a/output.txt", root / "proc/net/snmp")
    shutil.copy(FIXTURES / "proc_net_netstat/gpud_host_a/output.txt", root / "proc/net/netstat")
    shutil.copy(FIXTURES / "proc_net_bonding/telegraf_active_backup_slave_down/output.txt",
                root / "proc/net/bonding/bond0")
    return root


def scrape(view: NodeView, with_plan: bool = True, timeout: float = 5.0) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpunetCollector(node_collectors(view, with_plan), timeout, clock=lambda: 0.0))
    return generate_latest(registry).decode()


def recorded_view(tmp_path: Path) -> NodeView:
    return NodeView(root=recorded_root(tmp_path), planned=PLANNED,
                    addresses=lambda: {"gnra": ("198.18.16.1/24",), "lo": ("127.0.0.1/8",)})


def test_metrics_are_byte_exact_for_a_recorded_node(tmp_path: Path) -> None:
    text = scrape(recorded_view(tmp_path))
    if os.environ.get("GPUNET_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_the_recorded_values_land_in_the_right_series(tmp_path: Path) -> None:
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(scrape(recorded_view(tmp_path)))
               for s in family.samples}
    gnra = (("device", "gnra"), ("plane", "compute"))
    ib = (("device", "mlx4_0"), ("plane", "compute"), ("port", "1"))
    assert samples[("gpunet_network_mtu_bytes", gnra)] == 9000
    assert samples[("gpunet_network_speed_bytes_per_second", gnra)] == 10000e6 / 8
    assert samples[("gpunet_plan_drift", _sorted(*gnra, ("kind", "mtu")))] == 1  # 9000 against the Plan's 4200
    assert samples[("gpunet_plan_drift", _sorted(*gnra, ("kind", "address")))] == 0
    assert samples[("gpunet_plan_drift", (("device", "ens9"), ("kind", "link"), ("plane", "storage")))] == 1
    assert samples[("gpunet_plan_expected_infiniband_rate_bytes_per_second",
                    (("device", "mlx4_0"), ("plane", "compute")))] == 40e9 / 8
    assert ("gpunet_plan_drift", (("device", "gnra"), ("kind", "speed"), ("plane", "compute"))) not in samples
    assert samples[("gpunet_infiniband_port_state", ib)] == 4
    assert samples[("gpunet_infiniband_port_physical_state", ib)] == 5
    assert samples[("gpunet_infiniband_rate_bytes_per_second", ib)] == 40e9 / 8
    words = int((FIXTURES / "sysfs/ib-mlx4-qdr/sys/class/infiniband/mlx4_0/ports/1/counters/port_rcv_data")
                .read_text())
    assert samples[("gpunet_infiniband_port_data_received_bytes_total", ib)] == 4 * words
    assert samples[("gpunet_bond_member_up", (("bond", "bond0"), ("device", "eth3")))] == 0  # the slave down
    assert samples[("gpunet_bond_member_up", (("bond", "bond0"), ("device", "eth2")))] == 1
    assert samples[("gpunet_bond_active_members", (("bond", "bond0"),))] == 1
    assert not any(name == "gpunet_network_carrier" and dict(labels)["device"] == "gnrb"
                   for name, labels in samples), "gnrb is virtual and not in the Plan: excluded"
    assert all(samples[("gpunet_collector_success", (("collector", c),))] == 1
               for c in ("netdev", "netstat", "bonding", "infiniband", "plan"))


def _sorted(*labels: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels))


def test_every_counter_ends_in_total_and_every_name_is_ours(tmp_path: Path) -> None:
    for family in text_string_to_metric_families(scrape(recorded_view(tmp_path))):
        assert family.name.startswith("gpunet_")
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), family.name


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing (Debian package prometheus)")
def test_promtool_check_metrics_is_clean(tmp_path: Path) -> None:
    done = subprocess.run(["promtool", "check", "metrics"], input=scrape(recorded_view(tmp_path)),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done.stdout + done.stderr


def test_include_virtual_exports_every_interface(tmp_path: Path) -> None:
    view = NodeView(root=recorded_root(tmp_path), include_virtual=True)
    assert 'gpunet_network_carrier{device="gnrb",plane=""} 1.0' in scrape(view, with_plan=False)


def test_a_failing_source_fails_its_collector_only(tmp_path: Path) -> None:
    root = recorded_root(tmp_path)
    (root / "proc/net/snmp").unlink()
    (root / "proc/net/netstat").write_text("TcpExt: A B\nTcpExt: 1\n")  # mangled: names without values
    text = scrape(NodeView(root=root))
    assert 'gpunet_collector_success{collector="netstat"} 0.0' in text
    assert 'gpunet_collector_success{collector="netdev"} 1.0' in text
    assert "gpunet_tcp_out_segments_total" not in text
    assert "gpunet_infiniband_port_state{" in text


COLLECT_TIMEOUT_S = 3.0


def test_a_stuck_sysfs_read_costs_the_timeout_not_the_scrape(tmp_path: Path) -> None:
    """A FIFO in place of a sysfs file blocks open() like a wedged driver does."""
    root = recorded_root(tmp_path)
    speed = root / "sys/class/net/gnra/speed"
    speed.unlink()
    os.mkfifo(speed)
    started_runs: list[str] = []

    def counted(name: str, collect: Collect) -> Collect:
        return lambda: (started_runs.append(name), collect())[1]

    collectors = {name: counted(name, c) for name, c in node_collectors(NodeView(root=root), False).items()}
    # the healthy collectors must end within it on a loaded host too; the stuck one never does
    collector = GpunetCollector(collectors, timeout=COLLECT_TIMEOUT_S)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        texts, took = [], []
        for _ in range(3):
            started = time.monotonic()
            texts.append(generate_latest(registry).decode())
            took.append(time.monotonic() - started)
        assert max(took) < COLLECT_TIMEOUT_S + 10, took  # bounded: the read blocks forever
        assert all('gpunet_collector_success{collector="netdev"} 0.0' in t for t in texts)
        assert all('gpunet_collector_success{collector="netstat"} 1.0' in t for t in texts)
        # The stuck run is shared by later scrapes, not restarted: one blocked worker, not three.
        assert started_runs.count("netdev") == 1 and started_runs.count("netstat") == 3
    finally:
        with open(speed, "w") as release:  # unblock the reader so the worker thread ends
            release.write("100000\n")


def test_concurrent_scrapes_get_the_same_complete_answer(tmp_path: Path) -> None:
    view = recorded_view(tmp_path)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpunetCollector(node_collectors(view, True), clock=lambda: 0.0))
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(generate_latest(registry).decode())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and len(set(results)) == 1


def test_roce_hw_counters_are_exported_and_lifespan_is_not(tmp_path: Path) -> None:
    """A tree written here, in sysfs's layout: no recorded mlx5 hw_counters tree was found to copy."""
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    for name, value in {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
                        "link_layer": "Ethernet", "counters/port_xmit_data": "1000",
                        "hw_counters/np_cnp_sent": "12", "hw_counters/out_of_sequence": "3",
                        "hw_counters/lifespan": "10"}.items():
        (port / name).parent.mkdir(parents=True, exist_ok=True)
        (port / name).write_text(value + "\n")
    text = scrape(NodeView(root=tmp_path), with_plan=False)
    labels = 'device="mlx5_0",plane="",port="1"'
    assert f'gpunet_infiniband_hw_counter_total{{counter="np_cnp_sent",{labels}}} 12.0' in text
    assert f'gpunet_infiniband_hw_counter_total{{counter="out_of_sequence",{labels}}} 3.0' in text
    assert "lifespan" not in text
    assert f"gpunet_infiniband_port_data_transmitted_bytes_total{{{labels}}} 4000.0" in text
    assert f"gpunet_infiniband_rate_bytes_per_second{{{labels}}} 5e+10" in text


def test_counters_come_from_one_read_of_proc_net_dev(tmp_path: Path) -> None:
    """Where /proc/net/dev exists it gives every interface's counters at once (recorded here);
    sysfs then only gives the link facts, written by the test for the recorded eth0."""
    eth0 = tmp_path / "sys/class/net/eth0"
    (eth0 / "device").mkdir(parents=True)
    for name, value in {"operstate": "up", "carrier": "1", "mtu": "1500", "speed": "25000"}.items():
        (eth0 / name).write_text(value + "\n")
    (tmp_path / "proc/net").mkdir(parents=True)
    shutil.copy(FIXTURES / "proc_net_dev/buildhost/output.txt", tmp_path / "proc/net/dev")
    text = scrape(NodeView(root=tmp_path), with_plan=False)
    assert 'gpunet_network_receive_bytes_total{device="eth0",plane=""} 1.23195243e+08' in text
    assert 'gpunet_network_transmit_packets_total{device="eth0",plane=""} 2611.0' in text
    assert 'device="lo"' not in text  # virtual, and not in a Plan
    (tmp_path / "proc/net/dev").write_text("garbage\n")
    assert 'gpunet_collector_success{collector="netdev"} 0.0' in scrape(NodeView(root=tmp_path), with_plan=False)
