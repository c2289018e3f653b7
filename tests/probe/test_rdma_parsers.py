"""The RDMA path parsers beyond their recorded cases (tests/probe/test_parsers.py walks those): damaged
or cut outputs are refused, the probe-layer helpers hold, and fuzzed text raises only ParseError."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpunet.errors import ParseError
from gpunet.model.rdma import HostIommu
from gpunet.probe.flow import growth, is_congestion, is_pause, parse_ethtool_flow, parse_flow_sample
from gpunet.probe.nccl_log import parse_nccl_debug_log
from gpunet.probe.parsers import parse_ethtool_stats
from gpunet.probe.pci import parse_lspci, upstream_bridges
from gpunet.probe.roce import parse_gpu_bus_ids, parse_mlnx_qos, parse_show_gids
from gpunet.probe.topo import parse_nvidia_smi_topo

FIXTURES = Path(__file__).parent.parent / "fixtures"
PARSERS: dict[str, Callable[[str], Any]] = {
    "topo": parse_nvidia_smi_topo, "lspci": parse_lspci, "mlnx_qos": parse_mlnx_qos, "show_gids": parse_show_gids,
    "nccl": parse_nccl_debug_log, "flow": parse_ethtool_flow, "sample": parse_flow_sample,
    "bus_ids": parse_gpu_bus_ids}


def recorded(tool: str, case: str) -> str:
    return (FIXTURES / tool / case / "output.txt").read_text()


def test_a_row_that_lost_a_tab_is_refused() -> None:
    """nccl-tests#333 pasted 'PXBNODE' for 'PXB\\tNODE': the cells no longer line up with the header."""
    text = recorded("nvidia_smi_topo", "h200_dgx_12nic_storage_pairs").replace("PXB\tNODE\tNODE\tNODE\tNODE\tNODE",
                                                                               "PXBNODE\tNODE\tNODE\tNODE\tNODE", 1)
    with pytest.raises(ParseError, match="20 link cells"):
        parse_nvidia_smi_topo(text)


def test_nic_column_without_legend_is_refused() -> None:
    text = recorded("nvidia_smi_topo", "h100_8gpu_8nic_one_per_gpu").split("NIC Legend:")[0]
    with pytest.raises(ParseError, match="NIC legend"):
        parse_nvidia_smi_topo(text)


def test_show_gids_cut_short_is_refused() -> None:
    lines = recorded("show_gids", "cx6_ipv4_v2_at_index5").splitlines()
    with pytest.raises(ParseError, match="n_gids_found"):
        parse_show_gids("\n".join(lines[:-2] + lines[-1:]))


def test_show_gids_row_of_a_port_without_netdev_is_read() -> None:
    """An InfiniBand port on a mixed host prints no IPv4 and no netdev column (recorded: 'mlx5_5 1 0 fe80:... v1')."""
    rows = parse_show_gids(recorded("show_gids", "mlx5_eight_hcas_ib_port_without_netdev"))
    assert [(r.hca, r.index, r.ipv4, r.version, r.netdev) for r in rows if r.netdev is None] == [
        ("mlx5_5", 0, None, "v1", None)]


@pytest.mark.parametrize("row", [
    "mlx5_0\t1\t2\t0000:0000:0000:0000:0000:ffff:c0a8:d3f2\t192.168.211.242\t\trdma0",  # no version
    "mlx5_0\t1\t2\t0000:0000:0000:0000:0000:ffff:c0a8:d3f2\t192.168.211.242\tv2\trdma0\textra",
    "mlx5_0\t1\tx\tfe80:0000:0000:0000:0ac0:ebff:fe21:03da\t\t\tv1\trdma0",  # index not a number
    "mlx5_0\t1\t0\tfe80::0ac0:ebff:fe21:03da\t\t\tv1\trdma0"])  # GID not as show_gids writes it
