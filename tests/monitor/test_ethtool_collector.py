"""The ethtool collector: a physical NIC's recorded mlx5 `ethtool -S` exported as its flow-control and
congestion counters, named as node_exporter's ethtool collector names them (gpunet_ prefix)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from prometheus_client.core import Metric

from gpunet.errors import CommandError
from gpunet.monitor.collectors import NodeView
from gpunet.monitor.ethtool import collect_ethtool, metric_name
from gpunet.probe.flow import flow_counters
from gpunet.probe.parsers import parse_ethtool_stats

RECORDED = Path(__file__).parent.parent / "fixtures/ethtool_stats/mlx5_xdp_kernel6.5_zero_counters_removed/output.txt"


def node(tmp_path: Path) -> Path:
    """/sys/class/net with one physical NIC (a device link) and one virtual one (none)."""
    for name, physical in (("ens0np0", True), ("veth0", False)):
        directory = tmp_path / "sys/class/net" / name
        directory.mkdir(parents=True)
        (directory / "operstate").write_text("up\n")
        (directory / "mtu").write_text("9000\n")
        if physical:
            (directory / "device").mkdir()
    return tmp_path


def runner(argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    if list(argv) != ["ethtool", "-S", "ens0np0"]:
        raise CommandError(" ".join(argv), 127, "asked for a device that is not physical")
    return subprocess.CompletedProcess(list(argv), 0, RECORDED.read_text(), "")


def samples(families: list[Metric]) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels["device"]): s.value for f in families for s in f.samples}


def test_flow_counters_of_physical_nics_under_node_exporter_names(tmp_path: Path) -> None:
    got = samples(collect_ethtool(NodeView(root=node(tmp_path), run=runner)))
    expected = flow_counters(parse_ethtool_stats(RECORDED.read_text()))
    assert got == {(metric_name(k), "ens0np0"): v for k, v in expected.items()}
    assert got[("gpunet_ethtool_transmitted_pause_ctrl_phy", "ens0np0")] == 44414017
    assert got[("gpunet_ethtool_received_prio0_discards", "ens0np0")] == 441063206498


def test_names_follow_node_exporter() -> None:
    """node_exporter: lower case, non-name characters to _, rx/tx words to received/transmitted."""
    assert metric_name("rx_prio3_pause") == "gpunet_ethtool_received_prio3_pause"
    assert metric_name("tx_pause_ctrl_phy") == "gpunet_ethtool_transmitted_pause_ctrl_phy"
    assert metric_name("rx_prio3_pause_duration") == "gpunet_ethtool_received_prio3_pause_duration"
    assert metric_name("rx_ecn_mark") == "gpunet_ethtool_received_ecn_mark"
    assert metric_name("pause_ctrl_rx") == "gpunet_ethtool_pause_ctrl_received"  # the older mlx5 driver's


def test_a_nic_whose_statistics_fail_costs_only_its_series(tmp_path: Path) -> None:
    def broken(argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
        raise CommandError(" ".join(argv), 127, "ethtool: not installed")
    assert collect_ethtool(NodeView(root=node(tmp_path), run=broken)) == []
