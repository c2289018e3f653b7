"""What a lab is made of, computed without root: names, addresses, cables, routes, slices."""

from __future__ import annotations

from collections import Counter
from ipaddress import ip_interface, ip_network

import pytest

from gpunet.design import design
from gpunet.lab.addressing import LAB_RANGE, LabError, lab_block
from gpunet.lab.blueprint import build_blueprint
from gpunet.lab.faults import parse_rate
from gpunet.lab.frr import frr_order
from gpunet.lab.slice import slice_plan
from gpunet.render.switch.frr import render_frr
from gpunet.render.sysctl import render_sysctl_net
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.lab.helpers import small_plan


def example_plan(name: str):  # type: ignore[no-untyped-def]
    return design(parse_spec(example_text(name))[0])


def test_every_lab_address_is_in_the_lab_block_and_keeps_its_host_index() -> None:
    plan = example_plan("scalable-unit")  # plan subnets are not all where the lab puts them
    bp = build_blueprint(plan, "t", slot=1)
    assert bp.block == lab_block(1) and bp.block.subnet_of(LAB_RANGE)
    for entry in bp.address_map.values():
        planned, lab = ip_interface(entry.plan), ip_interface(entry.lab)
        assert lab.ip in bp.block
        assert int(planned.ip) - int(planned.network.network_address) == \
            int(lab.ip) - int(lab.network.network_address)


def test_names_carry_the_lab_id_and_fit_linux_limits() -> None:
    bp = build_blueprint(small_plan(), "ab", slot=0)
    assert all(n.name.startswith("gnab-") for n in bp.namespaces)
    assert bp.host_if == "gnabh"
    assert all(len(name) <= 15 for v in bp.veths for name in (v.a_if, v.b_if))


def test_one_veth_per_cable_plus_the_host_link_with_scaled_rates() -> None:
    plan = small_plan()
    bp = build_blueprint(plan, "t", slot=0, scale=2.0)
    assert len(bp.veths) == len(plan.links) + 1
    rates = Counter((v.plane, v.mbit) for v in bp.veths)
    assert rates[("compute", 200.0)] == sum(c.plane == "compute" for c in plan.links)
    host = next(v for v in bp.veths if v.a_ns == "")
    assert host.mbit == 0 and host.b_if == "host"


def test_routed_switches_get_a_route_per_endpoint_with_ecmp_across_spines() -> None:
    bp = build_blueprint(small_plan(), "t", slot=0)
    leaf = next(n for n in bp.namespaces if n.device == "comp-leaf001")
    routes = [c for c in leaf.commands if c.startswith("route add")]
    # 4 local servers via their port, 4 remote ones over 4 uplinks (2 to each spine).
    assert sum(" dev swp" in r and "nexthop" not in r and "via" not in r for r in routes) == 4
    remote = [r for r in routes if "nexthop" in r]
    assert len(remote) == 4 and all(r.count("nexthop via") == 4 for r in remote)
    assert leaf.sysctls["net.ipv4.fib_multipath_hash_policy"] == "3"  # the 5-tuple, hashed by the switch


def test_each_switch_hashes_with_its_own_seed_and_interleaves_spines() -> None:
    """Every hop using one hash value polarizes ECMP: a spine only ever gets part of the range."""
    bp = build_blueprint(small_plan(), "t", slot=0)
    routers = [n for n in bp.namespaces if n.kind == "router"]
    seeds = [n.sysctls["net.ipv4.fib_multipath_hash_seed"] for n in routers]
    assert len(set(seeds)) == len(routers) and "0" not in seeds
    leaf = next(n for n in routers if n.device == "comp-leaf001")
    remote = next(c for c in leaf.commands if "nexthop" in c)
    ports = [int(word[3:]) for word in remote.split() if word.startswith("swp") and word[3:].isdigit()]
    spine_of = {v.a_if if v.a_ns == leaf.name else v.b_if: v.b_end.split(":")[0] if v.a_ns == leaf.name
                else v.a_end.split(":")[0] for v in bp.veths if leaf.name in (v.a_ns, v.b_ns)}
    order = [spine_of[f"swp{p}"] for p in ports]
    assert order[0] != order[1] and order[2] != order[3], order  # spine1, spine2, spine1, spine2


def test_frr_switches_run_the_frr_conf_rendered_from_the_lab_plan_and_no_static_host_routes() -> None:
    """The same renderer output a real switch gets, for the plan the lab runs: lab loopbacks and
    /31s, the Plan's ASNs; the leaves' server routes come from frr.conf, not from `ip route`."""
    plan = small_plan()
    bp = build_blueprint(plan, "t", slot=0, routing="frr")
    routed = {n.name for n in bp.namespaces if n.kind == "router"}
    assert set(bp.frr_confs) == routed and len(routed) == 4
    lab_leaf = bp.lab_plan.switches_by_name["comp-leaf001"]
    assert lab_leaf.asn == plan.switches_by_name["comp-leaf001"].asn
    assert lab_leaf.loopback is not None and ip_interface(lab_leaf.loopback).ip in bp.block
    assert all(ip_network(c.p2p).subnet_of(bp.block) for c in bp.lab_plan.links if c.p2p)  # type: ignore[arg-type]
    assert bp.frr_confs["gnt-comp-leaf001"] == render_frr(bp.lab_plan, lab_leaf)
    leaf = next(n for n in bp.namespaces if n.device == "comp-leaf001")
    assert not [c for c in leaf.commands if c.startswith("route add")]
    assert f"addr add {lab_leaf.loopback}/32 dev lo" in leaf.commands
    assert "link set dev swp5 mtu 9216 gso_max_segs 1 up" in leaf.commands


