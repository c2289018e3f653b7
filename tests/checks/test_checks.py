"""Checks as pure functions: a NodeState built to match the plan passes; each drift fails its
own check and no other; without a plan, plan checks skip with the reason; no check raises."""

from __future__ import annotations

from typing import Any

import pytest

from gpunet.checks import CHECKS, Context, run_checks
from gpunet.checks import doctor as checks_doctor
from gpunet.model.state import BondSlave, BondState, InterfaceState, NodeState, RdmaStack, Route, SnmpCounters
from gpunet.probe.parsers import parse_env_file
from gpunet.probe.peers import PeerProbe, plan_probes
from gpunet.render.nccl import render_nccl_env
from tests.render.rendered import example_plan

PLAN = example_plan("small-ethernet")
NODE = next(n for n in PLAN.nodes if n.name == "node01")


def healthy(**changes: Any) -> NodeState:
    """node01 exactly as planned: links up at speed and MTU, addresses, routes, bond, settings."""
    interfaces = [InterfaceState(name=i.name, operstate="up", carrier=True, mtu=i.mtu, speed_mbps=i.speed_gbps * 1000,
                                 duplex="full") for i in NODE.interfaces if i.plane != "oob"]
    interfaces += [InterfaceState(name=i.layer3, operstate="up", carrier=True, mtu=i.mtu, virtual=True)
                   for i in NODE.interfaces if i.vlan and i.address]
    addresses = {i.layer3: (i.address,) for i in NODE.interfaces if i.address}
    resolved = {i.hostname: (i.address.split("/")[0],) for n in PLAN.nodes for i in n.interfaces if i.hostname
                and i.address}
    state = NodeState(
        hostname="node01", interfaces=tuple(interfaces), addresses=addresses,
        routes=(Route(dst="default", dev="eno1", gateway="198.18.0.1"),),
        bonds=(BondState(name="bond0", mode="IEEE 802.3ad Dynamic link aggregation", mii_up=True,
                         slaves=(BondSlave(name="ens2f0", mii_up=True), BondSlave(name="ens2f1", mii_up=True))),),
        snmp=SnmpCounters(groups={"Tcp": {"OutSegs": 1000, "RetransSegs": 0}}),
        sysctls={"net.ipv4.tcp_rmem": "4096 131072 16777216", "net.ipv4.tcp_wmem": "4096 65536 16777216"},
        resolved=resolved, sshd={"passwordauthentication": "no", "kbdinteractiveauthentication": "no"},
        nccl_env=parse_env_file(render_nccl_env(PLAN, NODE)), rdma=RdmaStack(nccl="libnccl.so.2.21.5"),
        interval_s=2.0, rates={"Tcp/OutSegs": 500.0, "Tcp/RetransSegs": 0.0},
    )
    return state.model_copy(update=changes)


def failed(state: NodeState) -> set[tuple[str, str]]:
    return {(f.check, f.subject) for f in run_checks(Context(state=state, plan=PLAN, node=NODE)) if f.verdict == "fail"}


def test_a_state_as_planned_passes_everything() -> None:
    findings = run_checks(Context(state=healthy(), plan=PLAN, node=NODE))
    assert not [f for f in findings if f.verdict in ("fail", "warn")]
    assert {f.check for f in findings if f.verdict == "pass"} >= {
        "GN-LINK-01", "GN-LINK-02", "GN-MTU-01", "GN-ADDR-01", "GN-ROUTE-01", "GN-ROUTE-02", "GN-BOND-01",
        "GN-TCP-01", "GN-TCP-02", "GN-DNS-01", "GN-SSH-01", "GN-NCCL-01", "GN-NCCL-02", "GN-CNT-01"}


