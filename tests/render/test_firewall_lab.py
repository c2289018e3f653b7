"""The rendered nftables rules, loaded into a lab server, let SSH in from the admin range and
refuse it from elsewhere: real connections inside the lab."""

from __future__ import annotations

import subprocess

import pytest

from gpunet.lab.build import LAB_PLAN
from gpunet.lab.sshd import ssh_argv
from gpunet.lab.state import LabState, lab_dir
from gpunet.model.io import read_plan
from gpunet.render.firewall import render_nftables
from tests.lab.helpers import built_lab, run_in
from tests.labs import lab_id

pytestmark = [pytest.mark.lab, pytest.mark.slow]
LAB = lab_id("zw")


def ruleset_for_lab(node: str) -> str:
    """The node's ruleset rendered from the lab's own plan (lab addresses; the host plays the admin box)."""
    plan = read_plan(lab_dir(LAB) / LAB_PLAN)
    found = plan.node(node)
    assert found is not None
    return render_nftables(plan, found)


def ssh_from(state: LabState, client: str | None, target: str) -> subprocess.CompletedProcess[str]:
    argv = ssh_argv(lab_dir(LAB), state.mgmt_addresses[target], ["hostname"])
    if client is None:  # the host: it sits at the plan's gateway address, inside the admin range
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return run_in(LAB, client, *argv, timeout=60)


def test_rendered_firewall_admits_ssh_only_from_the_admin_range() -> None:
    with built_lab(LAB) as state:
        rules = ruleset_for_lab("gpu4")
        loaded = subprocess.run(["ip", "netns", "exec", state.servers["gpu4"], "nft", "-f", "-"], input=rules,
                                capture_output=True, text=True, check=False)
        assert loaded.returncode == 0, loaded.stderr
        allowed = [ssh_from(state, client, "gpu4") for client in (None, "gpu1", "gpu2")]
        assert [r.stdout.strip() for r in allowed] == ["gpu4"] * 3, [r.stderr for r in allowed]
        for client in ("gpu3", "gpu5", "gpu8"):  # outside 198.18.0.0/30
            refused = ssh_from(state, client, "gpu4")
            assert refused.returncode == 255 and "timed out" in refused.stderr, refused.stderr
        # ICMP stays open (PMTU discovery), and compute-plane peers still reach each other.
        assert run_in(LAB, "gpu5", "ping", "-c", "1", "-W", "2", state.mgmt_addresses["gpu4"]).returncode == 0
