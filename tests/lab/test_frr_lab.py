"""The default example's lab (8 servers) routed by FRR: every planned session Established with the
planned ECMP width; the switch checks find nothing on a healthy lab, and name the switch, the cable
and the fix for a cable taken down, a wrong peer ASN, a missing neighbour and a port at MTU 1500; a
TCP stream across the fabric keeps running while one of its uplinks goes down."""

from __future__ import annotations

import json
import statistics
import subprocess
import time

import pytest
from typer.testing import CliRunner

from gpunet.api.switches import SwitchReport, switch_check
from gpunet.checks.base import Finding
from gpunet.cli.main import app
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.frr import frr_missing, switch_dir, vtysh_argv
from gpunet.lab.state import LabState, lab_dir
from gpunet.model.plan import Link, Plan
from gpunet.model.switching import sessions
from tests.lab.helpers import lab_address, server_process, tx_bytes, until_listening
from tests.labs import shared_lab, shared_lab_id, shared_lab_plan

pytestmark = [pytest.mark.lab, pytest.mark.slow,
              pytest.mark.skipif(frr_missing() is not None, reason=f"no FRR here: {frr_missing()}")]
LAB = shared_lab_id("default8")
PLANE = "storage"  # the default example's routed Ethernet plane (compute is InfiniBand: static routes in the lab)
BACK_S = 120.0  # a session taken down comes back within the 5 s connect-retry, plus a loaded host's slack
STREAM_S = 20  # the stream across the cable taken down: long enough that it goes down mid-stream
runner = CliRunner()

lab = shared_lab("default8")

plan = shared_lab_plan()  # the lab's own plan; conftest heals the lab after every test


def check(*names: str) -> SwitchReport:
    return switch_check(",".join(names) or None, lab=LAB)


def failing(report: SwitchReport) -> list[Finding]:
    return [f for f in report.findings if f.verdict != "pass"]


def uplink(plan: Plan, leaf: str) -> Link:
    return next(c for c in plan.links if c.plane == PLANE and c.tier == "leaf_spine" and leaf in (c.a.device,
                                                                                                    c.b.device))


def ns(switch: str) -> str:
    return f"gn{LAB}-{switch}"


