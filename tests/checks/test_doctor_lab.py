"""doctor in the lab: a healthy server passes; each injected fault is reported with the right
check ID on the right node, and nothing unrelated fails (root; `lab` marker)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.state import LabState, lab_dir
from gpunet.probe.parsers import parse_proc_snmp
from tests.lab.helpers import built_lab, lab_address, run_in, server_process, until_listening
from tests.labs import lab_id, shared_lab, shared_lab_id
from tests.render.rendered import example_plan

FLAGSHIP_LAB = lab_id("zu")

pytestmark = pytest.mark.lab
LAB = shared_lab_id("small")


lab = shared_lab("small")


def doctor(node: str, *extra: str, interval: float = 0.5) -> tuple[int, list[dict[str, Any]]]:
    plan = lab_dir(LAB) / "plan.json"
    done = run_in(LAB, node, sys.executable, "-m", "gpunet", "doctor", "--plan", str(plan), "--node", node,
                  "--json", "--interval", str(interval), *extra, timeout=120)
    assert done.returncode in (0, 1) and done.stdout.startswith("{"), done.stderr
    return done.returncode, json.loads(done.stdout)["findings"]


def failures(findings: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(f["check"], f["node"], f["subject"]) for f in findings if f["verdict"] == "fail"}


def only(findings: list[dict[str, Any]], check: str) -> set[tuple[str, str, str]]:
    """The failures, asserting every one of them is `check` (nothing unrelated fails)."""
    failed = failures(findings)
    assert failed and {c for c, _, _ in failed} == {check}, failed
    return failed


def test_a_healthy_server_passes(lab: LabState) -> None:
    code, findings = doctor("gpu1", "--peers")
    assert code == 0 and not failures(findings)
    assert not [f for f in findings if f["verdict"] == "warn"]
    assert sum(f["verdict"] == "pass" for f in findings) > 50


def test_link_down(lab: LabState) -> None:
    apply_fault(LAB, "gpu3:ens1", "down")
    try:
        code, findings = doctor("gpu3")
    finally:
        heal(LAB)
    assert code == 1 and only(findings, "GN-LINK-01") == {("GN-LINK-01", "gpu3", "ens1")}


def test_mtu_drift_on_a_path(lab: LabState) -> None:
    apply_fault(LAB, "comp-leaf001:5", "mtu", "1500")
    try:
        _, findings = doctor("gpu1", "--peers")
    finally:
        heal(LAB)
    failed = only(findings, "GN-MTU-02")
    assert all(node == "gpu1" and subject.split()[1] == "compute" for _, node, subject in failed)


def test_wrong_address(lab: LabState) -> None:
    right = lab.address_map["gpu2/ens1"].lab
    wrong = re.sub(r"\.(\d+)/", lambda m: f".{int(m[1]) + 100}/", right)
    run_in(LAB, "gpu2", "ip", "addr", "replace", wrong, "dev", "ens1")
    run_in(LAB, "gpu2", "ip", "addr", "del", right, "dev", "ens1")
    try:
        code, findings = doctor("gpu2")
    finally:
        run_in(LAB, "gpu2", "ip", "addr", "replace", right, "dev", "ens1")
        run_in(LAB, "gpu2", "ip", "addr", "del", wrong, "dev", "ens1")
    assert code == 1 and only(findings, "GN-ADDR-01") == {("GN-ADDR-01", "gpu2", "ens1")}


def test_missing_gateway(lab: LabState) -> None:
    run_in(LAB, "gpu5", "ip", "route", "del", "default")
    try:
        _, findings = doctor("gpu5")
    finally:
        run_in(LAB, "gpu5", "ip", "route", "add", "default", "via", lab.host_address.split("/")[0], "dev", "eth0")
    assert only(findings, "GN-ROUTE-02") == {("GN-ROUTE-02", "gpu5", "eth0")}


@contextmanager
def foreign_table(lab: LabState, node: str, rule: str) -> Iterator[None]:
    """A table of someone else's (a container runtime, a hand-made fix) with one input rule."""
    ruleset = f"table inet gnblock {{\n chain input {{\n  type filter hook input priority -10;\n  {rule}\n }}\n}}\n"
    subprocess.run(["ip", "netns", "exec", lab.servers[node], "nft", "-f", "-"], input=ruleset, text=True, check=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "netns", "exec", lab.servers[node], "nft", "delete", "table", "inet", "gnblock"],
                       check=True)


