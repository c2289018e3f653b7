"""`gpunet apply` against a lab over real SSH: a good change confirmed stays; each kind of bad
change is reverted with SSH working afterwards (a new connection); kill -9 at each step leaves the
old configuration and the next run says so; a rollout stops after a failed canary; bad input
changes nothing. (benchmarks/apply_lockouts.py runs all 56 injected bad changes.)"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

from gpunet.api.apply import reach
from gpunet.apply import ApplyOptions, ApplyReport, Remote, apply_rollout, dry_run, status
from gpunet.apply.manifest import DEFAULT_TARGETS
from gpunet.lab.sshd import ssh_argv
from gpunet.lab.state import LabState, lab_dir
from gpunet.model.plan import Plan
from tests.apply.bad_changes import KINDS
from tests.lab.helpers import built_lab
from tests.labs import lab_id

LAB = lab_id("ay")
TIMEOUT_S = 20.0
# a change that ends by its verification, good or bad, is confirmed or reverted as soon as the
# verifying doctor ends, so its deadline costs nothing: on a loaded CI host that doctor has outlasted
# the 14 s a 20 s deadline left it (the good change's: the last test waits out its deadline), and the
# 6 s a failed canary's left it (the canary's is apply's own default)
GOOD_TIMEOUT_S = 60.0
CANARY_TIMEOUT_S = 120.0
CLI_KILLED_TIMEOUT_S = 30  # the node whose `apply run` is killed: reverted by its guard at this deadline
BAD_TIMEOUT_S = 20.0  # every bad change ends reverted; the lockouts wait for this deadline
# how long the kill test waits for a node to reach its step: on a loaded 2-core CI host with four
# test workers, reaching 'applied' on three nodes at once has taken more than 20 s
REACH_STEP_S = 180.0
pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture(scope="module")
def lab() -> Iterator[tuple[LabState, Remote]]:
    with built_lab(LAB) as state:
        plan, remote, _ = reach(lab=LAB, plan=None)
        del plan
        yield state, remote


def _plan() -> Plan:
    return reach(lab=LAB, plan=None)[0]


def _rollout(remote: Remote, nodes: str, **options: object) -> ApplyReport:
    options = {"timeout_s": TIMEOUT_S} | options
    return apply_rollout(_plan(), NodeSet(nodes), remote,
                         ApplyOptions(targets=DEFAULT_TARGETS, **options))  # type: ignore[arg-type]


def _tree(node: str) -> dict[str, str]:
    """Digests of a server's own files (what apply writes), its journal left out."""
    root = lab_dir(LAB) / "root" / node
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and "var/lib/gpunet" not in str(p)}


def _runtime(node: str) -> str:
    """What apply changes at run time in a server: addresses, MTU, routes, the firewall, sysctls."""
    ns = f"gn{LAB}-{node}"
    parts = [["ip", "-n", ns, "-4", "-o", "addr"], ["ip", "-n", ns, "-4", "route"],
             ["ip", "netns", "exec", ns, "nft", "list", "ruleset"],
             ["ip", "netns", "exec", ns, "sysctl", "net.ipv4.tcp_rmem", "net.core.somaxconn"]]
    return _links(node) + "\n".join(subprocess.run(p, capture_output=True, text=True, check=True).stdout for p in parts)


def _links(node: str) -> str:
    out = subprocess.run(["ip", "-n", f"gn{LAB}-{node}", "-j", "link"], capture_output=True, text=True, check=True)
    return json.dumps([(link["ifname"], link["mtu"]) for link in json.loads(out.stdout)])


def _ssh_works(state: LabState, node: str) -> bool:
    done = subprocess.run(ssh_argv(lab_dir(LAB), state.mgmt_addresses[node], ["hostname"]), capture_output=True,
                          text=True, timeout=60, check=False)
    return done.returncode == 0 and done.stdout.strip() == node