def vtysh(switch: str, *commands: str) -> str:
    words = [w for c in commands for w in ("-c", c)]
    done = subprocess.run(["ip", "netns", "exec", ns(switch), *vtysh_argv(lab_dir(LAB), ns(switch), *words)],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def reload_rendered(switch: str) -> None:
    """The switch's rendered frr.conf again, as `lab up` loaded it (undoes an injected change)."""
    conf = switch_dir(lab_dir(LAB), ns(switch)) / "frr.conf"
    subprocess.run(["ip", "netns", "exec", ns(switch), *vtysh_argv(lab_dir(LAB), ns(switch), "-f", str(conf))],
                   capture_output=True, text=True, timeout=60, check=True)


def wait_clean(*switches: str) -> list[Finding]:
    """Poll the switch check until the switches show no failure (or BACK_S passes): what is left."""
    deadline = time.monotonic() + BACK_S
    left = failing(check(*switches))
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = failing(check(*switches))
    return left


def test_lab_up_waited_for_every_session_and_the_planned_ecmp_width(lab: LabState, plan: Plan) -> None:
    assert lab.routing == "frr"
    assert lab.readiness is not None and "bgp" in lab.readiness.conditions
    routed = [s for s in plan.switches if s.plane == PLANE]
    report = check(*(s.name for s in routed))
    planned = sum(len(sessions(plan, s)) for s in routed)
    established = [f for f in report.findings if f.check == "GN-BGP-01" and f.verdict == "pass"]
    assert planned > 0 and len(established) == planned
    ecmp = [f for f in report.findings if f.check == "GN-BGP-05"]
    assert ecmp and all(f.verdict == "pass" for f in ecmp), [f.observed for f in ecmp if f.verdict != "pass"]


def test_a_healthy_lab_has_no_switch_finding(lab: LabState, plan: Plan) -> None:
    result = runner.invoke(app, ["switch", "check", "--lab", LAB, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert set(report["switches"]) == {s.name for s in plan.switches}
    assert [f for f in report["findings"] if f["verdict"] != "pass"] == []


def _uplink_carrying(plan: Plan, leaf: str, before: dict[str, int], stream: subprocess.Popen[str]) -> Link:
    """The leaf's uplink the stream hashes onto, once it has carried a megabyte more than `before`
    (a fixed wait was too short where iperf3 started late)."""
    ports = {f"swp{c.a.port if c.a.device == leaf else c.b.port}": c for c in plan.links
             if c.plane == PLANE and c.tier == "leaf_spine" and leaf in (c.a.device, c.b.device)}
    deadline = time.monotonic() + 60
    while True:
        after = tx_bytes(ns(leaf))
        grown = {port: after.get(port, 0) - before.get(port, 0) for port in ports}
        busiest = max(grown, key=grown.__getitem__)
        if grown[busiest] > 1_000_000:
            return ports[busiest]
        assert stream.poll() is None and time.monotonic() < deadline, "the stream crossed no uplink of its leaf"
        time.sleep(0.1)


def _longest_gap(report: dict) -> float:
    """The longest run of intervals delivering under a tenth of the stream's median rate, in seconds."""
    intervals = [(i["sum"]["seconds"], i["sum"]["bits_per_second"]) for i in report["intervals"]]
    median = statistics.median(rate for _, rate in intervals)
    longest = current = 0.0
    for seconds, rate in intervals:
        current = current + seconds if rate < median / 10 else 0.0
        longest = max(longest, current)
    return longest


def test_a_spine_link_down_is_reported_and_a_stream_across_it_keeps_running(lab: LabState, plan: Plan) -> None:
    """The stream's own uplink goes down mid-stream: BGP and the kernel move it to the other uplinks
    (measured gap under 1 s); the check names the cable; healed, the session comes back."""
    client, server, leaf = _pair_under_two_leaves(plan)
    address = lab_address(lab, server, _storage_nic(plan, server))
    with server_process(LAB, server, "iperf3", "-s", "-1", "-B", address) as listener:
        until_listening(LAB, server, address, listener)
        started = time.monotonic()
        stream = subprocess.Popen(
            ["ip", "netns", "exec", ns(client), "iperf3", "-c", address, "-t", str(STREAM_S), "-i", "0.1", "-J"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cable = _uplink_carrying(plan, leaf, tx_bytes(ns(leaf)), stream)
        apply_fault(LAB, f"{cable.a.device}:{cable.a.port}", "down")
        faulted = time.monotonic() - started
        out, err = stream.communicate(timeout=STREAM_S + 60)
    assert stream.returncode == 0, out[-500:] + err
    assert faulted < STREAM_S - 2, f"the cable went down {faulted:.1f} s in: after the stream"
    gap = _longest_gap(json.loads(out))
    print(f"delivery gap while {cable.a.device}:{cable.a.port} went down: {gap:.1f} s")
    assert gap < 1.0
    named = [f for f in failing(check(cable.a.device, cable.b.device)) if f.check == "GN-BGP-01"]
    wanted = f"cable {cable.a.device}:{cable.a.port} {cable.b.device}:{cable.b.port}"
    assert {f.node for f in named} == {cable.a.device, cable.b.device} and all(wanted in f.subject for f in named)
    heal(LAB)
    assert wait_clean(cable.a.device, cable.b.device) == []


def _storage_nic(plan: Plan, node: str) -> str:
    """The interface holding the node's storage address in the lab (a bond's: its first member)."""
    found = plan.node(node)
    assert found is not None
    return next(i.name for i in found.interfaces if i.plane == PLANE and i.address)


def _pair_under_two_leaves(plan: Plan) -> tuple[str, str, str]:
    """A client and a server whose storage addresses sit under different leaves; the client's leaf."""
    leaf_of = {}
    for c in plan.links:
        if c.plane == PLANE and c.tier == "node_leaf" and (node := plan.node(c.a.device)) is not None:
            nic = _storage_nic(plan, node.name)
            if c.a.port == nic:
                leaf_of[node.name] = c.b.device
    client = next(iter(leaf_of))
    server = next(n for n, leaf in leaf_of.items() if leaf != leaf_of[client])
    return client, server, leaf_of[client]


def test_a_wrong_peer_asn_is_named_with_its_cable_and_fix(lab: LabState, plan: Plan) -> None:
    leaf = next(s for s in plan.switches if s.plane == PLANE and s.tier == "leaf")
    session = sessions(plan, leaf)[0]
    try:
        vtysh(leaf.name, "configure terminal", f"router bgp {leaf.asn}",
              f"neighbor {session.peer_address} remote-as 65099")
        found = [f for f in failing(check(leaf.name)) if f.check == "GN-BGP-02"]
        assert len(found) == 1
        assert found[0].node == leaf.name and "cable" in found[0].subject and session.peer_address in found[0].subject
        assert f"remote-as {session.peer_asn}" in found[0].fix
    finally:
        reload_rendered(leaf.name)
    assert wait_clean(leaf.name) == []


def test_a_missing_neighbour_is_named_with_its_cable_and_fix(lab: LabState, plan: Plan) -> None:
    spine = next(s for s in plan.switches if s.plane == PLANE and s.tier == "spine")
    session = sessions(plan, spine)[0]
    try:
        vtysh(spine.name, "configure terminal", f"router bgp {spine.asn}", f"no neighbor {session.peer_address}")
        found = [f for f in failing(check(spine.name)) if f.check == "GN-BGP-01"]
        cable = f"{session.port.cable.a.device}:{session.port.cable.a.port}"
        assert [f.observed for f in found] == ["no such neighbour"] and cable in found[0].subject
        assert found[0].node == spine.name
        assert f"neighbor {session.peer_address} remote-as {session.peer_asn}" in found[0].fix
    finally:
        reload_rendered(spine.name)
    assert wait_clean(spine.name) == []


def test_a_port_at_mtu_1500_is_named_with_its_cable_and_fix(lab: LabState, plan: Plan) -> None:
    cable = uplink(plan, next(s.name for s in plan.switches if s.plane == PLANE and s.tier == "leaf"))
    switch, port = cable.a.device, f"swp{cable.a.port}"
    try:
        subprocess.run(["ip", "-n", ns(switch), "link", "set", port, "mtu", "1500"], check=True)
        found = [f for f in failing(check(switch)) if f.check == "GN-SW-01"]
        assert len(found) == 1 and found[0].node == switch and found[0].observed == "1500"
        assert f"cable {cable.a.device}:{cable.a.port} {cable.b.device}:{cable.b.port}" in found[0].subject
        assert "9216" in found[0].fix and port in found[0].fix
    finally:
        subprocess.run(["ip", "-n", ns(switch), "link", "set", port, "mtu", "9216"], check=True)
    assert wait_clean(switch) == []
