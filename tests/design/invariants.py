"""Plan invariants, checked straight from the plan's links and interfaces (not from design code)."""

from __future__ import annotations

from collections import Counter, defaultdict
from ipaddress import ip_interface, ip_network

from gpunet.model.plan import Plan


def assert_every_nic_cabled_once(plan: Plan) -> None:
    cabled = {(n.name, i.name) for n in plan.nodes for i in n.interfaces if i.cabled}
    ends = Counter((p.device, p.port) for c in plan.links for p in (c.a, c.b))
    node_ends = {k: v for k, v in ends.items() if k[0] in {n.name for n in plan.nodes}}
    assert set(node_ends) == cabled
    assert all(v == 1 for v in node_ends.values())


def assert_no_port_reused_and_radix_respected(plan: Plan) -> None:
    ends = Counter((p.device, p.port) for c in plan.links for p in (c.a, c.b))
    assert max(ends.values(), default=1) == 1
    radix = {s.name: s.radix for s in plan.switches}
    for device, port in ends:
        if device in radix:
            assert 1 <= int(port) <= radix[device], (device, port)


def assert_addresses_unique_and_inside(plan: Plan) -> None:
    planes = {p.name: p for p in plan.planes}
    seen: set[str] = set()
    for node in plan.nodes:
        for iface in node.interfaces:
            if iface.master is not None:
                assert iface.address is None
                continue
            addr = ip_interface(iface.address)
            net = ip_network(planes[iface.plane].subnet)
            assert addr.network == net
            assert addr.ip not in (net.network_address, net.broadcast_address)
            assert str(addr.ip) != planes[iface.plane].gateway
            assert str(addr.ip) not in seen
            seen.add(str(addr.ip))


def assert_oversubscription_within(plan: Plan, asked: dict[str, dict[str, float]]) -> None:
    """Per switch with uplinks: Gb/s toward the nodes <= asked ratio x Gb/s toward the core.
    Cables run from the lower end (a) to the upper end (b)."""
    tier = {s.name: (s.plane, s.tier) for s in plan.switches}
    down: dict[str, int] = defaultdict(int)
    up: dict[str, int] = defaultdict(int)
    for c in plan.links:
        if c.tier in ("leaf_spine", "spine_core"):
            up[c.a.device] += c.gbps
        if c.tier != "direct":
            down[c.b.device] += c.gbps
    for switch, up_gbps in up.items():
        plane, level = tier[switch]
        ratio = asked.get(plane, {}).get(level, 1.0)
        assert down[switch] <= ratio * up_gbps + 1e-6, (switch, down[switch], up_gbps)


def assert_ecmp_balanced(plan: Plan) -> None:
    """Each switch has the same number of links to every upper switch it reaches."""
    pairs: Counter[tuple[str, str]] = Counter()
    for c in plan.links:
        if c.tier in ("leaf_spine", "spine_core"):
            pairs[c.a.device, c.b.device] += 1
    per_lower: dict[str, set[int]] = defaultdict(set)
    for (lower, _), n in pairs.items():
        per_lower[lower].add(n)
    assert all(len(counts) == 1 for counts in per_lower.values()), per_lower


def assert_hcas_unique_per_node(plan: Plan) -> None:
    """One RDMA device per NIC: NCCL_IB_HCA, perftest -d and the exporter's labels name them."""
    for node in plan.nodes:
        hcas = [i.hca for i in node.interfaces if i.hca]
        assert len(hcas) == len(set(hcas)), (node.name, hcas)


def assert_plan_invariants(plan: Plan) -> None:
    assert_every_nic_cabled_once(plan)
    assert_hcas_unique_per_node(plan)
    assert_no_port_reused_and_radix_respected(plan)
    assert_addresses_unique_and_inside(plan)
    assert_ecmp_balanced(plan)