def test_show_gids_row_that_is_not_one_is_refused(row: str) -> None:
    header = recorded("show_gids", "rdma0_tabs_ipv4_v2_at_index3").splitlines()[:2]
    with pytest.raises(ParseError, match="not a GID row"):
        parse_show_gids("\n".join([*header, row, "n_gids_found=1"]))


def test_mlnx_qos_with_an_unknown_line_is_refused() -> None:
    with pytest.raises(ParseError, match="not a line mlnx_qos prints"):
        parse_mlnx_qos(recorded("mlnx_qos", "dscp_trust_pfc_on_priority3_tsa_vendor") + "Sending something else\n")


def test_lspci_detail_before_any_device_is_refused() -> None:
    with pytest.raises(ParseError):
        parse_lspci("\tNUMA node: 0\n" + recorded("lspci", "epyc_gpu_server_acs_off"))


def test_text_without_nccl_lines_is_refused() -> None:
    with pytest.raises(ParseError, match="NCCL INFO"):
        parse_nccl_debug_log("Traceback (most recent call last):\n  File x\n")


def test_veth_statistics_have_no_flow_counters() -> None:
    with pytest.raises(ParseError, match="pause"):
        parse_ethtool_flow(recorded("ethtool_stats", "veth"))


def test_grep_of_per_priority_traffic_is_no_flow_reading() -> None:
    """byteps#179's `ethtool -S | grep prio`, both readings: per-priority bytes, no pause counter; the flow parser
    refuses them rather than report a NIC with nothing paused."""
    with pytest.raises(ParseError, match="pause"):
        parse_ethtool_flow(recorded("ethtool_stats", "mlx5_grep_prio_all_traffic_on_priority0"))
    with pytest.raises(ParseError, match="pause"):
        parse_ethtool_flow(recorded("ethtool_stats", "mlx5_grep_prio_same_port_later_reading"))


def test_two_readings_of_one_port_grew_on_priority_zero_only() -> None:
    """byteps#179's two greps of enp178s0f0, taken apart: only the four priority-0 counters moved, by the
    traffic in between (about 1076-byte frames both ways); priorities 1-7 stayed at zero."""
    earlier = {"enp178s0f0": parse_ethtool_stats(recorded("ethtool_stats", "mlx5_grep_prio_all_traffic_on_priority0"))}
    later = {"enp178s0f0": parse_ethtool_stats(recorded("ethtool_stats", "mlx5_grep_prio_same_port_later_reading"))}
    assert growth(earlier, later) == {
        "enp178s0f0:rx_prio0_bytes": 143485484638, "enp178s0f0:rx_prio0_packets": 133317745,
        "enp178s0f0:tx_prio0_bytes": 149624689122, "enp178s0f0:tx_prio0_packets": 138971449}
    assert growth(later, earlier) == {}



def test_pause_transitions_and_storm_events_are_kept_but_are_not_pause_frames() -> None:
    """The ethq ConnectX-4 Lx output's rx_global_pause_transition, and the pause-storm watchdog's events newer
    mlx5 drivers print: stored with the other flow counters, while only frame counts say a pair paused."""
    stats = recorded("ethtool_flow", "cx4lx_kernel4.15_per_priority_traffic_global_pause")
    storm = stats + "tx_pause_storm_warning_events: 3\ntx_pause_storm_error_events: 1\n"
    counters = parse_ethtool_flow(storm)
    assert (counters["rx_global_pause_transition"], counters["tx_pause_storm_warning_events"],
            counters["tx_pause_storm_error_events"]) == (0, 3, 1)
    assert sorted(name for name in counters if is_pause(name)) == [
        "rx_global_pause", "rx_pause_ctrl_phy", "tx_global_pause", "tx_pause_ctrl_phy"]


