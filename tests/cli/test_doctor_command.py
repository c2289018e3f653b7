"""`gpunet doctor` and `gpunet probe` on this machine (no lab needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.cli.main import app

runner = CliRunner()


def test_probe_json_reads_this_machine() -> None:
    result = runner.invoke(app, ["probe", "--interval", "0.1", "--json"])
    assert result.exit_code == 0, result.output
    state = json.loads(result.stdout)
    assert "lo" in {i["name"] for i in state["interfaces"]}
    assert state["snmp"]["groups"]["Tcp"]["OutSegs"] >= 0 and state["interval_s"] == 0.1


def test_doctor_without_a_plan_runs_and_skips_plan_checks() -> None:
    result = runner.invoke(app, ["doctor", "--interval", "0", "--json"])
    assert result.exit_code in (0, 1), result.output
    findings = json.loads(result.stdout)["findings"]
    by_check = {f["check"]: f for f in findings}
    assert by_check["GN-MTU-01"]["verdict"] == "skip" and "--plan" in by_check["GN-MTU-01"]["evidence"]
    assert (result.exit_code == 1) == any(f["verdict"] == "fail" for f in findings)


def test_doctor_refuses_a_node_not_in_the_plan(tmp_path: Path) -> None:
    runner.invoke(app, ["plan", "-o", str(tmp_path)])
    result = runner.invoke(app, ["doctor", "--plan", str(tmp_path / "plan.json"), "--node", "nosuchnode"])
    assert result.exit_code == 2 and "not a node of the plan" in result.output


def test_fleet_doctor_counts_only_the_nodes_it_judged() -> None:
    """Two nodes answered with no failing finding, one never did: "3 nodes: no failing finding"
    would pass a node nobody looked at."""
    from gpunet.cli import doctor as doctor_cli  # noqa: PLC0415
    from gpunet.fleet import FleetResult, NodeOutcome  # noqa: PLC0415
    from gpunet.fleet.doctor import fold_doctor  # noqa: PLC0415

    answer = json.dumps({"findings": []})
    result = FleetResult(command="doctor", outcomes={
        "n1": NodeOutcome(node="n1", rc=0, stdout=answer), "n2": NodeOutcome(node="n2", rc=0, stdout=answer),
        "n3": NodeOutcome(node="n3", rc=255, stderr="ssh: connect to host n3 port 22: No route to host")})
    report = fold_doctor(result)
    assert report.unjudged == 1
    assert doctor_cli._fleet_summary(report) == "2 of 3 node(s) judged: no failing finding; not judged (1): n3"
    everyone = fold_doctor(FleetResult(command="doctor", outcomes=dict(list(result.outcomes.items())[:2])))
    assert doctor_cli._fleet_summary(everyone) == "2 node(s) judged: no failing finding"


def test_fleet_doctor_exits_3_when_a_node_was_not_judged_and_1_on_a_failing_finding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """1 says "the fabric is broken", 3 "gpunet could not look": an unreachable node with no failing
    finding anywhere is 3, not 1 (the README's exit-code table)."""
    from gpunet.api import doctor as doctor_api  # noqa: PLC0415
    from gpunet.fleet import FleetResult, NodeOutcome  # noqa: PLC0415
    from gpunet.fleet.doctor import fold_doctor  # noqa: PLC0415

    def fleet(failing: bool) -> FleetResult:
        finding = {"check": "GN-MTU-01", "area": "mtu", "title": "MTU is the plane's", "node": "n1",
                   "verdict": "fail" if failing else "pass", "subject": "ens1", "observed": "1500", "expected": "9000",
                   "fix": "ip link set ens1 mtu 9000"}
        answer = json.dumps({"findings": [finding]})
        return FleetResult(command="doctor", outcomes={
            "n1": NodeOutcome(node="n1", rc=1 if failing else 0, stdout=answer),
            "n2": NodeOutcome(node="n2", rc=255, stderr="ssh: connect to host n2 port 22: No route to host")})

    for failing, code in ((False, 3), (True, 1)):
        report = fold_doctor(fleet(failing))
        monkeypatch.setattr(doctor_api, "fleet_doctor", lambda *args, report=report, **kwargs: report)
        done = runner.invoke(app, ["doctor", "n[1-2]", "--json"])
        assert done.exit_code == code, (failing, done.output)
