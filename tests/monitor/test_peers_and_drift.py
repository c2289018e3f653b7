"""Peer probes (bounded rounds, histograms, loss) and Plan drift per interface, pure."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client.core import Metric

from gpunet.api import plan_spec
from gpunet.model.plan import Interface
from gpunet.model.state import InterfaceState
from gpunet.monitor.collectors import NodeView
from gpunet.monitor.drift import collect_plan, interface_drift
from gpunet.monitor.peers import RTT_BUCKETS, PeerProber, ping_probes, system_ping
from gpunet.probe.peers import PeerProbe

# iputils ping -q, recorded on this machine (loopback), and its answer when nothing replies.
PING_OK = """PING 127.0.0.1 (127.0.0.1) from 127.0.0.1 : 56(84) bytes of data.

--- 127.0.0.1 ping statistics ---
1 packets transmitted, 1 received, 0% packet loss, time 0ms
rtt min/avg/max/mdev = 0.043/0.043/0.043/0.000 ms
"""
PING_LOST = """PING 198.18.0.9 (198.18.0.9) from 198.18.0.2 : 56(84) bytes of data.

--- 198.18.0.9 ping statistics ---
1 packets transmitted, 0 received, 100% packet loss, time 0ms

"""


def _probes(count: int) -> list[PeerProbe]:
    return [PeerProbe("ping", f"gpu{i}", "compute", "198.18.16.1", f"198.18.16.{i + 2}") for i in range(count)]


def _samples(families: list[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def test_rounds_are_bounded_and_cover_every_peer_in_turn() -> None:
    pinged: list[str] = []
    prober = PeerProber(_probes(10), lambda p: pinged.append(p.peer) or 0.0002, per_round=4)
    for _ in range(3):
        prober.probe_round()
    assert len(pinged) == 12 and set(pinged) == {f"gpu{i}" for i in range(10)}
    assert sorted(pinged[:4]) == ["gpu0", "gpu1", "gpu2", "gpu3"]


def test_histograms_and_loss_per_peer() -> None:
    rtts = {"gpu0": [0.00004, 0.0003, None], "gpu1": [0.002, 0.002, 0.002]}
    prober = PeerProber(_probes(2), lambda p: rtts[p.peer].pop(0), per_round=2)
    for _ in range(3):
        prober.probe_round()
    samples = _samples(prober.collect())
    gpu0 = (("peer", "gpu0"), ("plane", "compute"))
    assert samples[("gpunet_peer_probes_total", gpu0)] == 3
    assert samples[("gpunet_peer_probe_failures_total", gpu0)] == 1
    assert samples[("gpunet_peer_consecutive_failures", gpu0)] == 1  # the last probe went unanswered
    assert samples[("gpunet_peer_rtt_seconds_count", gpu0)] == 2  # answered probes only
    assert samples[("gpunet_peer_rtt_seconds_sum", gpu0)] == pytest.approx(0.00034)
    assert samples[("gpunet_peer_rtt_seconds_bucket", (("le", "5e-05"), *gpu0))] == 1
    assert samples[("gpunet_peer_rtt_seconds_bucket", (("le", "0.0005"), *gpu0))] == 2
    gpu1 = (("peer", "gpu1"), ("plane", "compute"))
    assert samples[("gpunet_peer_consecutive_failures", gpu1)] == 0
    assert samples[("gpunet_peer_rtt_seconds_bucket", (("le", "0.001"), *gpu1))] == 0
    assert samples[("gpunet_peer_rtt_seconds_bucket", (("le", "0.0025"), *gpu1))] == 3
    assert samples[("gpunet_peer_rtt_seconds_bucket", (("le", "+Inf"), *gpu1))] == 3
    assert len(RTT_BUCKETS) + 1 == sum(1 for name, labels in samples
                                       if name == "gpunet_peer_rtt_seconds_bucket" and ("peer", "gpu1") in labels)


@pytest.mark.parametrize(("stdout", "code", "expected"), [(PING_OK, 0, 0.000043), (PING_LOST, 1, None)])
def test_system_ping_reads_the_rtt(stdout: str, code: int, expected: float | None) -> None:
    calls: list[list[str]] = []

    def run(argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), code, stdout, "")

    assert system_ping(run)(_probes(1)[0]) == (pytest.approx(expected) if expected else None)
    assert calls == [["ping", "-n", "-q", "-c", "1", "-W", "1", "-I", "198.18.16.1", "--", "198.18.16.2"]]


def test_the_plan_gives_one_ping_per_peer_and_shared_plane() -> None:
    plan = plan_spec(None)  # the built-in example
    node = plan.nodes[0]
    probes = ping_probes(plan, node)
    assert probes and all(p.kind == "ping" and p.peer != node.name for p in probes)
    assert len({(p.plane, p.peer) for p in probes}) == len(probes)


PLANNED = Interface(name="ens1", plane="compute", speed_gbps=400, mtu=9000, address="10.1.0.5/24")


def _seen(**changes: object) -> InterfaceState:
    base = {"name": "ens1", "operstate": "up", "carrier": True, "mtu": 9000, "speed_mbps": 400000}
    return InterfaceState.model_validate(base | changes)


@pytest.mark.parametrize(("seen", "addresses", "drifted"), [
    (_seen(), {"ens1": ("10.1.0.5/24",)}, set()),
    (None, {}, {"link"}),
    (_seen(operstate="down"), {"ens1": ("10.1.0.5/24",)}, {"link"}),
    (_seen(carrier=False), {"ens1": ("10.1.0.5/24",)}, {"link"}),
    (_seen(carrier=None, operstate="down"), {"ens1": ("10.1.0.5/24",)}, {"link"}),
    (_seen(mtu=1500), {"ens1": ("10.1.0.5/24",)}, {"mtu"}),
    (_seen(speed_mbps=200000), {"ens1": ("10.1.0.5/24",)}, {"speed"}),
    (_seen(speed_mbps=800000), {"ens1": ("10.1.0.5/24",)}, set()),  # faster than planned is not drift
    (_seen(), {"ens1": ("10.1.0.5/16",)}, {"address"}),  # right address, wrong prefix
    (_seen(), {"ens2": ("10.1.0.5/24",)}, {"address"}),
])
def test_each_drift_kind(seen: InterfaceState | None, addresses: dict[str, tuple[str, ...]],
                         drifted: set[str]) -> None:
    result = interface_drift(PLANNED, {"ens1": seen} if seen else {}, addresses)
    assert {kind for kind, value in result.items() if value} == drifted


def test_speed_is_not_judged_on_a_virtual_interface() -> None:
    seen = {"ens1": _seen(speed_mbps=10000, virtual=True)}
    assert "speed" not in interface_drift(PLANNED, seen, {"ens1": ("10.1.0.5/24",)})


def test_a_vlan_is_judged_on_its_layer3_device_and_a_bond_has_no_link_kind() -> None:
    bond = Interface(name="bond0", plane="storage", speed_gbps=50, mtu=9000, address="10.2.0.5/24", vlan=20,
                     cabled=False, members=("ens2", "ens3"))
    observed = {"bond0": _seen(name="bond0", virtual=True), "bond0.20": _seen(name="bond0.20", virtual=True)}
    assert interface_drift(bond, observed, {"bond0.20": ("10.2.0.5/24",)}) == {"mtu": False, "address": False}
    assert interface_drift(bond, {}, {}) == {"address": True}  # no bond: its address is missing


def test_the_bmc_is_not_the_hosts_interface(tmp_path: Path) -> None:
    bmc = Interface(name="bmc", plane="oob", speed_gbps=1, mtu=1500, address="10.9.0.5/24")
    families = collect_plan(NodeView(root=tmp_path, planned=(PLANNED, bmc)))
    devices = {s.labels["device"] for f in families for s in f.samples}
    assert devices == {"ens1"}
