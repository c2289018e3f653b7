"""Fleet through ClusterShell: folding identical outcomes, local runs, the lab over ip netns
exec and over real SSH."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from ClusterShell.NodeSet import NodeSet

from gpunet.fleet import FleetResult, NodeOutcome, local_runner
from gpunet.reach import Reach
from tests.labs import SharedLabs


def test_identical_outcomes_fold_like_clush_b() -> None:
    outcomes = {f"gpu{i:02d}": NodeOutcome(node=f"gpu{i:02d}", rc=0, stdout="ok") for i in range(1, 8)}
    outcomes["gpu08"] = NodeOutcome(node="gpu08", rc=1, stdout="", stderr="boom")
    groups = FleetResult(command="x", outcomes=outcomes).groups()
    assert [(nodes, o.rc) for nodes, o in groups] == [("gpu[01-07]", 0), ("gpu08", 1)]


def test_local_runner_is_the_clustershell_exec_path() -> None:
    result = local_runner(timeout=10).run(["sh", "-c", "echo hi; exit 3"], NodeSet("a[1-3]"))
    assert {n: (o.rc, o.stdout) for n, o in result.outcomes.items()} == {f"a{i}": (3, "hi") for i in (1, 2, 3)}
    assert sorted(result.failed) == ["a1", "a2", "a3"]


def test_a_command_past_its_timeout_is_data_not_an_exception() -> None:
    result = local_runner(timeout=0.5).run(["sleep", "5"], NodeSet("a1"))
    assert result.outcomes["a1"].rc is None and result.outcomes["a1"].error == "timed out"


@pytest.mark.lab
def test_fleet_run_over_real_ssh_and_netns_exec_to_the_lab(shared_labs: SharedLabs) -> None:
    """`fleet run --lab` goes over real SSH with the lab's key (the old `--ssh-lab` still works for a
    release, and says so); the library's exec transport folds the same outcomes."""
    lab = shared_labs.get("small").lab_id
    script = ["sh", "-c", "uname -s; test $(hostname) != gpu5"]
    for how in ("--lab", "--ssh-lab"):
        done = subprocess.run([sys.executable, "-m", "gpunet", "fleet", "run", "gpu[1-8]", how, lab, "--json",
                               "--", *script], capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 1, done.stderr  # gpu5's command failed: exit 1, output still grouped
        assert ("--ssh-lab is deprecated, use --lab" in done.stderr) == (how == "--ssh-lab"), done.stderr
        folded = json.loads(done.stdout)["groups"]
        # per node: a group splits where one node's stderr differs, and a login shell over real SSH
        # may say something of its own there (root's pyenv rehash racing another session's)
        per_node = {node: (g["rc"], g["stdout"]) for g in folded for node in NodeSet(g["nodes"])}
        assert per_node == {f"gpu{i}": (1 if i == 5 else 0, "Linux") for i in range(1, 9)}, (how, folded)
    result = Reach.of_lab(lab, "exec").runner().run(script, NodeSet("gpu[1-8]"))
    assert {nodes: (o.rc, o.stdout.strip()) for nodes, o in result.groups()} == {
        "gpu[1-4,6-8]": (0, "Linux"), "gpu5": (1, "Linux")}
