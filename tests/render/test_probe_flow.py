"""The probe port is a flow of the Plan (issue 26): every rendered firewall admits `gpunet
localize`'s and doctor's UDP probes on a data plane from the plane's own nodes, and nothing else
(a dropped probe would be blamed on a cable). Judged from the Plan, by the firewall evaluator on the
real nft's reading of the rendered rules, and with real packets between two network namespaces this
test makes and removes (the node's side carries the plan's interface name and the rendered rules)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from gpunet.checks.filtering import Packet, evaluate
from gpunet.model.flows import PROBE_PORT
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.plan import Node, Plan
from gpunet.probe.rulesets import parse_nft_ruleset
from gpunet.render.firewall import render_firewalld_zones, render_nftables
from tests.render.rendered import example_plan

EXAMPLE = "small-ethernet"
NODE, PEER = "node01", "node02"
FOREIGN = "198.18.9.200"  # in no plane's subnet of the example: no node of the cluster


def storage(node: Node) -> tuple[str, str]:
    """The node's storage layer-3 device and address."""
    iface = next(i for i in node.interfaces if i.plane == "storage" and i.address)
    assert iface.address is not None
    return iface.layer3, iface.address.split("/")[0]


def node_of(plan: Plan, name: str) -> Node:
    found = plan.node(name)
    assert found is not None
    return found


def test_every_data_plane_has_a_probe_flow_between_its_own_nodes() -> None:
    plan = example_plan(EXAMPLE)
    probes = {f.plane: f for f in plan.flows if f.service == "gpunet-probe"}
    assert set(probes) == {"compute", "storage"}  # not management: localize probes the fabric
    for plane, flow in probes.items():
        on_plane = {n.name for n in plan.nodes if any(i.plane == plane and i.address for i in n.interfaces)}
        assert flow.protocol == "udp" and flow.ports == str(PROBE_PORT)
        assert set(parse_nodeset(flow.from_nodes)) == on_plane == set(parse_nodeset(flow.to_nodes))
        assert not flow.from_subnets and not flow.from_anywhere


def test_rendered_firewalld_admits_the_probe_port_on_the_storage_zone() -> None:
    plan = example_plan(EXAMPLE)
    zone = render_firewalld_zones(plan, node_of(plan, NODE))["etc/firewalld/zones/gpunet-storage.xml"]
    assert f'<port port="{PROBE_PORT}" protocol="udp"/>' in zone


def needs_root() -> None:
    if os.geteuid() != 0 or not all(shutil.which(tool) for tool in ("nft", "unshare", "ip")):
        pytest.skip("needs root, nft, unshare and ip")


@pytest.mark.lab
def test_the_real_nft_reads_the_rules_and_they_admit_a_node_not_a_stranger() -> None:
    needs_root()
    plan = example_plan(EXAMPLE)
    rules = render_nftables(plan, node_of(plan, NODE))
    loaded = subprocess.run(["unshare", "--net", "sh", "-c", 'printf "%s" "$1" | nft -c -f - && printf "%s" "$1" | '
                             'nft -f - && nft -j list ruleset', "sh", rules],
                            capture_output=True, text=True, timeout=60, check=False)
    assert loaded.returncode == 0, loaded.stderr
    ruleset = parse_nft_ruleset(loaded.stdout)
    device, address = storage(node_of(plan, NODE))
    _, peer = storage(node_of(plan, PEER))
    assert evaluate(Packet(device, peer, address, "udp", PROBE_PORT), [ruleset]).outcome == "accept"
    assert evaluate(Packet(device, FOREIGN, address, "udp", PROBE_PORT), [ruleset]).outcome == "block"


# Receives until its stdin closes (the sender has ended), then a second of quiet: a fixed idle
# timeout from "ready" ran out on a loaded host before the sender (a new interpreter) had started.
RECEIVER = """
import select, socket, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", flush=True)
seen, sender_done = set(), False
while True:
    ready = select.select([sock] + ([] if sender_done else [sys.stdin]), [], [], 1 if sender_done else 120)[0]
    if not ready:
        break
    if sock in ready:
        seen.add(sock.recvfrom(64)[1][0])
    elif not sys.stdin.readline():
        sender_done = True
print(" ".join(sorted(seen)), flush=True)
"""
SENDER = """
import socket, sys
for source in sys.argv[3:]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((source, 0))
    for _ in range(3):
        sock.sendto(b"probe", (sys.argv[1], int(sys.argv[2])))
"""


def ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, timeout=30)


@pytest.fixture
def two_namespaces() -> Iterator[tuple[str, str]]:
    """(node, outside): a veth between them, the node's end named as the plan's storage device."""
    needs_root()
    tag = uuid.uuid4().hex[:8]
    node, outside = f"gnprobe-n-{tag}", f"gnprobe-o-{tag}"
    ip("netns", "add", node)
    ip("netns", "add", outside)
    try:
        yield node, outside
    finally:
        for name in (node, outside):
            subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True, timeout=30)


@pytest.mark.lab
def test_real_probes_reach_the_node_from_a_cluster_node_and_not_from_elsewhere(
        two_namespaces: tuple[str, str]) -> None:
    node_ns, outside_ns = two_namespaces
    plan = example_plan(EXAMPLE)
    device, address = storage(node_of(plan, NODE))
    _, peer = storage(node_of(plan, PEER))
    ip("link", "add", device, "netns", node_ns, "type", "veth", "peer", "name", "gnpeer", "netns", outside_ns)
    ip("-n", node_ns, "addr", "add", f"{address}/16", "dev", device)
    ip("-n", node_ns, "link", "set", device, "up")
    for source in (peer, FOREIGN):
        ip("-n", outside_ns, "addr", "add", f"{source}/16", "dev", "gnpeer")
    ip("-n", outside_ns, "link", "set", "gnpeer", "up")
    loaded = subprocess.run(["ip", "netns", "exec", node_ns, "nft", "-f", "-"], input=render_nftables(
        plan, node_of(plan, NODE)), capture_output=True, text=True, timeout=60, check=False)
    assert loaded.returncode == 0, loaded.stderr
    receiver = subprocess.Popen(["ip", "netns", "exec", node_ns, sys.executable, "-c", RECEIVER, str(PROBE_PORT)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None and receiver.stdout.readline().strip() == "ready"
        subprocess.run(["ip", "netns", "exec", outside_ns, sys.executable, "-c", SENDER, address, str(PROBE_PORT),
                        peer, FOREIGN], check=True, timeout=60)
        out, _ = receiver.communicate(timeout=60)  # closes its stdin: the sender is done
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    assert out.split() == [peer]
