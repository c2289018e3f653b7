"""The node agent run here on a temporary root (files-only targets, so no root and no network):
the transaction's journal, the guard's revert at the deadline and when its worker dies, confirm
and abort, settling an orphan, and paths that must stay inside the root."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from gpunet.apply.manifest import lab_network_state
from gpunet.errors import UsageError
from gpunet.node import files as node_files
from gpunet.node import journal as node_journal
from gpunet.node import runtime
from gpunet.node.bundle import agent_script
from gpunet.node.contract import FINAL

HOST = socket.gethostname().split(".")[0]



def _bundled_agent() -> Path:
    """The agent as nodes get it, the one bundled script, in a directory removed at exit."""
    directory = Path(tempfile.mkdtemp(prefix="gpunet-agent-"))
    atexit.register(shutil.rmtree, directory, True)
    (directory / "agent.py").write_text(agent_script())
    return directory / "agent.py"


AGENT = _bundled_agent()


def _bundle(tmp: Path, files: dict[str, str], *, timeout: float = 30, pause_at: str | None = None,
            node: str = HOST, txid: str = "abc123def456") -> Path:
    bundle = tmp / f"bundle-{txid}"
    (bundle / "manifests").mkdir(parents=True)
    manifest = {"version": 1, "txid": txid, "node": node, "timeout_s": timeout, "pause_at": pause_at,
                "token_sha256": node_files.sha256(b"secret"),
                "files": [{"path": p, "content": c, "mode": 0o644} for p, c in files.items()],
                "targets": [{"name": "hosts", "requires": [], "check": [], "apply": [], "revert": [], "snapshot": []}]}
    (bundle / "manifests" / f"{node}.json").write_text(json.dumps(manifest))
    return bundle


def _agent(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, str(AGENT), args[0], "--root", str(root), *args[1:]], capture_output=True,
                          text=True, timeout=60, check=False)
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def _journal(root: Path) -> dict[str, Any]:
    return node_journal.load_journal(root / "var/lib/gpunet/apply")


def _wait_state(root: Path, states: tuple[str, ...], seconds: float = 20) -> dict[str, Any]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        journal = _journal(root)
        if journal.get("state") in states:
            return journal
        time.sleep(0.05)
    raise AssertionError(f"still {_journal(root).get('state')}")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    tree = tmp_path / "root"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc/hosts").write_text("old hosts\n")
    return tree


def test_confirmed_over_a_new_call_the_new_files_stay(root: Path, tmp_path: Path) -> None:
    # a deadline two agent calls outlast on a loaded host (2 s did not), then waited out
    bundle = _bundle(tmp_path, {"etc/hosts": "new hosts\n", "etc/gpunet/nccl.env": "NCCL_X=1\n"}, timeout=12)
    rc, said = _agent(root, "begin", "--bundle", str(bundle))
    assert rc == 0 and said["started"]
    assert _wait_state(root, ("applied",))["files"][0]["existed"] is True
    assert _agent(root, "confirm", "abc123def456", "wrong")[0] == 2  # a stale controller cannot commit
    rc, said = _agent(root, "confirm", "abc123def456", "secret")
    assert rc == 0 and said["state"] == "committed" and said["configuration"] == "new"
    time.sleep(max(0.0, _journal(root)["deadline"] - time.time()) + 0.5)  # past the deadline
    assert _journal(root)["state"] == "committed" and (root / "etc/hosts").read_text() == "new hosts\n"


def test_unconfirmed_the_guard_restores_every_file_at_the_deadline(root: Path, tmp_path: Path) -> None:
    # the deadline counts from `begin`, before the worker and its guard (two processes) start: room
    # for both on a loaded host, then the revert judged from the deadline the journal holds
    bundle = _bundle(tmp_path, {"etc/hosts": "new hosts\n", "etc/gpunet/nccl.env": "NCCL_X=1\n"}, timeout=10)
    assert _agent(root, "begin", "--bundle", str(bundle))[0] == 0
    assert _wait_state(root, ("applied",))
    assert (root / "etc/hosts").read_text() == "new hosts\n"
    journal = _wait_state(root, FINAL)
    assert journal["state"] == "reverted" and journal["reason"] == "not confirmed within 10 s"
    assert (root / "etc/hosts").read_text() == "old hosts\n" and not (root / "etc/gpunet/nccl.env").exists()
    assert 0 <= journal["finished_at"] - journal["deadline"] < 5  # at the deadline; a starved guard is late
    rc, said = _agent(root, "status")
    assert rc == 0 and said["configuration"] == "old"


@pytest.mark.parametrize("step", ["backed-up", "writing", "applied"])
def test_a_worker_killed_at_each_step_is_reverted_by_its_guard_at_once(root: Path, tmp_path: Path,
                                                                        step: str) -> None:
    files = {"etc/hosts": "new hosts\n", "etc/gpunet/nccl.env": "NCCL_X=1\n"}
    assert _agent(root, "begin", "--bundle", str(_bundle(tmp_path, files, timeout=60, pause_at=step)))[0] == 0
    state_dir = root / "var/lib/gpunet/apply"
    marker, waited = state_dir / "tx/abc123def456" / f"paused-{step}", time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < waited, f"the worker did not reach {step}"
        time.sleep(0.05)
    os.kill(_journal(root)["worker_pid"], signal.SIGKILL)
    killed = time.time()
    journal = _wait_state(root, FINAL, seconds=30)
    # reverted as soon as the guard saw its worker gone, long before the 60 s deadline
    assert journal["state"] == "reverted" and journal["finished_at"] - killed < 20
    assert journal["interrupted_at"] == {"applied": "written"}.get(step, step)
    assert (root / "etc/hosts").read_text() == "old hosts\n" and not (root / "etc/gpunet/nccl.env").exists()


def test_an_orphan_with_worker_and_guard_killed_is_settled_by_the_next_run(root: Path, tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, {"etc/hosts": "new hosts\n"}, timeout=60)
    assert _agent(root, "begin", "--bundle", str(bundle))[0] == 0
    journal = _wait_state(root, ("applied",))
    os.kill(journal["guard_pid"], signal.SIGKILL)  # as a reboot would
    time.sleep(0.3)
    rc, said = _agent(root, "status")
    assert rc == 0 and said["state"] == "reverted" and "its guard gone" in said["reason"]
    assert (root / "etc/hosts").read_text() == "old hosts\n"


def test_abort_reverts_now_and_a_second_begin_waits_for_no_one(root: Path, tmp_path: Path) -> None:
    assert _agent(root, "begin", "--bundle", str(_bundle(tmp_path, {"etc/hosts": "x\n"}, timeout=60)))[0] == 0
    _wait_state(root, ("applied",))
    second = _bundle(tmp_path / "2", {"etc/hosts": "y\n"}, txid="bbb222ccc333")
    rc, said = _agent(root, "begin", "--bundle", str(second))
    assert rc == 2 and "confirm it or roll it back first" in said["error"]
    rc, said = _agent(root, "abort", "abc123def456", "--reason", "verification failed: GN-MTU-01 eth0")
    assert rc == 0 and said["state"] == "reverted" and said["reason"].startswith("verification failed")
    assert (root / "etc/hosts").read_text() == "old hosts\n"


def test_a_bundle_for_other_nodes_or_with_escaping_paths_changes_nothing(root: Path, tmp_path: Path) -> None:
    rc, said = _agent(root, "begin", "--bundle", str(_bundle(tmp_path, {"etc/hosts": "x\n"}, node="gpu999")))
    assert rc == 2 and f"this node is {HOST!r}" in said["error"] and "gpu999" in said["error"]
    assert not (root / "var/lib/gpunet/apply/journal.json").exists()
    for bad in ("../outside", "/etc/passwd", "etc/../../x", "etc/ho\nsts"):
        with pytest.raises(node_files.Refused):
            node_files.under(root, bad)
    rc, said = _agent(root, "begin", "--bundle", str(_bundle(tmp_path / "b", {"../../escape": "x\n"})))
    assert rc == 2 and "not a plain relative path" in said["error"] and not _journal(root)


def test_a_missing_tool_is_refused_before_anything(root: Path, tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, {"etc/hosts": "x\n"})
    path = bundle / "manifests" / f"{HOST}.json"
    manifest = json.loads(path.read_text())
    manifest["targets"][0] |= {"name": "networkmanager", "requires": ["gpunet-no-such-tool"]}
    path.write_text(json.dumps(manifest))
    rc, said = _agent(root, "begin", "--bundle", str(bundle))
    assert rc == 2 and "needs gpunet-no-such-tool, which this node lacks" in said["error"]
    assert (root / "etc/hosts").read_text() == "old hosts\n" and not _journal(root)


def test_lab_network_state_reads_the_rendered_netplan_and_refuses_what_the_lab_lacks() -> None:
    text = ("network:\n  version: 2\n  ethernets:\n    eth0:\n      mtu: 1500\n      addresses: [198.18.0.2/24]\n"
            "      routes:\n      - {to: default, via: 198.18.0.1}\n")
    assert lab_network_state(text) == {
        "links": {"eth0": {"mtu": 1500, "addresses": ["198.18.0.2/24"]}},
        "routes": [{"to": "default", "via": "198.18.0.1", "dev": "eth0", "metric": None, "type": None, "table": None,
                    "scope": None, "src": None}],
        "rules": []}
    with pytest.raises(UsageError, match="bonds"):
        lab_network_state("network:\n  bonds: {bond0: {}}\n")
    # what the stand-in cannot set is refused, not dropped: a rule on a firewall mark, an MTU per route
    with pytest.raises(UsageError, match="eth0's routing-policy mark"):
        lab_network_state(text + "      routing-policy:\n      - {from: 198.18.0.2, table: 100, mark: 3}\n")
    with pytest.raises(UsageError, match="eth0's route mtu"):
        lab_network_state(text.replace("via: 198.18.0.1}", "via: 198.18.0.1, mtu: 1400}"))


def test_ip_batch_lines_take_only_checked_words() -> None:
    assert runtime._route_line({"to": "198.18.0.0/25", "via": "198.18.1.254", "dev": "ens1", "metric": 5}) == \
        "route replace 198.18.0.0/25 via 198.18.1.254 dev ens1 metric 5 proto static"
    assert runtime._route_line({"to": "198.18.0.0/26", "type": "blackhole", "dev": "ens1"}) == \
        "route replace blackhole 198.18.0.0/26 proto static"
    with pytest.raises(ValueError):
        runtime._route_line({"to": "198.18.0.0/24\nnetns exec x touch /tmp/p", "via": "198.18.1.1"})
    with pytest.raises(node_files.Refused):
        runtime._checked_link("eth0 mtu 1\naddr add", {"addresses": []})
