"""Every example built as a lab, the rendered nftables loaded into every server: every flow of the
Plan that a node accepts connects (a real listener, a real connect from an address the flow names),
and a sample of flows that are not in the Plan is dropped (the listener is there: a timeout is the
firewall). Flows to hosts outside the plan (NTP, DNS servers) have no lab end and are not tried.
firewalld's zones need the daemon (D-Bus) to act, which a namespace lab does not run: they are
checked by firewall-offline-cmd in test_validators, not here."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network, ip_address

import pytest

from gpunet.lab.build import LAB_PLAN, node_argv_for
from gpunet.lab.state import LabState, lab_dir
from gpunet.model.flows import Flow, sample_ports
from gpunet.model.io import read_plan
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.plan import Plan
from gpunet.render.firewall import render_nftables
from gpunet.spec.examples import EXAMPLES
from tests.lab.helpers import built_lab
from tests.labs import lab_id as new_lab_id
from tests.render.rendered import example_plan

pytestmark = [pytest.mark.lab, pytest.mark.slow]
CLOSED_PORT = 1234  # no flow of any example names it
# Every socket bound and listening before "ready" (bound in its thread, a port could still be
# closed when a loaded host's client tried it); each thread then serves its own.
LISTENER = """
import socket, sys, threading
def bound(proto, port):
    kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    s = socket.socket(socket.AF_INET, kind)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        return None  # sshd holds 22 on the management address: it answers for us
    if proto == "tcp":
        s.listen(64)
    return s
def serve(proto, s):
    if proto == "tcp":
        while True:
            s.accept()[0].close()
    while True:
        data, peer = s.recvfrom(64)
        s.sendto(data, peer)
