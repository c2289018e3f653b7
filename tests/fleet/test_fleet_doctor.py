"""`doctor --fleet`: every node's checklist through the fleet runner, findings folded across
nodes; nodes that return no findings are named, not dropped."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpunet.checks import Finding
from gpunet.fleet import FleetResult, NodeOutcome
from gpunet.fleet.doctor import doctor_command, fold_doctor, silent
from gpunet.fleet.node_gpunet import VERSION_MARK
from gpunet.lab.faults import apply_fault, heal
from tests.labs import SharedLabs


def _report(node: str, *findings: Finding) -> NodeOutcome:
    body = {"node": node, "failed": any(f.verdict == "fail" for f in findings),
            "findings": [f.model_dump() for f in findings]}
    return NodeOutcome(node=node, rc=1 if body["failed"] else 0, stdout=json.dumps(body))


def _finding(node: str, check: str, verdict: str, subject: str, observed: str = "") -> Finding:
    return Finding(check=check, area="x", title="t", verdict=verdict, node=node, subject=subject, observed=observed)


def test_findings_fold_across_nodes_and_silent_nodes_are_named() -> None:
    outcomes = {n: _report(n, _finding(n, "GN-LINK-01", "pass", "ens1")) for n in ("gpu1", "gpu2", "gpu4")}
    outcomes["gpu3"] = _report("gpu3", _finding("gpu3", "GN-LINK-01", "pass", "ens1"),
                               _finding("gpu3", "GN-MTU-01", "fail", "ens1", "1500"))
    outcomes["gpu5"] = _report("gpu5", _finding("gpu5", "GN-MTU-01", "fail", "ens1", "4000"))
    outcomes["gpu6"] = NodeOutcome(node="gpu6", rc=None, error="timed out")
    outcomes["gpu7"] = NodeOutcome(node="gpu7", rc=127, stderr="sh: gpunet: not found")
    outcomes["gpu8"] = NodeOutcome(node="gpu8", rc=1, stdout="Traceback (most recent call last): ...")
    report = fold_doctor(FleetResult(command="gpunet doctor", outcomes=outcomes))
    first = report.findings[0]
    assert (first.check, first.verdict, first.nodes, first.count, first.variants) == ("GN-MTU-01", "fail",
                                                                                      "gpu[3,5]", 2, 2)
    assert [(f.check, f.nodes) for f in report.findings[1:]] == [("GN-LINK-01", "gpu[1-4]")]
    assert report.unreachable == {"gpu6": "timed out", "gpu7": "exit 127: sh: gpunet: not found",
                                  "gpu8": "exit 1: Traceback (most recent call last): ..."}
    assert report.failed and report.nodes == 8


def test_nodes_with_different_fixes_are_never_folded_together() -> None:
    def wrong_address(node: str, mine: str) -> Finding:
        return Finding(check="GN-ADDR-01", area="address", title="t", verdict="fail", node=node, subject="eno1",
                       observed="none", expected=mine, fix=f"ip addr replace {mine} dev eno1")

    outcomes = {n: _report(n, wrong_address(n, address)) for n, address in
                (("gpu001", "198.18.0.2/24"), ("gpu002", "198.18.0.3/24"))}
    report = fold_doctor(FleetResult(command="gpunet doctor", outcomes=outcomes))
    assert [(f.nodes, f.fix) for f in report.findings] == [
        ("gpu001", "ip addr replace 198.18.0.2/24 dev eno1"), ("gpu002", "ip addr replace 198.18.0.3/24 dev eno1")]


def test_the_command_each_node_runs() -> None:
    assert doctor_command(["gpunet"], "/etc/gpunet/plan.json", peers=True, interval=2, nodes="gpu[1-8]") == [
        "gpunet", "doctor", "--plan", "/etc/gpunet/plan.json", "--json", "--interval", "2", "--peers", "--listen",
        "--listening", "gpu[1-8]"]
    assert doctor_command(["gpunet"], "/etc/gpunet/plan.json", peers=False, interval=2)[-1] == "2"
    assert doctor_command(["gpunet"], "/p.json", peers=True, interval=2, skip="gpu[1-4]")[-2:] == [
        "--skip-peers", "gpu[1-4]"]
    assert "--skip-peers" not in doctor_command(["gpunet"], "/p.json", peers=False, interval=2, skip="gpu1")


@pytest.mark.lab
def test_doctor_fleet_over_the_lab_names_the_one_faulty_server(shared_labs: SharedLabs) -> None:
    lab = shared_labs.get("small").lab_id
    apply_fault(lab, "gpu3:ens1", "mtu", "1500")
    try:
        done = subprocess.run([sys.executable, "-m", "gpunet", "doctor", "gpu[1-8]", "--lab", lab,
                               "--interval", "0.5", "--json"], capture_output=True, text=True, timeout=300,
                              check=False)
    finally:
        heal(lab)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["nodes"] == 8 and report["unreachable"] == {}
    failing = {(f["check"], f["nodes"], f["subject"]) for f in report["findings"] if f["verdict"] == "fail"}
    assert failing == {("GN-MTU-01", "gpu3", "ens1")}, failing
    link = next(f for f in report["findings"] if f["check"] == "GN-LINK-01" and f["subject"] == "ens1")
    assert (link["verdict"], link["nodes"]) == ("pass", "gpu[1-8]")


def test_a_silent_doctor_is_told_by_its_own_words_not_the_launchers_version_line() -> None:
    mark = VERSION_MARK + '{"found": "0.1.0", "wanted": "0.1.0", "python": "python3"}'
    assert silent(NodeOutcome(node="n", rc=137, stderr=mark)) == "exit 137"
    assert silent(NodeOutcome(node="n", rc=1, stderr=mark, stdout="not JSON\n")) == "exit 1: not JSON"
    assert silent(NodeOutcome(node="n", rc=2, stderr=f"{mark}\ngpunet: --plan: no such file\n")) == \
        "exit 2: gpunet: --plan: no such file"
    assert silent(NodeOutcome(node="n", rc=None, error="timed out", stderr=mark)) == "timed out"