def test_each_drift_fails_its_own_check() -> None:
    state = healthy()
    ifs = {i.name: i for i in state.interfaces}
    drifts = {
        ("GN-LINK-01", "ens1f0"): {"interfaces": tuple(i.model_copy(update={"carrier": False, "operstate": "down"})
                                                       if i.name == "ens1f0" else i for i in state.interfaces)},
        ("GN-LINK-02", "ens1f0"): {"interfaces": tuple(i.model_copy(update={"speed_mbps": 10000})
                                                       if i.name == "ens1f0" else i for i in state.interfaces)},
        ("GN-MTU-01", "ens1f0"): {"interfaces": tuple(i.model_copy(update={"mtu": 1500}) if i.name == "ens1f0" else i
                                                      for i in state.interfaces)},
        ("GN-ADDR-01", "ens1f0"): {"addresses": state.addresses | {"ens1f0": ("198.18.4.1/16",)}},
        ("GN-ROUTE-01", "ens1f0"): {"routes": (*state.routes,
                                               Route(dst="default", dev="ens1f0", gateway="198.18.4.254"))},
        ("GN-ROUTE-02", "eno1"): {"routes": ()},
        ("GN-BOND-01", "bond0"): {"bonds": (state.bonds[0].model_copy(update={"slaves": (
            BondSlave(name="ens2f0", mii_up=True), BondSlave(name="ens2f1", mii_up=False))}),)},
        ("GN-TCP-01", "tcp"): {"rates": {"Tcp/OutSegs": 500.0, "Tcp/RetransSegs": 25.0}},
        ("GN-SSH-01", "sshd"): {"sshd": {"passwordauthentication": "yes", "kbdinteractiveauthentication": "no"}},
        ("GN-DNS-01", "node02-comp"): {"resolved": state.resolved | {"node02-comp": ("198.18.4.99",)}},
        ("GN-CNT-01", "ens1f0"): {"rates": state.rates | {"ens1f0/rx_crc_errors": 5.0}},
    }
    assert ifs  # the healthy state has interfaces to break
    for expected, change in drifts.items():
        assert failed(healthy(**change)) == {expected}, expected


def test_without_a_plan_plan_checks_skip_with_the_reason() -> None:
    findings = run_checks(Context(state=healthy()))
    plan_checks = [f for f in findings if f.check in ("GN-LINK-01", "GN-MTU-01", "GN-ADDR-01", "GN-DNS-01")]
    assert plan_checks and all(f.verdict == "skip" and "--plan" in f.evidence for f in plan_checks)


def test_no_check_raises_on_an_empty_state() -> None:
    findings = run_checks(Context(state=NodeState(hostname="x"), plan=PLAN, node=NODE))
    assert {f.check for f in findings} == set(CHECKS)
    assert not [f for f in findings if "could not run" in f.evidence]


def test_check_ids_are_stable_and_unique() -> None:
    assert all(cid.startswith("GN-") for cid in CHECKS)
    assert len(CHECKS) >= 19


def test_half_duplex_fails_the_speed_check() -> None:
    state = healthy()
    half = tuple(i.model_copy(update={"duplex": "half"}) if i.name == "ens1f0" else i for i in state.interfaces)
    assert failed(healthy(interfaces=half)) == {("GN-LINK-02", "ens1f0")}


def test_skipped_peers_are_not_probed_and_the_gateway_still_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """apply's verification leaves out the nodes changing in its own batch."""
    probed: list[PeerProbe] = []
    monkeypatch.setattr(checks_doctor, "probe_node", lambda *a, meanwhile, **k: (meanwhile(), healthy())[1])
    monkeypatch.setattr(checks_doctor, "run_probes", lambda probes, *a, **k: probed.extend(probes) or [])
    everyone = {p.peer for p in plan_probes(PLAN, NODE)}
    others = sorted(everyone - {"gateway", "node01"})
    assert len(others) >= 2, everyone
    skipped = frozenset(others[1:])
    checks_doctor.doctor_node(PLAN, "node01", peers=True, interval=0.1, skip_peers=skipped)
    assert {p.peer for p in probed} == everyone - skipped
    assert {"gateway", "node01", others[0]} <= {p.peer for p in probed}  # the gateway, its own DAD, the rest