@pytest.mark.parametrize(("rule", "planes"), [("tcp dport 22 drop", {"management"}),
                                              ("tcp dport 1024-65535 drop", {"compute", "management"})])
def test_peers_find_a_firewall_dropping_ssh_or_the_job_ports(lab: LabState, rule: str, planes: set[str]) -> None:
    """From gpu1 (inside the admin range): its flows to gpu4 on their own ports (SSH; slurmd, srun
    and the bootstrap range on management, the compute peers' ports) time out."""
    with foreign_table(lab, "gpu4", rule):
        _, findings = doctor("gpu1", "--peers")
    failed = only(findings, "GN-FW-02")
    assert {(node, subject.split()[1]) for _, node, subject in failed} == {("gpu4", p) for p in planes}


def test_a_foreign_table_dropping_the_compute_plane_is_named(lab: LabState) -> None:
    """Without --peers: the node's own rules, evaluated against the flows it must accept."""
    with foreign_table(lab, "gpu4", 'iifname "ens1" drop'):
        code, findings = doctor("gpu4")
    failed = only(findings, "GN-FW-01")
    # every flow the compute plane must accept: its peers, and localize's probe port
    assert code == 1 and {subject.split()[0] for _, _, subject in failed} == {"compute-peers", "gpunet-probe"}
    named = next(f for f in findings if f["check"] == "GN-FW-01" and f["verdict"] == "fail")
    assert named["observed"].startswith("dropped by rule handle ") and "(iifname ens1 drop)" in named["observed"]
    assert named["observed"].endswith("of chain input in nft table inet gnblock")
    assert "remove" not in named["fix"] and "{" not in named["observed"]  # a sentence, never nft's JSON


