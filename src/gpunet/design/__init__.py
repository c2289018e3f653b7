"""design(spec) -> Plan: pure, deterministic, stable under growth (see DESIGN.md)."""

from __future__ import annotations

from pydantic import ValidationError

from gpunet import __version__
from gpunet.design.addressing import (
    assign_addresses,
    plane_interfaces,
    previous_addresses,
    rdma_nic_count,
    with_address,
)
from gpunet.design.bom import bill_of_materials
from gpunet.design.capacity import plane_capacity
from gpunet.design.fabric import (
    Attachment,
    PlaneFabric,
    build_plane_fabric,
    fresh_basis,
    kept_basis,
    resolve_style,
)
from gpunet.design.flows import derive_flows
from gpunet.design.media import nic_model
from gpunet.design.routing import plane_routing, route_plane
from gpunet.design.stability import check_stable
from gpunet.design.switches import pool_problems, reserved_for_switches, with_management
from gpunet.errors import DesignError, SpecProblem
from gpunet.model.base import bulk_objects
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.plan import (
    Cabling,
    FabricBasis,
    Interface,
    Link,
    NicCard,
    Node,
    Plan,
    Plane,
    PlaneCapacity,
    Switch,
)
from gpunet.model.qos import RoceQos
from gpunet.model.spec import NicSpec, NodeGroup, PlaneName, PlaneSpec, Spec, plane_mtu
from gpunet.model.units import speed_gbps

__all__ = ["design"]

Members = list[tuple[NodeGroup, str]]  # (group, node) in spec order


def design(spec: Spec, previous: Plan | None = None) -> Plan:
    """The Plan for a valid spec. With `previous`, every node that was in it keeps its
    addresses, slots and cables (as long as each plane's planned size still holds it)."""
    with bulk_objects():
        try:
            return _design(spec, previous)
        except ValidationError as exc:  # the plan's own consistency check: a spec check is missing
            raise DesignError([SpecProblem(f"the plan of this spec is inconsistent: {_first(exc)}", (),
                                           "the spec passed its checks; please report this with the spec")]) from None


def _first(exc: ValidationError) -> str:
    return str(exc.errors()[0]["msg"]).removeprefix("Value error, ")


def _design(spec: Spec, previous: Plan | None) -> Plan:
    members: Members = [(g, n) for g in spec.groups for n in parse_nodeset(g.nodes)]
    rails = {name: _rails_likely(spec, name, members, previous) for name in spec.planes}
    interfaces = _interfaces(spec, members, rails, previous)
    attached = {name: _attached(name, members, interfaces) for name in spec.planes}
    bases = {name: _basis(spec, name, attached[name], members, previous) for name in spec.planes}
    fabrics = {name: _fabric(spec, name, bases[name], attached[name], previous) for name in spec.planes}
    nodes = tuple(
        Node(name=n, group=g.name, role=g.role, gpus=g.gpus, gpu_model=g.gpu_model,
             interfaces=tuple(interfaces[n]),
             slots={p: f.slots[n] for p, f in fabrics.items() if n in f.slots})
        for g, n in members
    )
    planes = tuple(_plane(spec, name, fabrics[name], bases[name]) for name in spec.planes)
    switches, links = _routed(spec, planes, fabrics, previous)
    switches = with_management(spec, switches, interfaces, previous)
    plan = Plan(
        gpunet_version=__version__, site=spec.site, nodes=nodes, flows=tuple(derive_flows(spec, nodes)),
        planes=planes, switches=tuple(switches), links=tuple(links),
        capacity=tuple(_capacity(spec, name, fabrics[name]) for name in spec.planes),
        bom=tuple(bill_of_materials(planes, nodes, switches, links)),
    )
    if previous is not None:
        check_stable(previous, plan)
    return plan


def _routed(spec: Spec, planes: tuple[Plane, ...], fabrics: dict[PlaneName, PlaneFabric],
            previous: Plan | None) -> tuple[list[Switch], list[Link]]:
    """Every plane's switches and cables; on routed planes with their ASNs, loopbacks and /31s."""
    routing = {p.name: p.routing for p in planes if p.routing is not None}
    problems = pool_problems(spec, routing)
    if problems:
        raise DesignError(problems)
    switches: list[Switch] = []
    links: list[Link] = []
    for name, fabric in fabrics.items():
        plane_switches, plane_links = fabric.switches, fabric.links
        if name in routing:
            plane_switches, plane_links = route_plane(name, routing[name], plane_switches, plane_links, previous)
        switches += plane_switches
        links += plane_links
    return switches, links


def _on_plane(members: Members, plane: PlaneName) -> Members:
    return [(g, n) for g, n in members if plane in g.nics]