def test_a_good_change_is_confirmed_and_the_dry_run_then_finds_nothing(lab: tuple[LabState, Remote]) -> None:
    state, remote = lab
    assert not _tree("gpu8")  # nothing of gpunet's yet
    preview = subprocess.run([sys.executable, "-m", "gpunet", "apply", "run", "gpu8", "--lab", LAB, "--dry-run"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert preview.returncode == 0, preview.stderr
    assert "5 of 5 files change" in preview.stdout, preview.stdout
    assert "+++ b/etc/netplan/60-gpunet.yaml" in preview.stdout and "sysctl net.ipv4.tcp_mtu_probing" in preview.stdout
    assert "would run: nftables: nft -c -f /etc/nftables.d/gpunet.nft" in preview.stdout
    assert not _tree("gpu8")  # the dry run changed nothing
    report = _rollout(remote, "gpu8", timeout_s=GOOD_TIMEOUT_S)
    assert [n.outcome for n in report.nodes] == ["applied"] and report.nodes[0].ssh_after, report.nodes
    assert "etc/netplan/60-gpunet.yaml" in _tree("gpu8") and _ssh_works(state, "gpu8")
    assert "table inet gpunet" in _runtime("gpu8")  # the firewall is live in the server
    preview_after = dry_run(_plan(), NodeSet("gpu8"), remote, DEFAULT_TARGETS)
    assert [f.path for f in preview_after[0].files if f.diff] == [] and preview_after[0].error == ""


def test_each_kind_of_bad_change_is_reverted_and_ssh_works_after(lab: tuple[LabState, Remote]) -> None:
    state, remote = lab
    nodes = [f"gpu{i + 1}" for i in range(len(KINDS))]
    before = {n: (_tree(n), _runtime(n)) for n in nodes}
    kinds = list(KINDS.values())

    def bad(node: str, files: dict[str, str]) -> dict[str, str]:
        index = nodes.index(node)  # variant index + 1: the address removed with its routes, so the apply works
        return kinds[index](index + 1)(files)

    report = _rollout(remote, f"gpu[1-{len(nodes)}]", canary=0, batch=len(nodes), max_fail=len(nodes), change=bad,
                      timeout_s=BAD_TIMEOUT_S)
    outcomes = {n.node: n for n in report.nodes}
    for node, kind in zip(nodes, KINDS, strict=True):
        result = outcomes[node]
        assert result.outcome == "reverted" and result.configuration == "old", (kind, result)
        # ended by its deadline, not by anything later: the revert's own work (ip, an sshd reload) is
        # what the margin is for, and on a loaded 2-core host it has taken seconds, not tenths
        assert result.node_seconds is not None and result.node_seconds <= BAD_TIMEOUT_S + 30, (kind, result)
        assert _ssh_works(state, node), kind  # a new connection, after the revert
        assert _tree(node) == before[node][0], kind
        assert _runtime(node).splitlines() == before[node][1].splitlines(), kind
    # both ways of reverting happened: the controller after a failed verification, the guard alone
    reasons = " ".join(n.reason for n in report.nodes)
    assert "verification failed" in reasons and f"not confirmed within {BAD_TIMEOUT_S:g} s" in reasons


def _kill_worker_when_paused(node: str, step: str, killed: dict[str, float]) -> None:
    state_dir = lab_dir(LAB) / "root" / node / "var/lib/gpunet/apply"
    deadline = time.monotonic() + REACH_STEP_S  # the worker sleeps at its step until killed: no hurry
    while time.monotonic() < deadline:
        journal = json.loads((state_dir / "journal.json").read_text()) if (state_dir / "journal.json").exists() \
            else {}
        if journal.get("txid") and (state_dir / "tx" / journal["txid"] / f"paused-{step}").exists():
            os.kill(journal["worker_pid"], signal.SIGKILL)
            killed[node] = time.time()  # the journal's clock
            return
        time.sleep(0.05)


def _kill_the_cli_once_applied(apply_run: subprocess.Popen[bytes], node: str, seen: dict[str, object]) -> None:
    """SIGKILL `gpunet apply run` itself once its node has applied and waits for the confirmation."""
    state_dir = lab_dir(LAB) / "root" / node / "var/lib/gpunet/apply"
    deadline = time.monotonic() + REACH_STEP_S
    try:
        while time.monotonic() < deadline and apply_run.poll() is None:
            journal = json.loads((state_dir / "journal.json").read_text()) if (state_dir / "journal.json").exists() \
                else {}
            if journal.get("state") == "applied" and "hosts" in (state_dir / "tx" / journal["txid"] /
                                                                  "manifest.json").read_text():
                seen.update(journal=journal, tree=_tree(node))  # the new file in place while it waits
                return
            time.sleep(0.05)
    finally:
        apply_run.kill()
        apply_run.wait()


def test_kill_9_at_each_step_leaves_the_old_configuration_and_the_next_run_says_so(
        lab: tuple[LabState, Remote]) -> None:
    """The agent's worker killed after the backup, mid-write and after the apply (gpu1-3), and
    `gpunet apply run` itself killed while its node waits for the confirmation (gpu4), all at once."""
    state, remote = lab
    steps = {"gpu1": "backed-up", "gpu2": "writing", "gpu3": "applied"}
    before = {n: (_tree(n), _runtime(n)) for n in [*steps, "gpu4"]}

    def change(node: str, files: dict[str, str]) -> dict[str, str]:
        return KINDS["MTU mismatch on management"](0)(files)  # visible if it stayed: eth0 at 9000

    # gpu4's deadline is waited out below; it must still come after `applied` on a loaded host
    apply_run = subprocess.Popen([sys.executable, "-m", "gpunet", "apply", "run", "gpu4", "--lab", LAB, "--timeout",
                                  str(CLI_KILLED_TIMEOUT_S), "--target", "hosts"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
    killed: dict[str, float] = {}
    seen: dict[str, object] = {}
    killers = [threading.Thread(target=_kill_worker_when_paused, args=(n, s, killed)) for n, s in steps.items()]
    killers.append(threading.Thread(target=_kill_the_cli_once_applied, args=(apply_run, "gpu4", seen)))
    for k in killers:
        k.start()
    # the workers are killed at their steps: a deadline past any wait to reach them costs nothing
    report = _rollout(remote, "gpu[1-3]", canary=0, batch=3, max_fail=3, change=change, pause_at=steps,
                      timeout_s=REACH_STEP_S)
    for k in killers:
        k.join()
    assert sorted(killed) == ["gpu1", "gpu2", "gpu3"] and "etc/hosts" in seen["tree"]  # type: ignore[operator]
    time.sleep(max(0.0, seen["journal"]["deadline"] - time.time()) + 0.5)  # type: ignore[index]
    after = status(remote, NodeSet("gpu[1-3]"))
    for node, step in steps.items():
        said = after[node].data
        assert said["state"] == "reverted" and said["configuration"] == "old", said
        # the guard saw the worker die at once, not at the deadline
        assert said["interrupted_at"] == ("written" if step == "applied" else step), said
        assert "its worker is gone" in said["reason"] and said["finished_at"] - killed[node] < 20
    assert {n.outcome for n in report.nodes} == {"reverted"}
    # the CLI killed while waiting: the guard reverted at the deadline; the next run says so
    said_json = subprocess.run([sys.executable, "-m", "gpunet", "apply", "status", "gpu4", "--lab", LAB, "--json"],
                               capture_output=True, text=True, timeout=60, check=False)
    journal = json.loads(said_json.stdout)["gpu4"]
    assert journal["state"] == "reverted" and journal["configuration"] == "old", journal
    assert journal["reason"] == f"not confirmed within {CLI_KILLED_TIMEOUT_S} s"
    table = subprocess.run([sys.executable, "-m", "gpunet", "apply", "status", "gpu4", "--lab", LAB],
                           capture_output=True, text=True, timeout=60, check=False,
                           env={**os.environ, "COLUMNS": "200"})
    assert "reverted" in table.stdout and f"not confirmed within {CLI_KILLED_TIMEOUT_S} s" in table.stdout, \
        table.stdout
    for node in [*steps, "gpu4"]:
        assert (_tree(node), _runtime(node)) == before[node] and _ssh_works(state, node), node


def test_a_rollout_stops_after_a_failed_canary_and_leaves_the_rest_unchanged(lab: tuple[LabState, Remote]) -> None:
    _, remote = lab
    rest = NodeSet("gpu[2-8]")
    journals = {n: r.data for n, r in status(remote, rest).items()}
    before = {n: (_tree(n), _runtime(n), journals[n]) for n in rest}

    def canary_breaks(node: str, files: dict[str, str]) -> dict[str, str]:
        return KINDS["wrong gateway"](1)(files) if node == "gpu1" else files

    report = _rollout(remote, "gpu[1-8]", canary=1, batch=4, change=canary_breaks, timeout_s=CANARY_TIMEOUT_S)
    assert report.stopped_after == 0 and report.batches == ("gpu1", "gpu[2-5]", "gpu[6-8]")
    assert report.nodes[0].outcome == "reverted" and "GN-ROUTE-02" in report.nodes[0].reason
    assert [n.outcome for n in report.nodes[1:]] == ["not-started"] * 7
    journals = {n: r.data for n, r in status(remote, rest).items()}
    assert {n: (_tree(n), _runtime(n), journals[n]) for n in rest} == before


def test_bad_input_changes_nothing(lab: tuple[LabState, Remote], tmp_path: Path) -> None:
    state, remote = lab
    before = {n: (_tree(n), _runtime(n)) for n in ("gpu5", "gpu6", "gpu7")}
    # gpu5 answers at gpu6's address: the plan does not match the host reached
    swapped = replace(remote, runner=replace(remote.runner, addresses={**remote.runner.addresses,
                                                                       "gpu5": state.mgmt_addresses["gpu6"]}))
    report = _rollout(swapped, "gpu5", canary=1)
    assert report.nodes[0].outcome == "refused" and "this node is 'gpu6'" in report.nodes[0].reason
    # a node nobody answers for (a lab address no server has)
    dead = replace(remote, runner=replace(remote.runner, connect_timeout=2,
                                          addresses={**remote.runner.addresses, "gpu7": "198.18.0.200"}))
    report = _rollout(dead, "gpu7", canary=1)
    assert report.nodes[0].outcome == "unreachable" and report.nodes[0].configuration == "untouched"
    # a render target the node lacks: no NetworkManager here
    report = apply_rollout(_plan(), NodeSet("gpu6"), remote, ApplyOptions(targets=("networkmanager",), timeout_s=9))
    assert report.nodes[0].outcome == "refused" and "needs nmcli, which this node lacks" in report.nodes[0].reason
    # a key that does not log in: refused before anything, with the way out
    key = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    stranger = replace(remote, runner=replace(remote.runner, key=str(key)))
    report = _rollout(stranger, "gpu6", canary=1)
    assert report.nodes[0].outcome == "unreachable" and "install-key" in report.nodes[0].reason
    assert {n: (_tree(n), _runtime(n)) for n in before} == before


def test_the_cli_refuses_a_node_outside_the_plan(lab: tuple[LabState, Remote]) -> None:
    done = subprocess.run([sys.executable, "-m", "gpunet", "apply", "run", "gpu99", "--lab", LAB], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 2 and "gpu99" in done.stderr


def test_a_confirmed_change_stays_past_its_deadline(lab: tuple[LabState, Remote]) -> None:
    """gpu8's good change of the first test: its guard's deadline has passed (the tests between took
    longer than it; waited for if not), and the change is still there."""
    kept = status(lab[1], NodeSet("gpu8"))["gpu8"].data
    time.sleep(min(GOOD_TIMEOUT_S, max(0.0, kept["deadline"] - time.time()) + 0.5))
    kept = status(lab[1], NodeSet("gpu8"))["gpu8"].data
    assert kept["state"] == "committed" and kept["configuration"] == "new" and time.time() > kept["deadline"]
    assert "etc/netplan/60-gpunet.yaml" in _tree("gpu8") and "table inet gpunet" in _runtime("gpu8")
