"""`gpunet lab` end to end through the CLI (root; `lab` marker)."""

from __future__ import annotations

import json
import subprocess

import pytest
from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.lab.faults import loss_script
from tests.lab.helpers import SMALL, leftovers
from tests.labs import lab_id
from tests.zygote import run_gpunet

CLI_LAB = lab_id("zc")

pytestmark = pytest.mark.lab
runner = CliRunner()


def gpunet(*args: str) -> subprocess.CompletedProcess[str]:
    return run_gpunet(list(args))


def test_lab_commands_end_to_end() -> None:
    try:
        up = gpunet("lab", "up", str(SMALL), "--lab", CLI_LAB, "--json")
        assert up.returncode == 0, up.stderr
        state = json.loads(up.stdout)
        assert len(state["servers"]) == 8 and state["status"] == "up"
        status = runner.invoke(app, ["lab", "status", "--lab", CLI_LAB, "--addresses"], terminal_width=200)
        assert "no RDMA" in status.stdout and "gpu8" in status.stdout
        # the plan <-> lab address map: the plan's compute 198.18.16.0/24 re-homed, host index kept
        assert "gpu8/ens1" in status.stdout and "198.18.16.8/24" in status.stdout
        # each switch's management address (its sshd), on small.yaml's management plane
        assert state["switch_mgmt"] and all(f"{s} " in status.stdout and a in status.stdout
                                            for s, a in state["switch_mgmt"].items())
        shown = gpunet("lab", "exec", "gpu4", "--lab", CLI_LAB, "--", "hostname")
        assert (shown.returncode, shown.stdout.strip()) == (0, "gpu4")
        failing = gpunet("lab", "exec", "gpu4", "--lab", CLI_LAB, "--", "false")
        assert failing.returncode == 1
        fault = gpunet("lab", "fault", "gpu4:ens1", "--loss", "5", "--lab", CLI_LAB, "--json")
        assert json.loads(fault.stdout)["kind"] == "loss"
        listed = json.loads(gpunet("lab", "status", "--lab", CLI_LAB, "--json").stdout)
        assert [f["kind"] for f in listed["faults"]] == ["loss"]  # one lab named: one object
        assert "1 fault" in gpunet("lab", "heal", "--lab", CLI_LAB).stdout
        two = gpunet("lab", "fault", "gpu4:ens1", "--loss", "5", "--down", "--lab", CLI_LAB)
        assert two.returncode == 2 and "exactly one" in two.stderr
        unknown = gpunet("lab", "fault", "gpu9:ens1", "--down", "--lab", CLI_LAB)
        assert unknown.returncode == 2 and "no cable end 'gpu9:ens1'" in unknown.stderr
        delay = gpunet("lab", "fault", "gpu4:ens1", "--delay", "5ms", "--lab", CLI_LAB)
        assert delay.returncode == 0 or "netem" in delay.stderr, delay.stderr
    finally:
        down = gpunet("lab", "down", "--lab", CLI_LAB)
    assert down.returncode == 0 and leftovers(CLI_LAB) == []
    assert "removed 0" in gpunet("lab", "down", "--lab", CLI_LAB).stdout


def test_status_of_a_missing_lab_is_a_clear_error() -> None:
    result = runner.invoke(app, ["lab", "status", "--lab", "nope"])
    assert result.exit_code == 2 and "no lab 'nope'" in result.output  # a lab that is not up: bad input
    bad = runner.invoke(app, ["lab", "down", "--lab", "../.."])
    assert bad.exit_code == 2 and "1-4 lowercase letters" in bad.output


def test_loss_rules_are_accepted_by_nft_and_a_broken_one_is_not(tmp_path) -> None:  # type: ignore[no-untyped-def]
    subprocess.run(["ip", "netns", "add", "gnnftchk"], check=True)
    try:
        subprocess.run(["ip", "-n", "gnnftchk", "link", "add", "p1", "type", "veth", "peer", "name", "p2"], check=True)
        good = subprocess.run(["ip", "netns", "exec", "gnnftchk", "nft", "-c", "-f", "-"], input=loss_script("p1", 2.5),
                              capture_output=True, text=True, check=False)
        assert good.returncode == 0, good.stderr
        broken = loss_script("p1", 2.5).replace("numgen random", "numgen bogus")
        bad = subprocess.run(["ip", "netns", "exec", "gnnftchk", "nft", "-c", "-f", "-"], input=broken,
                             capture_output=True, text=True, check=False)
        assert bad.returncode != 0
    finally:
        subprocess.run(["ip", "netns", "del", "gnnftchk"], check=True)
