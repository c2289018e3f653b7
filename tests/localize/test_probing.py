"""Probe planning and hop mapping without a lab: pairs cross leaves, flows are distinct 5-tuples,
and a traced path becomes the Plan's cables only when it follows them."""

from __future__ import annotations

import io
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from ipaddress import IPv4Network

import pytest

from gpunet.fabric.cabling import cable_name
from gpunet.fabric.observed import End
from gpunet.localize.probing import (
    AGENT,
    Endpoint,
    HopMap,
    ProbeFlow,
    endpoints,
    flows_per_pair,
    make_flows,
    pairs,
    shipped_agent,
    until_ready,
)
from gpunet.model.hops import switch_hop_addresses
from gpunet.model.plan import Link, Plan, Port
from tests.render.rendered import example_plan


@pytest.fixture(scope="module")
def plan() -> Plan:
    return example_plan("scalable-unit")


def port_addresses(plan: Plan) -> dict[str, End]:
    """An address for every switch port on a switch-to-switch cable, as a routed fabric has."""
    ports = {}
    for n, link in enumerate(link for link in plan.links if link.tier == "leaf_spine"):
        ports[f"10.200.{n // 100}.{2 * (n % 100)}"] = End(link.a.device, link.a.port)
        ports[f"10.200.{n // 100}.{2 * (n % 100) + 1}"] = End(link.b.device, link.b.port)
    return ports


def test_every_endpoint_sends_across_leaves_and_every_leaf_receives(plan: Plan) -> None:
    found = endpoints(plan, "compute")
    assert len(found) == 32 * 8
    chosen = pairs(found)
    assert len(chosen) == len(found)
    assert all(src.leaf != dst.leaf for src, dst in chosen)
    assert set(Counter(dst.leaf for _, dst in chosen)) == {e.leaf for e in found}


def test_pairing_a_million_gpu_sized_plane_is_linear() -> None:
    """125,000 nodes' 8 rails over their leaves: each endpoint picks its peer's leaf by position,
    never by listing every other leaf (that was 10^10 steps at 1M GPUs); every pair crosses
    leaves and never joins a node to itself, and the leaves are taken in turn."""
    link = Link(plane="compute", tier="node_leaf", a=Port(device="n", port="ib0"), b=Port(device="l", port="1"),
                gbps=400)
    found = [Endpoint(f"gpu{n:06d}", f"ib{r}", "10.0.0.1", f"comp-leaf{(n // 84) * 8 + r:05d}", link)
             for n in range(20_000) for r in range(8)]
    started = time.process_time()
    chosen = pairs(found)
    assert time.process_time() - started < 5
    assert len(chosen) == len(found)
    assert all(src.leaf != dst.leaf and src.node != dst.node for src, dst in chosen)
    leaves = sorted({e.leaf for e in found})
    others = [leaf for leaf in leaves if leaf != found[5].leaf]
    assert chosen[5][1].leaf == others[5 % len(others)]


def test_flows_are_distinct_five_tuples(plan: Plan) -> None:
    flows = make_flows(pairs(endpoints(plan, "compute")), per_pair=12)
    assert len({(f.src.address, f.sport) for f in flows}) == len(flows) == 256 * 12
    assert len({f.flow for f in flows}) == len(flows)


def path_of(plan: Plan, hop_map: HopMap) -> tuple[ProbeFlow, list[str], list[str]]:
    """A flow from a rail-0 NIC to a rail-1 NIC, its hops as addresses, and the cables expected."""
    src = next(e for e in endpoints(plan, "compute") if e.interface == "ib0")
    dst = next(e for e in endpoints(plan, "compute") if e.interface == "ib1" and e.node != src.node)
    up = next(link for link in plan.links if link.tier == "leaf_spine" and link.a.device == src.leaf)
    down = next(link for link in plan.links if link.tier == "leaf_spine" and link.a.device == dst.leaf
                and link.b.device == up.b.device)
    address = {end: a for a, end in hop_map.ports.items()}
    hops = ["10.99.0.1", address[End(up.b.device, up.b.port)], address[End(down.a.device, down.a.port)]]
    return ProbeFlow(0, src, dst, 40000), hops, [cable_name(c) for c in (src.cable, up, down, dst.cable)]


