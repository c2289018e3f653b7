"""sysfs readers over a recorded tree, and over a live namespace (lab marker)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gpunet.probe.sysfs import read_ib_ports, read_interfaces

RECORDED = Path(__file__).parent.parent / "fixtures" / "sysfs" / "veth-pair"


def test_recorded_veth_pair() -> None:
    interfaces = {i.name: i for i in read_interfaces(RECORDED)}
    assert set(interfaces) == {"gnra", "gnrb"}
    gnra = interfaces["gnra"]
    assert (gnra.operstate, gnra.carrier, gnra.mtu, gnra.speed_mbps, gnra.duplex) == ("up", True, 9000, 10000, "full")
    assert gnra.virtual and gnra.master is None
    assert {"rx_bytes", "tx_packets", "rx_errors", "rx_dropped"} <= set(gnra.statistics)
    assert read_ib_ports(RECORDED) == []  # no /sys/class/infiniband here


def test_missing_tree_reads_as_nothing(tmp_path: Path) -> None:
    assert read_interfaces(tmp_path) == [] and read_ib_ports(tmp_path) == []


@pytest.mark.lab
def test_live_namespace_matches_ip_link() -> None:
    name = "gnsysfsprobe"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "add", "gnla", "mtu", "4200", "type", "veth", "peer", "name", "gnlb"],
                       check=True)
        subprocess.run(["ip", "-n", name, "link", "set", "gnla", "up"], check=True)
        script = ("import json; from gpunet.probe.sysfs import read_interfaces; "
                  "print(json.dumps([i.model_dump() for i in read_interfaces()]))")
        out = subprocess.run(["ip", "netns", "exec", name, "python", "-c", script], capture_output=True, text=True,
                             check=True).stdout
        seen = {i["name"]: i for i in json.loads(out)}
        links = {link["ifname"]: link for link in json.loads(subprocess.run(
            ["ip", "-n", name, "-j", "link"], capture_output=True, text=True, check=True).stdout)}
        assert seen["gnla"]["mtu"] == links["gnla"]["mtu"] == 4200
        assert seen["gnla"]["operstate"] == "lowerlayerdown" and seen["gnla"]["carrier"] is False  # peer down
        assert seen["lo"]["virtual"]
    finally:
        subprocess.run(["ip", "netns", "del", name], check=True)


def test_recorded_infiniband_port() -> None:
    """A ConnectX-3 QDR port (prometheus/procfs's recorded tree, Apache-2.0; see SOURCE.md)."""
    (port,) = read_ib_ports(RECORDED.parent / "ib-mlx4-qdr")
    assert (port.ca, port.port, port.state, port.physical_state) == ("mlx4_0", 1, "ACTIVE", "LinkUp")
    assert (port.rate_gbps, port.link_layer) == (40.0, "InfiniBand")
    assert port.counters["symbol_error"] == 0 and port.counters["port_rcv_data"] > 0
    assert len(port.counters) == 17
