"""Switch management ports in a lab's blueprint, computed without root (lab/management.py): every
switch with a planned management address gets an eth0 on that address's plane, in lab numbering,
cabled to the plane's first switch; the host joins that plane where it is not on it already."""

from __future__ import annotations

from ipaddress import IPv4Network, ip_interface

import pytest

from gpunet.design import design
from gpunet.lab.blueprint import Blueprint, build_blueprint
from gpunet.lab.lldpd import config
from gpunet.lab.management import MANAGEMENT_PORTS, MGMT_IF
from gpunet.lab.slice import slice_plan
from gpunet.model.plan import Plan
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec


def _lab(name: str, nodes: int = 16) -> tuple[Plan, Blueprint]:
    plan = slice_plan(design(parse_spec(example_text(name))[0]), nodes)
    return plan, build_blueprint(plan, "t", slot=2)


def _plane_of(bp: Blueprint, address: str) -> str:
    return next(p.name for p in bp.lab_plan.planes if ip_interface(address).ip in IPv4Network(p.subnet))


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_managed_switch_has_a_distinct_lab_address_on_its_planned_plane(name: str) -> None:
    plan, bp = _lab(name)
    managed = {s.name: s.management for s in plan.switches if s.management}
    assert set(bp.switch_mgmt) == set(managed)
    lab_switches = {s.name: s for s in bp.lab_plan.switches}
    servers = {ip_interface(i.address).ip for n in bp.lab_plan.nodes for i in n.interfaces if i.address}
    hosts = {bp.host_address.ip, *(a.ip for a in bp.host_link_addresses.values())}
    assert len(set(bp.switch_mgmt.values())) == len(bp.switch_mgmt)
    for switch, address in bp.switch_mgmt.items():
        lab_address = lab_switches[switch].management
        assert lab_address is not None and lab_address.split("/")[0] == address
        assert ip_interface(address).ip in bp.block and ip_interface(address).ip not in servers | hosts
        assert _plane_of(bp, lab_address) == next(p.name for p in plan.planes
                                                  if ip_interface(managed[switch]).ip in IPv4Network(p.subnet))


def test_the_oob_plane_gets_every_switchs_eth0_and_a_host_port() -> None:
    plan, bp = _lab("scalable-unit")
    oob_leaf = "bmc-leaf001"
    assert {v.a_end.split(":")[0] for v in bp.mgmt_ports} == {s.name for s in plan.switches} - {oob_leaf}
    assert all(v.a_if == MGMT_IF and v.b_ns == f"gnt-{oob_leaf}" and v.plane == "oob" for v in bp.mgmt_ports)
    assert len({v.b_if for v in bp.mgmt_ports}) == len(bp.mgmt_ports) and all(len(v.b_if) <= 15 for v in bp.mgmt_ports)
    [host] = bp.host_links
    assert host.a_ns == "" and host.a_if == "gnto0" and host.b_ns == f"gnt-{oob_leaf}"
    assert bp.host_link_addresses["gnto0"].network == IPv4Network(next(p.subnet for p in bp.lab_plan.planes
                                                                          if p.name == "oob"))
    bridge = next(n for n in bp.namespaces if n.device == oob_leaf)
    assert f"addr add {bp.switch_mgmt[oob_leaf]}/" in " ".join(bridge.commands)  # its own, on its bridge
    assert all(f"link set dev {v.b_if} mtu" in " ".join(bridge.commands) for v in bp.mgmt_ports)


def test_on_a_routed_management_plane_the_first_leaf_routes_to_each_switch_and_the_host_needs_no_port() -> None:
    _, bp = _lab("multi-unit-large")
    assert not bp.host_links  # the switches' management is the servers' management plane
    leaf = next(n for n in bp.namespaces if n.name == next(v.b_ns for v in bp.mgmt_ports))
    assert leaf.kind == "router"
    for port in bp.mgmt_ports:
        address = bp.switch_mgmt[port.a_end.split(":")[0]]
        route = f"route add {address}/32 dev {port.b_if}"
        assert route in leaf.commands
        # the port is up before the route that names it
        assert leaf.commands.index(f"link set dev {port.b_if} mtu 9216 up") < leaf.commands.index(route)


def test_a_management_address_in_no_plane_gets_no_port_and_a_note() -> None:
    plan = slice_plan(design(parse_spec(example_text("small-ethernet"))[0]), 8)
    odd = plan.switches[0].model_copy(update={"management": "192.0.2.10/24"})
    plan = plan.model_copy(update={"switches": (odd, *plan.switches[1:])})
    bp = build_blueprint(plan, "t", slot=0)
    assert odd.name not in bp.switch_mgmt
    assert next(s for s in bp.lab_plan.switches if s.name == odd.name).management is None
    assert any(n.startswith(f"{odd.name}: its management address 192.0.2.10/24 is in no plane") for n in bp.notes)


def test_lldpd_in_a_switch_skips_its_management_ports_only() -> None:
    text = config("comp-leaf001", MANAGEMENT_PORTS)
    assert "configure system interface pattern *,!eth0,!mgmt*\n" in text
    assert "interface pattern" not in config("gpu001")  # a server's eth0 may be a planned cable