def test_an_iptables_reject_of_ssh_is_named(lab: LabState) -> None:
    run_in(LAB, "gpu5", "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "REJECT")
    try:
        _, findings = doctor("gpu5")
    finally:
        run_in(LAB, "gpu5", "iptables", "-F", "INPUT")
    failed = only(findings, "GN-FW-01")
    assert {subject.split()[0] for _, _, subject in failed} == {"ssh"}
    named = next(f for f in findings if f["check"] == "GN-FW-01" and f["verdict"] == "fail")
    assert named["observed"].startswith("rejected by rule 1 (-A INPUT -p tcp")
    assert named["observed"].endswith("of chain INPUT in iptables table ip filter")


def test_a_drop_of_the_slurm_port_range_is_named(lab: LabState) -> None:
    with foreign_table(lab, "gpu6", "tcp dport 60001-63000 drop"):
        _, findings = doctor("gpu6")
    failed = only(findings, "GN-FW-01")
    assert {subject.split()[0] for _, _, subject in failed} == {"srun"}


def tcp_out_segments(lab_id: str, node: str) -> int:
    """Tcp OutSegs of one lab server's namespace, from its /proc/net/snmp."""
    out_segs = parse_proc_snmp(run_in(lab_id, node, "cat", "/proc/net/snmp").stdout).get("Tcp", "OutSegs")
    assert out_segs is not None, f"{node}: no Tcp OutSegs in /proc/net/snmp"
    return out_segs


def wait_for_tcp_sending(lab_id: str, node: str, segments: int, timeout: float = 30) -> None:
    """Return once the node has sent that many more TCP segments: the traffic doctor is to judge is flowing."""
    start, deadline = tcp_out_segments(lab_id, node), time.monotonic() + timeout
    while tcp_out_segments(lab_id, node) - start < segments:
        assert time.monotonic() < deadline, f"{node} sent under {segments} TCP segments in {timeout:g} s"
        time.sleep(0.2)


def test_loss_causing_retransmissions(lab: LabState) -> None:
    apply_fault(LAB, "gpu6:ens1", "loss", "5")
    target = lab_address(lab, "gpu7", "ens1")
    try:
        with server_process(LAB, "gpu7", "iperf3", "-s", "-1", "-B", target) as listener:
            until_listening(LAB, "gpu7", target, listener)
            # sending until killed: a doctor that starts late on a loaded host still sees the traffic
            with server_process(LAB, "gpu6", "iperf3", "-c", target, "-t", "600", "-b", "40M"):
                wait_for_tcp_sending(LAB, "gpu6", segments=2000)  # a busy CI host starts iperf3 late
                _, findings = doctor("gpu6", interval=3)
    finally:
        heal(LAB)
    assert ("GN-TCP-01", "gpu6", "tcp") in failures(findings), [f for f in findings if f["check"] == "GN-TCP-01"]
    assert {c for c, _, _ in failures(findings)} <= {"GN-TCP-01", "GN-CNT-01"}  # drops on that NIC are related


def test_a_wrong_hosts_entry_on_one_server(lab: LabState) -> None:
    hosts = Path("/etc/netns") / lab.servers["gpu8"] / "hosts"
    original = hosts.read_text()
    real = lab_address(lab, "gpu3", "ens1")
    hosts.write_text(original.replace(f"{real}\tgpu3-comp", f"{real[:-1]}9\tgpu3-comp"))
    try:
        _, findings = doctor("gpu8")
        _, elsewhere = doctor("gpu7")
    finally:
        hosts.write_text(original)
    assert only(findings, "GN-DNS-01") == {("GN-DNS-01", "gpu8", "gpu3-comp")}
    assert not failures(elsewhere)


def test_sshd_allowing_passwords(lab: LabState) -> None:
    config = Path("/etc/netns") / lab.servers["gpu7"] / "ssh" / "sshd_config"
    original = config.read_text()
    config.write_text("PasswordAuthentication yes\n" + original)
    try:
        _, findings = doctor("gpu7")
    finally:
        config.write_text(original)
    assert only(findings, "GN-SSH-01") == {("GN-SSH-01", "gpu7", "sshd")}


def test_a_duplicated_address(lab: LabState) -> None:
    """gpu3 also claims gpu2's management address: gpu2's duplicate-address probe sees it."""
    taken = lab.address_map["gpu2/eth0"].lab
    run_in(LAB, "gpu3", "ip", "addr", "add", taken, "dev", "eth0")
    try:
        _, findings = doctor("gpu2", "--peers")
    finally:
        run_in(LAB, "gpu3", "ip", "addr", "del", taken, "dev", "eth0")
    failed = failures(findings)
    assert ("GN-ADDR-03", "gpu2", f"gpu2 management {taken.split('/')[0]}") in failed
    # the address answering from two hosts also confuses the peers' replies: only address checks and
    # peer probes toward that address may fail with it
    assert {c for c, _, _ in failed} <= {"GN-ADDR-03", "GN-PEER-01", "GN-MTU-02", "GN-FW-02"}


def test_an_unreachable_gateway(lab: LabState) -> None:
    subprocess.run(["ip", "link", "set", "dev", lab.host_if, "down"], check=True)
    try:
        _, findings = doctor("gpu6", "--peers")
    finally:
        subprocess.run(["ip", "link", "set", "dev", lab.host_if, "up"], check=True)
    gateway = lab.host_address.split("/")[0]
    assert only(findings, "GN-ROUTE-03") == {("GN-ROUTE-03", "gpu6", f"gateway management {gateway}")}


@pytest.mark.slow
def test_a_healthy_default_example_lab_is_clean() -> None:
    """The built-in example as a lab: every server's doctor exits 0 with no warning (the lab holds
    the TCP buffers render writes; with no GPU driver here, the NCCL checks are skipped), and so
    does one with --peers."""
    with built_lab(FLAGSHIP_LAB, example_plan("scalable-unit")) as state:
        done = subprocess.run([sys.executable, "-m", "gpunet", "doctor", "@role:gpu,@role:storage,"
                               "@role:login", "--lab", FLAGSHIP_LAB, "--interval", "0.5", "--json"],
                              capture_output=True, text=True, timeout=300, check=False)
        report = json.loads(done.stdout)
        peers = run_in(FLAGSHIP_LAB, "gpu001", sys.executable, "-m", "gpunet", "doctor", "--plan",
                       str(lab_dir(FLAGSHIP_LAB) / "plan.json"), "--peers", "--interval", "0.5", "--json", timeout=300)
    assert report["nodes"] == len(state.servers) and not report["unreachable"], report["unreachable"]
    assert done.returncode == 0, [f for f in report["findings"] if f["verdict"] == "fail"]
    assert not [f for f in report["findings"] if f["verdict"] == "warn"]
    assert peers.returncode == 0, [f for f in json.loads(peers.stdout)["findings"] if f["verdict"] == "fail"]