def _rails_likely(spec: Spec, plane: PlaneName, members: Members, previous: Plan | None) -> bool:
    """Whether NIC i is rail i on this plane (decided before cabling, to number rails)."""
    kept = _previous_basis(spec, plane, previous)
    if kept is not None:
        return kept.style == "rail-optimized"
    on = _on_plane(members, plane)
    counts = {g.nics[plane].count for g, _ in on}
    bonded = any(g.nics[plane].bond is not None for g, _ in on)
    return resolve_style(spec.planes[plane], len(on), counts, bonded) == "rail-optimized"


def _previous_basis(spec: Spec, plane: PlaneName, previous: Plan | None) -> FabricBasis | None:
    """The previous plan's layout of this plane, if its fabric section is unchanged."""
    if previous is None:
        return None
    old = next((p.basis for p in previous.planes if p.name == plane), None)
    return old if old is not None and old.fabric == spec.planes[plane].fabric else None


def _basis(spec: Spec, plane: PlaneName, attached: list[Attachment], members: Members,
           previous: Plan | None) -> FabricBasis:
    kept = _previous_basis(spec, plane, previous)
    if kept is not None:
        return kept_basis(spec.planes[plane], kept, attached)
    bonded = any(g.nics[plane].bond is not None for g, _ in _on_plane(members, plane))
    return fresh_basis(spec.planes[plane], attached, bonded)


def _interfaces(
    spec: Spec, members: Members, rails: dict[PlaneName, bool], previous: Plan | None
) -> dict[str, list[Interface]]:
    """Every node's interfaces, plane by plane, with addresses assigned per plane."""
    result: dict[str, list[Interface]] = {n: [] for _, n in members}
    first_hca = {g.name: 0 for g in spec.groups}
    for plane, plane_spec in spec.planes.items():
        per_group = {g.name: plane_interfaces(plane, plane_spec, g, rails[plane], first_hca[g.name])
                     for g in spec.groups if plane in g.nics}
        for g in spec.groups:
            first_hca[g.name] += rdma_nic_count(plane_spec, g, plane) if plane in g.nics else 0
        drafts = {n: per_group[g.name] for g, n in _on_plane(members, plane)}
        wanted = [(n, i.name) for n, ifs in drafts.items() for i in ifs if i.master is None]
        indexes = assign_addresses(plane, plane_spec, wanted, previous_addresses(previous, plane),
                                   reserved_for_switches(spec, plane, previous))
        for node, ifs in drafts.items():
            count = sum(i.master is None for i in ifs)
            result[node] += [
                i if i.master is not None else with_address(i, node, indexes[node, i.name], plane_spec, count)
                for i in ifs
            ]
    return result


def _attached(plane: PlaneName, members: Members, interfaces: dict[str, list[Interface]]) -> list[Attachment]:
    result = []
    for _, node in _on_plane(members, plane):
        cabled = [i for i in interfaces[node] if i.plane == plane and i.cabled]
        result.append(Attachment(node, plane, tuple(i.name for i in cabled), cabled[0].speed_gbps))
    return result


def _fabric(
    spec: Spec, plane: PlaneName, basis: FabricBasis, attached: list[Attachment], previous: Plan | None
) -> PlaneFabric:
    previous_slots = {n.name: n.slots[plane] for n in previous.nodes if plane in n.slots} if previous else {}
    return build_plane_fabric(plane, spec.planes[plane], basis, attached, previous_slots)


def _plane(spec: Spec, name: PlaneName, fabric: PlaneFabric, basis: FabricBasis) -> Plane:
    p = spec.planes[name]
    return Plane(
        name=name, technology=p.technology, subnet=str(p.subnet),
        subnet6=str(p.subnet6) if p.subnet6 else None, gateway=str(p.gateway) if p.gateway else None,
        vlan=p.vlan, mtu=plane_mtu(name, p), speed_gbps=p.gbps, style=fabric.style,
        basis=basis.model_copy(update={"planned_nodes": fabric.planned_nodes}),
        cabling=Cabling(media=p.cabling.chosen(), breakout=p.cabling.breakout),
        nics={g.name: _nic_card(p, g.nics[name]) for g in spec.groups if name in g.nics},
        qos=(p.qos or RoceQos()) if p.technology == "roce" else None,
        partition=p.partition, sharp=p.sharp,
        routing=plane_routing(name, p, fabric.style),
    )


def _nic_card(plane: PlaneSpec, nic: NicSpec) -> NicCard:
    gbps = speed_gbps(nic.speed) if nic.speed else plane.gbps
    return NicCard(model=nic.model or nic_model(plane.technology, gbps), ports_per_card=nic.ports_per_card)


def _capacity(spec: Spec, plane: PlaneName, fabric: PlaneFabric) -> PlaneCapacity:
    endpoints = sum(1 for c in fabric.links if c.tier in ("node_leaf", "direct"))
    endpoints *= 2 if fabric.style == "direct" else 1
    nic_gbps = max((c.gbps for c in fabric.links if c.tier in ("node_leaf", "direct")), default=0)
    return plane_capacity(plane, fabric, endpoints, nic_gbps, spec.planes[plane].fabric.switch.port_gbps)
