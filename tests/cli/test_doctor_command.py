"""`gpunet doctor` and `gpunet probe` on this machine (no lab needed)."""

from __future__ import annotations

import json
from pathlib import Path

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
