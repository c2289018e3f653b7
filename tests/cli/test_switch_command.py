"""`gpunet switch check` without a lab: bad input is exit 2 naming what is wrong; real switches are
reached over SSH at the Plan's switch management addresses (the ssh command line checked, nothing
dialled)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpunet import reach as reach_module
from gpunet.cli.main import app
from gpunet.reach import Reach
from gpunet.spec.examples import example_text
from gpunet.spec.plan import plan_of

runner = CliRunner()


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(example_text("scalable-unit"))
    return path


def test_a_source_is_needed_and_only_one() -> None:
    alone = runner.invoke(app, ["switch", "check"])
    assert alone.exit_code == 2 and "--plan" in alone.output
    both = runner.invoke(app, ["switch", "check", "--lab", "ab", "--plan", "x.json"])
    assert both.exit_code == 2 and "not both" in both.output


def test_a_name_that_is_no_switch_of_the_plan_is_bad_input(spec: Path) -> None:
    done = runner.invoke(app, ["switch", "check", "gpu001", "--plan", str(spec), "--json"])
    assert done.exit_code == 2 and "not switches of the plan: gpu001" in done.output


def test_real_switches_are_reached_over_ssh_at_their_management_address(spec: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_run(argv: Sequence[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 255, "", "ssh: connect to host: Connection refused")

    monkeypatch.setattr(reach_module, "run_local", fake_run)
    plan = plan_of(spec)
    leaf = plan.switches_by_name["stor-leaf001"]
    assert leaf.management is not None
    runs = Reach.of_nodes(spec, user="admin", key=Path("/k")).switches(plan)
    assert set(runs) == {s.name for s in plan.switches if s.management}
    runs[leaf.name](["vtysh", "-c", "show bgp summary json"], 30)
    assert seen[-1][-2:] == [leaf.management.split("/")[0], "vtysh -c 'show bgp summary json'"]
    assert seen[-1][seen[-1].index("-l"):seen[-1].index("-l") + 2] == ["-l", "admin"] and "/k" in seen[-1]


def test_a_switch_that_cannot_be_read_is_exit_3_with_why(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reach_module, "run_local", lambda argv, **_: subprocess.CompletedProcess(
        list(argv), 255, "", "ssh: connect to host port 22: Connection refused"))
    done = runner.invoke(app, ["switch", "check", "stor-leaf001", "--plan", str(spec), "--json"])
    assert done.exit_code == 3, done.output
    assert "Connection refused" in done.output and '"stor-leaf001"' in done.output