def test_routers_are_listed_in_the_order_frr_starts_them() -> None:
    """Spines before leaves (lab/frr.frr_order): start_frr takes the switches in this order."""
    bp = build_blueprint(small_plan(), "t", slot=0, routing="frr")
    in_order = [f"gnt-{s.name}" for s in frr_order(bp.lab_plan.switches) if f"gnt-{s.name}" in bp.frr_confs]
    assert list(bp.frr_confs) == in_order
    assert [name.split("-")[-1].rstrip("0123456789") for name in bp.frr_confs] == ["spine"] * 2 + ["leaf"] * 2


def test_static_routing_runs_no_frr() -> None:
    assert build_blueprint(small_plan(), "t", slot=0, routing="static").frr_confs == {}


def test_single_switch_planes_are_bridges_and_the_host_plugs_into_management() -> None:
    bp = build_blueprint(small_plan(), "t", slot=0)
    mgmt = next(n for n in bp.namespaces if n.device == "mgmt-leaf001")
    assert mgmt.kind == "bridge"
    assert "link set dev host mtu 9216 gso_max_segs 1 master br0 up" in mgmt.commands  # a switch port's MTU
    assert str(bp.host_address) == "198.18.0.1/24"  # the plan's gateway, never given to a node


def test_servers_sharing_a_subnet_on_several_nics_route_replies_per_nic() -> None:
    plan = slice_plan(example_plan("scalable-unit"), 4)
    bp = build_blueprint(plan, "t", slot=0)
    server = next(n for n in bp.namespaces if n.kind == "server" and n.device.startswith("gpu"))
    rules = [c for c in server.commands if c.startswith("rule add")]
    assert len(rules) == 8  # one table per rail: ib0..ib7 share the compute subnet
    assert server.sysctls["net.ipv4.conf.all.arp_ignore"] == "1"


def test_slice_keeps_every_tier_and_plane_of_a_three_tier_plan() -> None:
    plan = example_plan("multi-unit-large")
    small = slice_plan(plan, 16)
    assert len(small.nodes) == 16
    tiers = {(s.plane, s.tier) for s in small.switches}
    assert {("compute", "leaf"), ("compute", "spine"), ("compute", "core"), ("management", "leaf")} <= tiers
    pods = {s.pod for s in small.switches if s.plane == "compute" and s.tier == "leaf"}
    assert len(pods) == 2  # intra-pod and inter-pod paths both present
    names = {n.name for n in small.nodes} | {s.name for s in small.switches}
    assert all(c.a.device in names and c.b.device in names for c in small.links)
    assert {p.name for p in small.planes} == {p.name for p in plan.planes}


def test_small_plans_are_not_sliced() -> None:
    plan = small_plan()
    assert slice_plan(plan, 16) is plan


def test_rates_are_read_like_tc() -> None:
    assert parse_rate("100mbit") == 100.0 and parse_rate("1gbit") == 1000.0 and parse_rate("500kbit") == 0.5
    with pytest.raises(LabError, match="100mbit"):
        parse_rate("fast")


def test_only_sixteen_labs_fit_side_by_side() -> None:
    assert ip_network(lab_block(15)).broadcast_address == LAB_RANGE.broadcast_address
    assert len({lab_block(slot) for slot in range(16)}) == 16
    with pytest.raises(LabError, match="at most 16 labs"):
        lab_block(16)


def test_shaped_rates_keep_each_tiers_oversubscription() -> None:
    """Every cable is shaped at the same Mbit/s per plan Gbit/s, so a full leaf's node-side rate
    over its uplink rate is the plan's oversubscription (2:1 storage leaves here)."""
    plan = example_plan("small-ethernet")
    bp = build_blueprint(plan, "t", slot=0, scale=0.5)
    leaf = "gnt-stor-leaf001"
    down = sum(v.mbit for v in bp.veths if v.b_ns == leaf)
    up = sum(v.mbit for v in bp.veths if v.a_ns == leaf)
    (storage,) = [c for c in plan.capacity if c.plane == "storage"]
    assert down / up == pytest.approx(storage.oversubscription["leaf"])
    assert storage.oversubscription["leaf"] <= 2.0


def test_a_slice_too_big_to_keep_host_indexes_is_renumbered_densely() -> None:
    plan = slice_plan(example_plan("multi-unit-large"), 16)
    wide = plan.model_copy(update={"planes": tuple(
        p.model_copy(update={"subnet": "10.0.0.0/8"}) if p.name == "compute" else p for p in plan.planes)})
    # host indexes up to ~10.7.15.1: far beyond what one lab block holds
    nodes = tuple(n.model_copy(update={"interfaces": tuple(
        i.model_copy(update={"address": f"10.{j}.{k}.1/8"}) if i.plane == "compute" else i
        for j, i in enumerate(n.interfaces))}) for k, n in enumerate(wide.nodes))
    bp = build_blueprint(wide.model_copy(update={"nodes": nodes}), "t", slot=0)
    assert any("renumbered" in note for note in bp.notes)
    labs = [ip_interface(a.lab) for a in bp.address_map.values()]
    assert all(a.ip in bp.block for a in labs) and len({a.ip for a in labs}) == len(labs)


def test_servers_hold_the_tcp_buffers_render_writes() -> None:
    """A lab server is configured as a deployed node: the per-namespace TCP buffer keys of
    90-gpunet-net.conf, so doctor's GN-TCP-02 holds the lab to the plan like a real node."""
    plan = example_plan("scalable-unit")
    bp = build_blueprint(plan, "t", slot=1)
    for ns in (n for n in bp.namespaces if n.kind == "server"):
        rendered = render_sysctl_net(plan, plan.node(ns.device))
        for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            assert f"{key} = {ns.sysctls[key]}\n" in rendered