def test_a_traced_path_becomes_the_plans_cables(plan: Plan) -> None:
    src_leaf = endpoints(plan, "compute")[0].leaf
    hop_map = HopMap(plan, port_addresses(plan), {"10.99.0.1": src_leaf})
    flow, hops, cables = path_of(plan, hop_map)
    assert hop_map.path(flow, hops) == tuple(cables)
    assert hop_map.path(flow, [*hops, "", ""]) == tuple(cables)  # nothing answered past the last switch


@pytest.mark.parametrize("broken", ["gap", "unknown", "skipped", "first"])
def test_a_path_that_does_not_follow_the_plan_is_left_out(plan: Plan, broken: str) -> None:
    src_leaf = endpoints(plan, "compute")[0].leaf
    hop_map = HopMap(plan, port_addresses(plan), {"10.99.0.1": src_leaf})
    flow, hops, _ = path_of(plan, hop_map)
    changed = {"gap": [hops[0], "", hops[2]], "unknown": [hops[0], "192.0.2.1", hops[2]],
               "skipped": [hops[0], hops[2]], "first": ["10.99.9.9", *hops[1:]]}[broken]
    assert hop_map.path(flow, changed) is None


def test_a_plane_with_few_endpoints_gets_more_source_ports_per_pair(plan: Plan) -> None:
    """Every uplink should expect several probes: 256 compute endpoints need the default 12 ports a
    pair; the same uplinks with only 8 pairs need more (up to 64)."""
    assert flows_per_pair(plan, "compute", 256, 12) == 12
    uplinks = sum(1 for link in plan.links if link.plane == "compute" and link.tier != "node_leaf")
    assert flows_per_pair(plan, "compute", 8, 12) == min(64, -(-8 * uplinks // 16))
    assert flows_per_pair(plan, "compute", 0, 12) == 12


def test_the_plans_switch_addresses_name_each_cable_end_and_each_switch(plan: Plan) -> None:
    """How `localize --probe` names a real fabric's hops: from the Plan alone."""
    ports, devices = switch_hop_addresses(plan)
    numbered = [c for c in plan.links if c.p2p]
    assert numbered and len(ports) == 2 * len(numbered)
    for cable in numbered:
        low = IPv4Network(cable.p2p or "").network_address
        assert ports[str(low)] == (cable.a.device, cable.a.port)
        assert ports[str(low + 1)] == (cable.b.device, cable.b.port)
    for switch in plan.switches:
        for address in (switch.loopback, switch.management):
            if address:
                assert devices[address.split("/")[0]] == switch.name


def test_the_agent_goes_to_the_node_as_its_own_file_and_runs_under_a_plain_python3() -> None:
    sent: list[tuple[str, list[str]]] = []

    def ssh(node: str, argv: Sequence[str]) -> list[str]:
        sent.append((node, list(argv)))
        return list(argv)

    on_node = shipped_agent(ssh)
    assert on_node("gpu1", ["hostname"]) == ["hostname"]  # anything else goes as it is
    argv = on_node("gpu1", [*AGENT, "trace"])
    assert argv[:3] == ["python3", "-I", "-c"] and argv[4:] == ["trace"]
    done = subprocess.run(argv, input='{"flows": [], "max_hops": 2}', capture_output=True, text=True, timeout=60,
                          check=False)
    assert (done.returncode, done.stdout) == (0, "{}"), done.stderr  # no gpunet needed: -I, the file alone


def test_a_receiver_is_ready_after_a_nodes_own_noise_and_not_without_its_word() -> None:
    assert until_ready(io.StringIO("pyenv: cannot rehash: /root/.pyenv/shims isn't writable\nready\n")) is None
    assert until_ready(io.StringIO("Traceback (most recent call last):\nOSError: [Errno 98]\n")) == (
        "Traceback (most recent call last):\nOSError: [Errno 98]\n")
    assert until_ready(io.StringIO("noise\n" * 60 + "ready\n")) is not None  # bounded: not read for ever
