"""Plan invariants, checked straight from the plan's links and interfaces (not from design code)."""

from __future__ import annotations

from collections import Counter, defaultdict
from ipaddress import IPv4Network, ip_address, ip_interface, ip_network

from gpunet.model.plan import Plan, Switch


def assert_every_nic_cabled_once(plan: Plan) -> None:
    cabled = {(n.name, i.name) for n in plan.nodes for i in n.interfaces if i.cabled}
    ends = Counter((p.device, p.port) for c in plan.links for p in (c.a, c.b))
    nodes = {n.name for n in plan.nodes}  # once: built per cable end it made 1 026 nodes quadratic
    node_ends = {k: v for k, v in ends.items() if k[0] in nodes}
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


def _asn_group(switch: Switch) -> tuple[str, int | None]:
    return switch.tier, switch.pod if switch.tier == "spine" else None


def assert_switch_numbering(plan: Plan) -> None:
    """Routed planes (RFC 7938): every switch has a loopback inside the plane's pool and an ASN in its
    range; spines share one ASN per pod, cores one, every leaf its own, and no two tiers share one;
    every switch-to-switch cable a /31 of the pool, its own. Every switch's management address is
    its own, never a node's, and not a plane's gateway."""
    routing = {p.name: p.routing for p in plan.planes if p.routing is not None}
    for plane, r in routing.items():
        switches = [s for s in plan.switches if s.plane == plane]
        assert all(s.loopback and ip_address(s.loopback) in ip_network(r.loopbacks) for s in switches)
        assert all(s.asn is not None and r.asn_first <= s.asn <= r.asn_last for s in switches)
        by_asn: dict[int | None, list[Switch]] = defaultdict(list)
        for s in switches:
            by_asn[s.asn].append(s)
        for s in switches:
            shared = by_asn[s.asn]
            if s.tier == "leaf":
                assert shared == [s], (s.name, [t.name for t in shared])
            else:
                assert {_asn_group(t) for t in shared} == {_asn_group(s)}, s.name
        cables = [c for c in plan.links if c.plane == plane and c.tier in ("leaf_spine", "spine_core")]
        p2p = [IPv4Network(c.p2p) for c in cables if c.p2p]
        assert len(p2p) == len(cables) and len(set(p2p)) == len(p2p)
        assert all(n.prefixlen == 31 and n.subnet_of(IPv4Network(r.p2p)) for n in p2p)
    assert all(s.asn is None and s.loopback is None for s in plan.switches if s.plane not in routing)
    assert all(c.p2p is None for c in plan.links if c.plane not in routing or c.tier in ("node_leaf", "direct"))
    nodes = {ip_interface(i.address).ip for n in plan.nodes for i in n.interfaces if i.address}
    gateways = {ip_address(p.gateway) for p in plan.planes if p.gateway}
    management = [ip_interface(s.management).ip for s in plan.switches if s.management]
    assert len(set(management)) == len(management) and not (set(management) & (nodes | gateways))


def assert_plan_invariants(plan: Plan) -> None:
    assert_every_nic_cabled_once(plan)
    assert_hcas_unique_per_node(plan)
    assert_no_port_reused_and_radix_respected(plan)
    assert_addresses_unique_and_inside(plan)
    assert_ecmp_balanced(plan)
    assert_switch_numbering(plan)