for item in sys.argv[1:]:
    proto, port = item.split("/")
    s = bound(proto, int(port))
    if s is not None:
        threading.Thread(target=serve, args=(proto, s), daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""
CLIENT = """
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
from tests.labs import lab_id as new_lab_id
def attempt(case):
    proto, source, target, port = case
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
    s.settimeout(10)  # "dropped" only after it: an answer from a loaded host comes late, not never
    s.bind((source, 0))
    try:
        if proto == "tcp":
            s.connect((target, port))
        else:
            s.sendto(b"x", (target, port))
            s.recvfrom(8)
        return "open"
    except socket.timeout:
        return "dropped"
    except OSError as exc:
        return f"error {exc.errno}"
    finally:
        s.close()
cases = json.loads(sys.argv[1])
with ThreadPoolExecutor(64) as pool:
    print(json.dumps(list(pool.map(attempt, cases))))
"""


@dataclass(frozen=True)
class Probe:
    source: str  # a server, or "" for the host
    source_ip: str
    target: str
    target_ip: str
    protocol: str
    port: int
    why: str


def address(plan: Plan, node: str, plane: str) -> str | None:
    found = plan.node(node)
    hit = next((i.address for i in found.interfaces if i.plane == plane and i.address), None) if found else None
    return str(IPv4Interface(hit).ip) if hit else None


def flow_probes(plan: Plan, host_ip: str) -> list[Probe]:
    """For each flow a node accepts: its first and last receiver, from a sender the flow names, at
    each end of its port range."""
    probes = []
    for position, flow in enumerate(plan.flows):
        receivers = list(parse_nodeset(flow.to_nodes)) if flow.to_nodes else []
        sender = _sender(plan, flow, plan.flow_sources[position], host_ip)
        for target in dict.fromkeys(receivers[:1] + receivers[-1:]):
            target_ip = address(plan, target, flow.plane)
            if sender is None or target_ip is None or sender[0] == target:
                continue
            protocol = "tcp" if flow.protocol == "any" else flow.protocol
            probes += [Probe(*sender, target, target_ip, protocol, port, flow.service) for port in sample_ports(flow)]
    return probes


def _sender(plan: Plan, flow: Flow, sources: tuple[str, ...], host_ip: str) -> tuple[str, str] | None:
    """A server (or the host) with an address inside the flow's sources on its plane."""
    networks = [IPv4Network(s) for s in sources]
    candidates = [(n.name, address(plan, n.name, flow.plane)) for n in plan.nodes]
    if flow.plane == "management":
        candidates.insert(0, ("", host_ip))
    return next(((name, ip) for name, ip in candidates if ip and any(ip_address(ip) in net for net in networks)),
                None)


def dropped_probes(plan: Plan, host_ip: str) -> list[Probe]:
    """Traffic no flow admits: a closed port from the host (admin and monitoring box) to the first
    node and between two nodes of each plane, and each restricted TCP flow's port from a node
    outside its sources."""
    first = plan.nodes[0].name
    first_ip = address(plan, first, "management")
    probes = [Probe("", host_ip, first, first_ip, "tcp", CLOSED_PORT, "no flow from the host")
              ] if first_ip and not admitted(plan, host_ip, first, "management", CLOSED_PORT) else []
    for plane in (p.name for p in plan.planes if p.name != "oob"):
        on = [n.name for n in plan.nodes if address(plan, n.name, plane)]
        if len(on) >= 2 and not admitted(plan, address(plan, on[0], plane) or "", on[-1], plane, CLOSED_PORT):
            probes.append(Probe(on[0], address(plan, on[0], plane) or "", on[-1], address(plan, on[-1], plane) or "",
                                "tcp", CLOSED_PORT, f"no flow on {plane}"))
    for position, flow in enumerate(plan.flows):
        if flow.protocol != "tcp" or flow.from_anywhere or not flow.to_nodes:
            continue
        networks = [IPv4Network(s) for s in plan.flow_sources[position]]
        target = next(iter(parse_nodeset(flow.to_nodes)))
        outsider = next((n.name for n in plan.nodes if n.name != target and (ip := address(plan, n.name, flow.plane))
                         and not any(ip_address(ip) in net for net in networks)), None)
        if outsider:
            probes.append(Probe(outsider, address(plan, outsider, flow.plane) or "", target,
                                address(plan, target, flow.plane) or "", "tcp", sample_ports(flow)[0],
                                f"{flow.service} from outside its sources"))
    return probes


def admitted(plan: Plan, source_ip: str, target: str, plane: str, port: int) -> bool:
    """Whether some flow lets tcp `port` from `source_ip` into `target` on `plane`."""
    for position, flow in enumerate(plan.flows):
        span = flow.port_range
        if (flow.plane == plane and flow.protocol in ("tcp", "any") and target in plan.inbound_flows
                and flow in plan.inbound_flows[target] and (span is None or span.low <= port <= span.high)
                and any(ip_address(source_ip) in IPv4Network(s) for s in plan.flow_sources[position])):
            return True
    return False


@contextmanager
def listening(lab_id: str, state: LabState, ports: dict[str, set[str]]) -> Iterator[None]:
    started = []
    try:
        for node, wanted in ports.items():
            argv = node_argv_for(lab_id, state.servers[node], [sys.executable, "-c", LISTENER, *sorted(wanted)])
            process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            started.append(process)
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield
    finally:
        for process in started:  # ours, by PID
            process.kill()
            process.wait()


def attempt(lab_id: str, state: LabState, probes: list[Probe]) -> dict[Probe, str]:
    """Each probe's outcome; the sources side by side (a dropped probe waits out its timeout)."""
    def from_source(source: str) -> dict[Probe, str]:
        mine = [p for p in probes if p.source == source]
        cases = json.dumps([[p.protocol, p.source_ip, p.target_ip, p.port] for p in mine])
        argv = [sys.executable, "-c", CLIENT, cases]
        if source:
            argv = node_argv_for(lab_id, state.servers[source], argv)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
        return dict(zip(mine, json.loads(done.stdout), strict=True))

    with ThreadPoolExecutor(max_workers=8) as pool:
        return {probe: outcome for found in pool.map(from_source, sorted({p.source for p in probes}))
                for probe, outcome in found.items()}


def load_firewalls(lab_id: str, state: LabState, plan: Plan) -> None:
    for node, namespace in state.servers.items():
        found = plan.node(node)
        assert found is not None
        loaded = subprocess.run(["ip", "netns", "exec", namespace, "nft", "-f", "-"],
                                input=render_nftables(plan, found), capture_output=True, text=True, check=False)
        assert loaded.returncode == 0, (node, loaded.stderr)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_every_flow_connects_and_nothing_else_does(example: str) -> None:
    lab_id = new_lab_id("zf")
    with built_lab(lab_id, example_plan(example), max_nodes=16) as state:
        plan = read_plan(lab_dir(lab_id) / LAB_PLAN)
        host_ip = str(IPv4Interface(state.host_address).ip)
        expected_open, expected_dropped = flow_probes(plan, host_ip), dropped_probes(plan, host_ip)
        ports: dict[str, set[str]] = {}
        for probe in expected_open + expected_dropped:
            ports.setdefault(probe.target, set()).add(f"{probe.protocol}/{probe.port}")
        load_firewalls(lab_id, state, plan)
        with listening(lab_id, state, ports):
            results = attempt(lab_id, state, expected_open + expected_dropped)
    blocked = [(p.why, p.source or "host", p.target, p.protocol, p.port, results[p]) for p in expected_open
               if results[p] != "open"]
    leaked = [(p.why, p.source or "host", p.target, p.port, results[p]) for p in expected_dropped
              if results[p] != "dropped"]
    services = {p.why for p in expected_open}
    print(f"{example}: {len(expected_open)} flow probes over {len(services)} services open, "
          f"{len(expected_dropped)} probes outside the flows dropped")
    assert not blocked and not leaked, (blocked, leaked)
    assert services >= {"ssh"} | ({"slurmctld", "srun", "job-bootstrap"} if example in (
        "scalable-unit", "small-ethernet", "multi-unit-large") else set())
