"""Driving a lab from tests: run in a server, start/stop processes we own, read counters."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpunet.api import plan_spec
from gpunet.lab.build import lab_down, lab_up, node_argv
from gpunet.lab.inside import tcp_listeners
from gpunet.lab.state import LabState, all_states, read_state
from gpunet.model.plan import Plan

SMALL = Path(__file__).parent.parent / "fixtures" / "lab" / "small.yaml"


def small_plan() -> Plan:
    return plan_spec(SMALL)


@contextmanager
def built_lab(lab_id: str, plan: Plan | None = None, max_nodes: int = 16, scale: float = 1.0) -> Iterator[LabState]:
    """A lab that is always taken down, whatever happens in the body (`scale`: Mbit/s per plan
    Gbit/s, as `lab up --scale`)."""
    try:
        yield lab_up(plan or small_plan(), lab_id, max_nodes=max_nodes, scale=scale)
    finally:
        lab_down(lab_id)


def run_in(lab_id: str, node: str, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(node_argv(lab_id, node, command), capture_output=True, text=True, timeout=timeout,
                          check=False)


@contextmanager
def server_process(lab_id: str, node: str, *command: str) -> Iterator[subprocess.Popen[str]]:
    """A process in a lab server, killed by its PID on exit."""
    proc = subprocess.Popen(node_argv(lab_id, node, command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


IPERF3_PORT = 5201


def until_listening(lab_id: str, node: str, address: str, server: subprocess.Popen[str], *, port: int = IPERF3_PORT,
                    within: float = 60) -> None:
    """Return once `server` listens on address:port in the lab server (a fixed sleep before its
    client connected was too short on a loaded host: the client was refused and sent nothing)."""
    state = read_state(lab_id)
    assert state is not None, f"no lab {lab_id}"
    namespace, deadline = state.servers[node], time.monotonic() + within
    while (address, port) not in tcp_listeners(namespace):
        assert server.poll() is None, f"the server in {node} exited: {server.communicate()[1][-500:]}"
        assert time.monotonic() < deadline, f"nothing listened on {address}:{port} in {node} within {within:g} s"
        time.sleep(0.05)


def lab_address(state: LabState, node: str, interface: str) -> str:
    return state.address_map[f"{node}/{interface}"].lab.split("/")[0]


def iperf3(lab_id: str, client: str, server: str, address: str, *extra: str, seconds: int = 3) -> dict:
    """One iperf3 run client -> server; the JSON report of the client."""
    with server_process(lab_id, server, "iperf3", "-s", "-1", "-B", address) as listener:
        until_listening(lab_id, server, address, listener)
        done = run_in(lab_id, client, "iperf3", "-c", address, "-t", str(seconds), "-J", *extra,
                      timeout=seconds + 30)
    assert done.returncode == 0, done.stdout[-500:] + done.stderr
    return json.loads(done.stdout)


def tx_bytes(namespace: str) -> dict[str, int]:
    out = subprocess.run(["ip", "-n", namespace, "-s", "-j", "link"], capture_output=True, text=True,
                         check=True).stdout
    return {link["ifname"]: link["stats64"]["tx"]["bytes"] for link in json.loads(out)}


def leftovers(lab_id: str) -> list[str]:
    """Everything a lab could leave behind, named; empty when teardown was complete."""
    prefix = f"gn{lab_id}-"
    found = [f"netns {n}" for n in _netns() if n.startswith(prefix)]
    links = subprocess.run(["ip", "-j", "link"], capture_output=True, text=True, check=True).stdout
    host_side = re.compile(rf"gn{lab_id}(h|o[0-9]+)")  # its veth to the management plane, to the switches'
    found += [f"link {link['ifname']}" for link in json.loads(links) if host_side.fullmatch(link["ifname"])]
    found += [f"/etc/netns/{p.name}" for p in Path("/etc/netns").glob(f"{prefix}*")]
    if read_state(lab_id) is not None:
        found.append("state file")
    mounts = Path("/proc/mounts").read_text()
    found += [f"mount {line.split()[1]}" for line in mounts.splitlines() if f"/labs/{lab_id}/" in line]
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    found += [f"nft {t}" for t in tables.splitlines() if "gn" in t]
    if not all_states() and "198.18.0.0/15" in lab_range_route():
        found.append("route unreachable 198.18.0.0/15 with no lab up")
    procs = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout
    found += [f"process {line.strip()}" for line in procs.splitlines() if f"/labs/{lab_id}/" in line]
    return found


def _netns() -> list[str]:
    out = subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [n["name"] for n in json.loads(out or "[]")]


def lab_range_route() -> str:
    return subprocess.run(["ip", "route", "show", "type", "unreachable"], capture_output=True, text=True,
                          check=True).stdout