def test_the_older_mlx5_drivers_pause_names_are_pause_frames() -> None:
    """ethq's first mlx5_core file (driver 3.0-1, the ConnectX-4 Lx of issue #8 before its kernel 4.15
    upgrade): 802.3x pause as pause_ctrl_rx/tx, and no per-priority group, so no PFC counter at all."""
    stats = recorded("ethtool_stats", "cx4lx_kernel4.4_legacy_names_no_per_priority")
    assert not [name for name in parse_ethtool_stats(stats) if "prio" in name]
    counters = parse_ethtool_flow(stats)
    assert sorted(name for name in counters if is_pause(name)) == ["pause_ctrl_rx", "pause_ctrl_tx"]


def test_bridges_above_a_device_nearest_first() -> None:
    devices = parse_lspci((FIXTURES / "node_trees/hgx-h100-roce/tools/lspci-vvv.txt").read_text())
    assert [b.address for b in upstream_bridges(devices, "0000:13:00.0")] == [
        "0000:11:01.0", "0000:10:00.0", "0000:00:01.0"]
    assert upstream_bridges(devices, "0000:99:00.0") == []


def test_gpu_bus_ids_as_lspci_writes_them() -> None:
    assert parse_gpu_bus_ids("0, 00000000:1B:00.0\n1, 00000000:43:00.0\n") == {
        "GPU0": "0000:1b:00.0", "GPU1": "0000:43:00.0"}


@pytest.mark.parametrize(("cmdline", "units", "mode"), [
    (("intel_iommu=on", "iommu=pt"), 2, "passthrough"), (("intel_iommu=on",), 2, "translated"),
    ((), 0, "off"), (("amd_iommu=off",), 1, "off"), (("iommu.passthrough=1",), 4, "passthrough")])
def test_iommu_mode(cmdline: tuple[str, ...], units: int, mode: str) -> None:
    assert HostIommu(cmdline=cmdline, units=units).mode == mode


def test_flow_sample_growth_tells_pause_from_congestion() -> None:
    before = parse_flow_sample("@ethtool ens0np0\n     rx_prio3_pause: 10\n     tx_bytes: 5\n"
                               "@file /sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent 7\n")
    after = parse_flow_sample("@ethtool ens0np0\n     rx_prio3_pause: 25\n"
                              "@file /sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent 9\n")
    grown = growth(before, after)
    assert grown == {"ens0np0:rx_prio3_pause": 15, "mlx5_0/1:np_cnp_sent": 2}
    assert [k for k in grown if is_pause(k)] == ["ens0np0:rx_prio3_pause"]
    assert [k for k in grown if is_congestion(k)] == ["mlx5_0/1:np_cnp_sent"]


def test_flow_sample_line_outside_a_section_is_refused() -> None:
    with pytest.raises(ParseError):
        parse_flow_sample("rx_prio3_pause: 4\n")


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(PARSERS)), st.text(max_size=300))
def test_fuzzed_text_raises_nothing_but_parse_error(tool: str, text: str) -> None:
    with contextlib.suppress(ParseError):
        PARSERS[tool](text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(PARSERS)), st.lists(st.sampled_from(
    ["GPU0", "NIC0", "X", "PIX", "SYS", "\t", " ", "\n", "NIC Legend:", "  NIC0: mlx5_0", "prio:3 dscp:26,",
     "Priority trust state: dscp", "PFC configuration:", "enabled 0 0 0 1 0 0 0 0", "ACSCtl:", "SrcValid+",
     "00:01.0 PCI bridge: x", "n_gids_found=1", "NCCL INFO", "Channel 00/0 : 1[0] -> 0[0] via NET/IB/0/GDRDMA",
     "@ethtool e", "@file /sys/class/infiniband/m/ports/1/hw_counters/np_cnp_sent 1", "0, 0000:00:00.0"]),
    max_size=40))
def test_fuzzed_tokens_of_these_outputs_raise_nothing_but_parse_error(tool: str, tokens: list[str]) -> None:
    with contextlib.suppress(ParseError):
        PARSERS[tool]("".join(tokens))
