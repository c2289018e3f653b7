"""Switch checks on real FRR 8.4 outputs: a healthy two-tier fabric gives no finding; a wrong ASN, a
missing neighbour, a port MTU of 1500, a lost ECMP next hop and a swapped LLDP neighbour injected
into copies of those outputs are each found, naming the switch, the cable and the fix; what cannot
be read is a skip with the reason."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpunet.checks.base import Finding
from gpunet.checks.switch import COMMANDS, check_switch
from gpunet.errors import CommandError, ParseError, UsageError
from gpunet.model.plan import Plan
from gpunet.probe.frr import parse_bgp_summary_json
from tests.checks.frr_record import plan as recorded_plan

FIXTURES = Path(__file__).parent.parent / "fixtures"
RECORDED = FIXTURES / "switch_check" / "lab-frr-8.4.4-two-leaves-two-spines"
FILES = {"bgp": "show_bgp_summary_json.txt", "routes": "show_ip_route_json.txt", "links": "ip_j_link.txt",
         "lldp": "lldpcli_json.txt"}
Outputs = dict[str, str]


@cache
def plan() -> Plan:
    return recorded_plan()  # the spec the outputs were recorded from (tests/checks/frr_record.py)


def outputs(switch: str) -> Outputs:
    return {what: (RECORDED / switch / name).read_text() for what, name in FILES.items()}


def runner(given: Outputs, failing: Sequence[str] = ()) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(argv: Sequence[str], **_: Any) -> subprocess.CompletedProcess[str]:
        what = next(k for k, v in COMMANDS.items() if v == list(argv))
        if what in failing:
            raise CommandError(" ".join(argv), 1, "vtysh: failed to connect to any daemons")
        return subprocess.CompletedProcess(list(argv), 0, given[what], "")
    return run


def problems(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.verdict != "pass"]


def edited(switch: str, what: str, change: Callable[[Any], None]) -> Outputs:
    given = outputs(switch)
    data = json.loads(given[what])
    change(data)
    return given | {what: json.dumps(data)}


@pytest.mark.parametrize("switch", ["comp-leaf001", "comp-leaf002", "comp-spine001", "comp-spine002"])
def test_a_healthy_fabric_gives_no_finding(switch: str) -> None:
    findings = check_switch(plan(), switch, runner(outputs(switch)))
    assert problems(findings) == []
    checks = {f.check for f in findings}
    assert {"GN-BGP-01", "GN-BGP-05", "GN-SW-01", "GN-SW-02", "GN-SW-03"} <= checks
    sessions = [f for f in findings if f.check == "GN-BGP-01"]
    assert len(sessions) == 4 and all("cable comp-" in f.subject for f in sessions)


def test_a_wrong_asn_is_found_with_its_cable_and_fix() -> None:
    def wrong(data: Any) -> None:
        peer = data["ipv4Unicast"]["peers"]["198.19.254.5"]
        peer |= {"remoteAs": 4210000099, "state": "Active"}  # misconfigured: the OPEN is refused, the session down
    found = problems(check_switch(plan(), "comp-leaf001", runner(edited("comp-leaf001", "bgp", wrong))))
    asn = next(f for f in found if f.check == "GN-BGP-02")
    assert asn.node == "comp-leaf001" and "cable comp-leaf001:7 comp-spine002:1" in asn.subject
    assert asn.observed == "remote-as 4210000099" and "4210000000" in asn.expected
    assert "neighbor 198.19.254.5 remote-as 4210000000" in asn.fix
    assert any(f.check == "GN-BGP-01" and f.observed == "Active" for f in found)


def test_a_wrong_local_asn_is_found() -> None:
    found = problems(check_switch(plan(), "comp-spine001", runner(edited(
        "comp-spine001", "bgp", lambda d: d["ipv4Unicast"].__setitem__("as", 65000)))))
    assert [(f.check, f.observed, f.expected) for f in found] == [("GN-BGP-03", "65000", "4210000000")]
    assert "router bgp 4210000000" in found[0].fix


def test_a_missing_neighbour_is_found_with_its_cable_and_fix() -> None:
    found = problems(check_switch(plan(), "comp-leaf002", runner(edited(
        "comp-leaf002", "bgp", lambda d: d["ipv4Unicast"]["peers"].pop("198.19.254.13")))))
    missing = [f for f in found if f.check == "GN-BGP-01"]
    assert len(missing) == 1 and missing[0].observed == "no such neighbour"
    assert missing[0].node == "comp-leaf002" and "comp-leaf002:7 comp-spine002:3" in missing[0].subject
    assert "add `neighbor 198.19.254.13 remote-as 4210000000` on comp-leaf002" in missing[0].fix


def test_a_port_mtu_of_1500_is_found_with_its_cable_and_fix() -> None:
    def small(data: Any) -> None:
        next(link for link in data if link["ifname"] == "swp6")["mtu"] = 1500
    found = problems(check_switch(plan(), "comp-leaf001", runner(edited("comp-leaf001", "links", small))))
    assert [(f.check, f.observed, f.expected) for f in found] == [("GN-SW-01", "1500", "9216")]
    assert found[0].node == "comp-leaf001" and "cable comp-leaf001:6 comp-spine001:2" in found[0].subject
    assert "mtu 9216" in found[0].fix


def test_a_lost_next_hop_names_its_cable() -> None:
    def narrower(data: Any) -> None:
        for entry in data["198.19.0.5/32"]:
            entry["nexthops"] = [h for h in entry["nexthops"] if h.get("interfaceName") != "swp8"]
    found = problems(check_switch(plan(), "comp-leaf001", runner(edited("comp-leaf001", "routes", narrower))))
    assert [f.check for f in found] == ["GN-BGP-05"]
    assert "comp-leaf002" in found[0].subject and "comp-leaf001:8 comp-spine002:2" in found[0].evidence


def test_a_swapped_lldp_neighbour_is_found() -> None:
    def swapped(data: Any) -> None:
        ports = data["lldp"]["interface"]
        first, second = ports[0], ports[2]
        key_a, key_b = next(iter(first)), next(iter(second))
        first[key_a], second[key_b] = second[key_b], first[key_a]
    found = problems(check_switch(plan(), "comp-spine001", runner(edited("comp-spine001", "lldp", swapped))))
    assert {f.check for f in found} == {"GN-SW-03"} and len(found) == 2
    assert all("cable" in f.subject and f.fix for f in found)


def test_what_cannot_be_read_is_a_skip_with_the_reason() -> None:
    given = outputs("comp-leaf001") | {"routes": "% Unknown command: show ip route json\n"}
    found = check_switch(plan(), "comp-leaf001", runner(given, failing=["bgp"]))
    skips = {f.check: f.evidence for f in found if f.verdict == "skip"}
    assert set(skips) == {"GN-BGP-01", "GN-BGP-05"}
    assert "failed to connect" in skips["GN-BGP-01"] and "show ip route json" in skips["GN-BGP-05"]
    assert not [f for f in found if f.verdict == "fail"]


def test_an_unknown_switch_is_bad_input() -> None:
    with pytest.raises(UsageError, match="not a switch of the plan"):
        check_switch(plan(), "gpu1", runner(outputs("comp-leaf001")))


def test_frrs_old_trailing_comma_is_refused_not_read_as_no_peers() -> None:
    text = (FIXTURES / "frr_bgp_summary_json_refused" / "frr-issue2567-trailing-comma" / "output.txt").read_text()
    with pytest.raises(ParseError) as caught:
        parse_bgp_summary_json(text)
    assert caught.value.line == 29  # the line closing the peers, after the stray comma
