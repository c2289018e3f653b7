"""Parsers against recorded real outputs: tests/fixtures/<tool>/<case>/{output.txt, expected.json},
walked by one parametrised test (DESIGN.md #2); and fuzzed inputs raise nothing but ParseError.
Regenerate an expected.json after an intended change with GPUNET_UPDATE_GOLDEN=1, then review it."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gpunet.bench.iperf3 import parse_iperf3_json
from gpunet.bench.nccl import parse_nccl_tests, parse_nccl_tests_json
from gpunet.bench.perftest import parse_perftest
from gpunet.errors import ParseError
from gpunet.fabric.counters import parse_ibqueryerrors, parse_ip_link_stats, parse_portstat
from gpunet.fabric.ibnetdiscover import parse_ibnetdiscover
from gpunet.probe.flow import parse_ethtool_flow
from gpunet.probe.frr import parse_bgp_summary_json, parse_frr_route_json
from gpunet.probe.lldp import parse_lldpcli_json
from gpunet.probe.nccl_log import parse_nccl_debug_log
from gpunet.probe.parsers import (
    parse_ethtool_link,
    parse_ethtool_stats,
    parse_ibstat,
    parse_ibv_devinfo,
    parse_ip_addr_json,
    parse_ip_route_json,
    parse_nft_json,
    parse_proc_bonding,
    parse_proc_net_dev,
    parse_proc_snmp,
    parse_proc_snmp6,
    parse_sshd_t,
)
from gpunet.probe.pci import parse_lspci
from gpunet.probe.roce import parse_mlnx_qos, parse_show_gids
from gpunet.probe.rulesets import parse_iptables_save, parse_nft_ruleset
from gpunet.probe.switchports import parse_ip_link_json, parse_sonic_interfaces_status
from gpunet.probe.topo import parse_nvidia_smi_topo

FIXTURES = Path(__file__).parent.parent / "fixtures"
PARSERS: dict[str, Callable[[str], Any]] = {
    "ethtool_stats": parse_ethtool_stats,
    "ethtool_link": parse_ethtool_link,
    "ibstat": parse_ibstat,
    "proc_net_bonding": parse_proc_bonding,
    "proc_net_dev": parse_proc_net_dev,
    "proc_net_snmp": parse_proc_snmp,
    "proc_net_netstat": lambda text: parse_proc_snmp(text, "/proc/net/netstat"),
    "proc_net_snmp6": parse_proc_snmp6,
    "nft_json": parse_nft_json,
    "nft_ruleset": parse_nft_ruleset,
    "iptables_save": parse_iptables_save,
    "ibv_devinfo": parse_ibv_devinfo,
    "ip_addr_json": parse_ip_addr_json,
    "ip_route_json": parse_ip_route_json,
    "sshd_t": parse_sshd_t,
    "iperf3_json": parse_iperf3_json,
    "perftest": parse_perftest,
    "nccl_tests": parse_nccl_tests,
    "nccl_tests_json": parse_nccl_tests_json,  # one case, built from nccl-tests' writer: see its SOURCE.md
    "lldpcli": parse_lldpcli_json,  # json and json0, lldpd 1.0.x
    "ibnetdiscover": parse_ibnetdiscover,
    "ibqueryerrors": parse_ibqueryerrors,
    "ip_link_stats_json": lambda text: parse_ip_link_stats(text, "comp-leaf001"),
    "portstat": lambda text: parse_portstat(text, "leaf1", lanes=4),
    # the GPU node's RDMA path
    "nvidia_smi_topo": parse_nvidia_smi_topo,
    "lspci": parse_lspci,
    "mlnx_qos": parse_mlnx_qos,
    "show_gids": parse_show_gids,
    "nccl_debug_log": parse_nccl_debug_log,
    "ethtool_flow": parse_ethtool_flow,  # mlx5 ethtool -S, its pause/ECN/discard counters
    "frr_bgp_summary_json": parse_bgp_summary_json,  # vtysh -c 'show bgp summary json'
    "frr_route_json": parse_frr_route_json,  # vtysh -c 'show ip route json'
    "ip_link_json": parse_ip_link_json,
    "sonic_interfaces_status": parse_sonic_interfaces_status,
}


def recorded(case: Path) -> str:
    """The output byte for byte: a CRLF capture (a terminal log) keeps its CRs."""
    return (case / "output.txt").read_bytes().decode()


def jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def cases() -> list[tuple[str, Path]]:
    return [(tool, case) for tool in PARSERS for case in sorted((FIXTURES / tool).glob("*/"))
            if (case / "output.txt").exists()]


@pytest.mark.parametrize(("tool", "case"), cases(), ids=[f"{t}/{c.name}" for t, c in cases()])
def test_parser_matches_recorded_expectation(tool: str, case: Path) -> None:
    got = jsonable(PARSERS[tool](recorded(case)))
    expected_file = case / "expected.json"
    if os.environ.get("GPUNET_UPDATE_GOLDEN"):
        expected_file.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(expected_file.read_text())


def test_every_tool_has_recorded_cases() -> None:
    counts = {tool: sum(1 for t, _ in cases() if t == tool) for tool in PARSERS}
    assert all(counts.values()), counts


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(PARSERS)), st.text(max_size=400))
def test_fuzzed_text_raises_nothing_but_parse_error(tool: str, text: str) -> None:
    with contextlib.suppress(ParseError):
        PARSERS[tool](text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([c for c in cases()]), st.data())
def test_mangled_real_outputs_raise_nothing_but_parse_error(case: tuple[str, Path], data: st.DataObject) -> None:
    """Real outputs cut short, with lines dropped or bytes changed: still only ParseError."""
    tool, folder = case
    text = recorded(folder)
    cut = data.draw(st.integers(0, len(text)))
    noise = data.draw(st.text(max_size=20))
    for variant in (text[:cut], text[:cut] + noise + text[cut:], "\n".join(text.splitlines()[1::2])):
        with contextlib.suppress(ParseError):
            PARSERS[tool](variant)
