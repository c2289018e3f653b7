"""The path-MTU probe's verdict from the ping and the multi-path probe together: the ping's own path
may be the refusing one, and the finding names the hop and its MTU either way."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Any

import pytest

from gpunet.probe import peers
from gpunet.probe.peers import PeerProbe, run_probes

PROBE = PeerProbe("pmtu", "gpu002", "compute", "198.18.16.1", "198.18.16.2", size=4064)
# iputils ping without -q: the hop's ICMP error for our packet, then the summary
REFUSED_BY_HOP = ("PING 198.18.16.2 (198.18.16.2) from 198.18.16.1 : 4064(4092) bytes of data.\n"
                  "From 198.18.20.7 icmp_seq=1 Frag needed and DF set (mtu = 1500)\n\n"
                  "--- 198.18.16.2 ping statistics ---\n"
                  "1 packets transmitted, 0 received, +1 errors, 100% packet loss, time 0ms\n")
REFUSED_HERE = "ping: local error: message too long, mtu=1500\n"
LOST = "--- 198.18.16.2 ping statistics ---\n1 packets transmitted, 0 received, 100% packet loss, time 0ms\n"
PASSED = ("--- 198.18.16.2 ping statistics ---\n1 packets transmitted, 1 received, 0% packet loss, time 0ms\n"
          "rtt min/avg/max/mdev = 0.051/0.051/0.051/0.000 ms\n")


def _runner(stdout: str, code: int, calls: list[Sequence[str]]) -> Any:
    def run(argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), code, stdout, "")
    return run


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers, "RETRY_AFTER_S", 0.0)


def _paths_refusing(monkeypatch: pytest.MonkeyPatch, refusals: dict[int, dict[str, Any]]) -> None:
    monkeypatch.setattr(peers.paths, "mtu", lambda flows, size, tries, wait: {
        f.flow: refusals.get(f.flow, {}) for f in flows})


def test_a_ping_refused_on_its_own_path_names_the_hop_even_when_no_udp_port_hashed_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _paths_refusing(monkeypatch, {})
    calls: list[Sequence[str]] = []
    [result] = run_probes([PROBE], _runner(REFUSED_BY_HOP, 1, calls))
    assert result.ok is False
    assert result.detail == (f"0 of {peers.PATHS_PER_PEER} source ports (equal-cost paths) and the ping refused "
                             "4092-byte packets: fragmentation needed at 198.18.20.7 (next-hop MTU 1500)")
    assert len(calls) == 1, "a refusal is an answer, not a lost echo to try again"


def test_the_pings_hop_and_the_udp_ports_hops_are_named_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    _paths_refusing(monkeypatch, {3: {"hop": "198.18.20.7", "mtu": 1500}, 9: {"hop": "198.18.20.9", "mtu": 2000}})
    [result] = run_probes([PROBE], _runner(REFUSED_BY_HOP, 1, []))
    assert result.ok is False
    assert result.detail.endswith("fragmentation needed at 198.18.20.7 (next-hop MTU 1500), "
                                  "198.18.20.9 (next-hop MTU 2000)")
    assert result.detail.startswith(f"2 of {peers.PATHS_PER_PEER} source ports")


def test_this_hosts_own_smaller_interface_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _paths_refusing(monkeypatch, {})
    [result] = run_probes([PROBE], _runner(REFUSED_HERE, 1, []))
    assert result.ok is False
    assert result.detail.endswith("fragmentation needed at this host (next-hop MTU 1500: its own interface's, or a "
                                  "path MTU it cached from a hop)")


def test_a_lost_ping_with_every_path_passing_fails_on_the_pings_own_words(monkeypatch: pytest.MonkeyPatch) -> None:
    _paths_refusing(monkeypatch, {})
    calls: list[Sequence[str]] = []
    [result] = run_probes([PROBE], _runner(LOST, 1, calls))
    assert result.ok is False and "100% packet loss" in result.detail
    assert len(calls) == 2, "a lost echo is tried once more"


def test_a_passing_ping_with_one_refusing_path_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    _paths_refusing(monkeypatch, {5: {"hop": "198.18.20.7", "mtu": 1500}})
    [result] = run_probes([PROBE], _runner(PASSED, 0, []))
    assert result.ok is False
    assert result.detail == (f"1 of {peers.PATHS_PER_PEER} source ports (equal-cost paths) refused 4092-byte "
                             "packets: fragmentation needed at 198.18.20.7 (next-hop MTU 1500)")


def test_every_path_passing_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    _paths_refusing(monkeypatch, {})
    [result] = run_probes([PROBE], _runner(PASSED, 0, []))
    assert result.ok is True
    assert result.detail == f"4092-byte packets passed on {peers.PATHS_PER_PEER} source ports (paths)"


def test_a_hop_that_is_no_address_is_not_believed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A line that only looks like a refusal (an address that is not one) does not name a hop."""
    _paths_refusing(monkeypatch, {})
    odd = "From 198.18.20.7; rm icmp_seq=1 Frag needed and DF set (mtu = 1500)\n" + LOST
    [result] = run_probes([PROBE], _runner(odd, 1, []))
    assert result.ok is False and "fragmentation needed" not in result.detail


def test_a_refused_flow_is_traced_again_with_its_own_source_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hop after the refusing one is the far end of the cable that was too small: the refused
    5-tuple is traced (small packets pass), one flow per refusing hop, to the probe port."""
    _paths_refusing(monkeypatch, {4: {"hop": "198.18.20.7", "mtu": 1500, "sport": 41004},
                                  6: {"hop": "198.18.20.7", "mtu": 1500, "sport": 41006}})
    traced: list[Any] = []

    def trace(flows: list[Any], max_hops: int, tries: int) -> dict[int, dict[str, Any]]:
        traced.extend(flows)
        return {f.flow: {"hops": ["198.18.20.7", "198.18.20.12"], "reached": True} for f in flows}

    monkeypatch.setattr(peers.paths, "trace", trace)
    [result] = run_probes([PROBE], _runner(PASSED, 0, []))
    assert [(f.sport, f.dport) for f in traced] == [(41006, peers.PROBE_PORT)]
    assert result.refusals == (peers.Refusal("198.18.20.7", 1500, ("198.18.20.7", "198.18.20.12")),)
