"""The laptop's day against the lab over real SSH (one lab for the module, shaped at 100 Mbit/s per
plan Gbit/s): files to and from 8 servers, a server unreachable, a detached run that outlives the
admin side, a capture of an iperf3 flow, and the rendered ssh_config through a lab bastion.

The lab's servers share one filesystem: a copy to 8 servers renames 8 checked copies onto one
path, and a gather reads it back once per server."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

from gpunet.fleet.gather import gather_from
from gpunet.fleet.transfer import copy_to
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.state import LabState
from gpunet.reach import Reach
from tests.lab.helpers import built_lab, lab_address, server_process, until_listening
from tests.labs import lab_id
from tests.zygote import run_gpunet

LAB = lab_id("fl")
SERVERS = NodeSet("gpu[1-8]")
pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with built_lab(LAB, scale=100) as state:
        yield state


def gpunet(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_gpunet(list(args), env={**os.environ, **(env or {})}, timeout=timeout)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_copy_to_every_server_and_gather_back_over_ssh(lab: LabState, tmp_path: Path) -> None:
    del lab
    source, dest, out = tmp_path / "weights.bin", tmp_path / "dest", tmp_path / "out"
    source.write_bytes(os.urandom(3_000_000))
    dest.mkdir()
    runner = Reach.of_lab(LAB, "ssh").runner()
    copied = copy_to(runner, SERVERS, source, str(dest))
    assert copied.failed == [] and {o.path for o in copied.outcomes.values()} == {str(dest / "weights.bin")}
    assert _sha(dest / "weights.bin") == _sha(source) and [p.name for p in dest.iterdir()] == ["weights.bin"]
    gathered = gather_from(runner, SERVERS, str(dest / "weights.bin"), out, mkdir=True)
    assert gathered.failed == [] and gathered.bytes == 8 * 3_000_000
    assert {_sha(out / node / "weights.bin") for node in SERVERS} == {_sha(source)}
    assert sorted(p.name for p in out.iterdir()) == list(SERVERS)  # no staging left


def test_an_unreachable_server_is_reported_and_the_others_complete(lab: LabState, tmp_path: Path) -> None:
    del lab
    source, dest = tmp_path / "config.tar", tmp_path / "dest"
    source.write_bytes(os.urandom(200_000))
    dest.mkdir()
    apply_fault(LAB, "gpu8:eth0", "down")
    try:
        done = gpunet("fleet", "copy", "gpu[1-8]", "--lab", LAB, str(source), str(dest), "--connect-timeout",
                      "10", "--json")  # the reachable nodes' handshakes too: room for a loaded host
    finally:
        heal(LAB)
    assert done.returncode == 3, done.stderr  # gpu8 could not be reached and no copy failed: could not, not 1
    groups = {g["nodes"]: (g["ok"], g["error"]) for g in json.loads(done.stdout)["groups"]}
    assert groups.keys() == {"gpu[1-7]", "gpu8"} and groups["gpu[1-7]"] == (True, None)
    assert "ssh: connect to host" in groups["gpu8"][1], groups
    assert _sha(dest / "config.tar") == _sha(source)


def test_copy_and_gather_through_a_gateway_in_clustershells_tree_mode(lab: LabState, tmp_path: Path) -> None:
    """ClusterShell's own topology.conf puts gpu8 between this host and gpu[1-3]: the commands
    and copies go through `python -m ClusterShell.Gateway` on gpu8 (the lab shares this Python)."""
    gateway = lab.mgmt_addresses["gpu8"]
    targets = ",".join(lab.mgmt_addresses[n] for n in ("gpu1", "gpu2", "gpu3"))  # the names gpunet connects to
    (tmp_path / "topology.conf").write_text(f"[routes]\n{socket.gethostname().split('.')[0]}: {gateway}\n"
                                            f"{gateway}: {targets}\n")
    env = {"CLUSTERSHELL_CFGDIR": str(tmp_path), "CLUSTERSHELL_GW_PYTHON_EXECUTABLE": sys.executable}
    source, dest = tmp_path / "notes.txt", tmp_path / "dest"
    source.write_text("through the gateway\n" * 5000)
    dest.mkdir()
    seen = gpunet("fleet", "run", "gpu[1-3]", "--lab", LAB, "--json", "--", "sh", "-c", "echo $SSH_CONNECTION",
                  env=env)
    assert {g["stdout"].split()[0] for g in json.loads(seen.stdout)["groups"]} == {gateway}, seen.stdout
    copied = gpunet("fleet", "copy", "gpu[1-3]", "--lab", LAB, str(source), str(dest), "--json", env=env)
    gathered = gpunet("fleet", "gather", "gpu[1-3]", "--lab", LAB, str(dest / "notes.txt"),
                      str(tmp_path / "out"), "--mkdir", "--json", env=env)
    assert copied.returncode == gathered.returncode == 0, copied.stdout + gathered.stdout
    assert {_sha(tmp_path / "out" / n / "notes.txt") for n in ("gpu1", "gpu2", "gpu3")} == {_sha(source)}


def _descendants(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (FileNotFoundError, ProcessLookupError):  # it ended between its parent's listing and this read
        return []
    return [int(c) for c in children] + [d for c in children for d in _descendants(int(c))]


def test_a_detached_run_survives_the_admin_side_being_killed(lab: LabState, tmp_path: Path) -> None:
    """The issue's 60 s job, 2 s in the suite (GPUNET_DETACHED_JOB_S sets it): started with
    --follow (gpunet holds one SSH connection per server), gpunet and its ssh processes SIGKILLed
    by PID mid-run, then `fleet status NAME` from a fresh process (its record names the nodes)
    sees every server finish."""
    del lab
    env = {"XDG_STATE_HOME": str(tmp_path / "admin")}
    seconds = os.environ.get("GPUNET_DETACHED_JOB_S", "2")  # the 60: GPUNET_DETACHED_JOB_S=60
    job = f"echo begin $(hostname); sleep {int(seconds)}; echo end $(hostname)"
    starts = {name: subprocess.Popen(
        [sys.executable, "-m", "gpunet", "fleet", "run", nodes, "--lab", LAB, "--detach", name, "--via", via,
         "--state-dir", str(tmp_path / "runs"), "--follow", "--", "sh", "-c", job],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, **env})
        for name, nodes, via in (("survive-t", "gpu[1-4]", "tmux"), ("survive-s", "gpu[5-8]", "setsid"))}
    for name, process in starts.items():
        assert process.stdout is not None
        # each server's first line, streamed: its `begin` (only each node's own order is given: a 2 s
        # job on one server can end before another's has begun on a loaded host)
        first: dict[str, str] = {}
        while len(first) < 4:
            line = process.stdout.readline()
            assert line, (name, first)
            node, _, said = line.rstrip("\n").partition(": ")
            first.setdefault(node, said)
        assert all(said == f"begin {node}" for node, said in first.items()), (name, first)
        victims = [process.pid, *_descendants(process.pid)]
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):  # a child (an ssh) may end between listing and kill
                os.kill(pid, signal.SIGKILL)
        process.wait(timeout=10)
        assert _all_ended(victims)
    checks = {nodes: subprocess.Popen(
        [sys.executable, "-m", "gpunet", "fleet", "status", name, "--wait", str(int(seconds) + 30), "--lines", "-1",
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **env})
        for name, nodes in (("survive-t", "gpu[1-4]"), ("survive-s", "gpu[5-8]"))}
    for nodes, check in checks.items():
        out, err = check.communicate(timeout=int(seconds) + 60)
        assert check.returncode == 0, out + err
        states = {n: g for g in json.loads(out)["groups"] for n in NodeSet(g["nodes"])}
        assert set(states) == set(NodeSet(nodes))
        assert all((g["state"], g["rc"], g["output"]) == ("done", 0, f"begin {n}\nend {n}") for n, g in states.items())


def _all_ended(pids: list[int], within: float = 5.0) -> bool:
    """Every one gone or a zombie. A SIGKILLed child whose parent was killed too is reaped a moment
    later, by init: give the kernel that moment rather than read it mid-exit."""
    deadline = time.monotonic() + within
    while any(_state(pid) not in ("Z", "X", "gone") for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return "gone"


def test_capture_100_packets_of_an_iperf3_flow(lab: LabState, tmp_path: Path) -> None:
    server, client = lab_address(lab, "gpu2", "ens1"), lab_address(lab, "gpu1", "ens1")
    with server_process(LAB, "gpu2", "iperf3", "-s", "-B", server) as listener:
        until_listening(LAB, "gpu2", server, listener)
        with server_process(LAB, "gpu1", "iperf3", "-c", server, "-t", "600"):  # until killed
            done = gpunet("fleet", "capture", "gpu[1-2]", "--lab", LAB, "--plane", "compute", "--between",
                          "gpu1,gpu2", "--count", "100", "--duration", "20", "-o", str(tmp_path), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = json.loads(done.stdout)["outcomes"]
    assert {n: o["packets"] for n, o in outcomes.items()} == {"gpu1": {"ens1": 100}, "gpu2": {"ens1": 100}}
    for node in ("gpu1", "gpu2"):
        read = subprocess.run(["tcpdump", "-n", "-r", str(tmp_path / f"{node}.ens1.pcap")], capture_output=True,
                              text=True, check=True).stdout.splitlines()
        assert len(read) == 100 and all(server in line and client in line for line in read), read[:3]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu1.ens1.pcap", "gpu2.ens1.pcap"]


def test_the_rendered_ssh_config_reaches_every_server_through_a_lab_bastion(lab: LabState, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    assert gpunet("lab", "ssh-config", "--lab", LAB, "--bastion", "gpu8", "-o", str(config)).returncode == 0
    try:
        done = subprocess.run(["ssh", "-F", str(config), "gpu1", "hostname; echo $SSH_CONNECTION"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        hostname, connection = done.stdout.split("\n")[:2]
        assert hostname == "gpu1" and connection.split()[0] == lab.mgmt_addresses["gpu8"]  # came from the bastion
        vscode = _as_vscode(config, "gpu3")  # Remote-SSH's own command line, through the user's config
        assert vscode.returncode == 0 and vscode.stdout.split() == ["gpu3", "ok"], vscode.stderr
    finally:
        for host in ("gpu1", "gpu3", "gpu8"):  # the ControlPersist masters this test started
            subprocess.run(["ssh", "-F", str(config), "-O", "exit", host], capture_output=True, timeout=10,
                           check=False)
    for node in SERVERS:
        got = subprocess.run(["ssh", "-G", "-F", str(config), node], capture_output=True, text=True,
                             check=True).stdout.splitlines()
        assert f"hostname {lab.mgmt_addresses[node]}" in got and "serveraliveinterval 30" in got
        assert ("proxyjump gpu8" in got) == (node != "gpu8") and "user root" in got


def _as_vscode(config: Path, host: str) -> subprocess.CompletedProcess[str]:
    """How VS Code Remote-SSH connects: `ssh -T -D <port> <host> bash`, a script on stdin, with
    the user's ~/.ssh/config (here a file that includes the rendered one, as the README says)."""
    users = config.with_name("users_config")
    users.write_text(f"Match all\nInclude {config}\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return subprocess.run(["ssh", "-F", str(users), "-T", "-D", f"127.0.0.1:{port}", "-o", "ConnectTimeout=15", host,
                           "bash"], input="hostname; echo ok\n", capture_output=True, text=True, timeout=60,
                          check=False)


def test_nothing_of_the_runs_is_left_on_the_admin_side(lab: LabState) -> None:
    """No SSH master of this lab's left. A master answers `ssh -O exit` before it has exited: on a
    loaded host that moment can be long, so it is waited for (up to 60 s), not assumed to be under
    0.2 s. Another test process's runs to its own lab (a parallel worker) are not this one's."""
    deadline = time.monotonic() + 60
    while (left := _masters(lab)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, left


def _masters(lab: LabState) -> list[str]:
    """SSH masters (and their clients) of this lab: named under its directory, or connected to one
    of its servers (a master under /tmp/gpunet-cm-* names only a hash of where it goes)."""
    ours = set(lab.mgmt_addresses.values())
    sockets = subprocess.run(["ss", "-tnpH"], capture_output=True, text=True, check=True).stdout
    pids = {pid for line in sockets.splitlines() if len(fields := line.split()) > 4
            and fields[4].rsplit(":", 1)[0] in ours for pid in re.findall(r"pid=(\d+)", line)}
    shown = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in shown.splitlines()
            if f"labs/{LAB}/cm-" in line or ("gpunet-cm-" in line and line.split(None, 1)[0] in pids)]
