"""design(spec) -> Plan: pure, deterministic, stable under growth (see DESIGN.md)."""

from __future__ import annotations

import gc

from ClusterShell.NodeSet import NodeSet

from gpunet import __version__
from gpunet.design.addressing import assign_addresses, plane_interfaces, previous_addresses, with_address
from gpunet.design.capacity import bill_of_materials, plane_capacity
from gpunet.design.fabric import Attachment, PlaneFabric, build_plane_fabric, resolve_style
from gpunet.model.plan import Interface, Node, Plan, Plane, PlaneCapacity
from gpunet.model.spec import NodeGroup, PlaneName, Spec, plane_mtu

__all__ = ["design"]

Members = list[tuple[NodeGroup, str]]  # (group, node) in spec order


def design(spec: Spec, previous: Plan | None = None) -> Plan:
    """The Plan for a valid spec. With `previous`, every node that was in it keeps its
    addresses, slots and cables (as long as each plane's planned size still holds it)."""
    # Nothing here makes reference cycles; with 10^6 objects alive, the cyclic collector's full
    # passes would double the design time of a 100k-GPU plan.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _design(spec, previous)
    finally:
        if collecting:
            gc.enable()


def _design(spec: Spec, previous: Plan | None) -> Plan:
    members: Members = [(g, n) for g in spec.groups for n in NodeSet(g.nodes)]
    styles = {name: _style(spec, name, members) for name in spec.planes}
    interfaces = _interfaces(spec, members, styles, previous)
    fabrics = {name: _fabric(spec=spec, plane=name, style=styles[name], members=members,
                             interfaces=interfaces, previous=previous)
               for name in spec.planes}
    nodes = tuple(
        Node(name=n, group=g.name, role=g.role, gpus=g.gpus, gpu_model=g.gpu_model,
             interfaces=tuple(interfaces[n]),
             slots={p: f.slots[n] for p, f in fabrics.items() if n in f.slots})
        for g, n in members
    )
    switches = [s for f in fabrics.values() for s in f.switches]
    links = [c for f in fabrics.values() for c in f.links]
    return Plan(
        gpunet_version=__version__, site=spec.site, nodes=nodes,
        planes=tuple(_plane(spec, name, fabrics[name]) for name in spec.planes),
        switches=tuple(switches), links=tuple(links),
        capacity=tuple(_capacity(spec, name, fabrics[name]) for name in spec.planes),
        bom=tuple(bill_of_materials(switches, links)),
    )


def _on_plane(members: Members, plane: PlaneName) -> Members:
    return [(g, n) for g, n in members if plane in g.nics]


def _style(spec: Spec, plane: PlaneName, members: Members) -> str:
    on = _on_plane(members, plane)
    nics = max((g.nics[plane].count for g, _ in on), default=1)
    bonded = any(g.nics[plane].bond is not None for g, _ in on)
    return resolve_style(spec.planes[plane], len(on), nics, bonded)


def _interfaces(
    spec: Spec, members: Members, styles: dict[PlaneName, str], previous: Plan | None
) -> dict[str, list[Interface]]:
    """Every node's interfaces, plane by plane, with addresses assigned per plane."""
    result: dict[str, list[Interface]] = {n: [] for _, n in members}
    for plane, plane_spec in spec.planes.items():
        per_group = {g.name: plane_interfaces(plane, plane_spec, g, styles[plane] == "rail-optimized")
                     for g in spec.groups if plane in g.nics}
        drafts = {n: per_group[g.name] for g, n in _on_plane(members, plane)}
        wanted = [(n, i.name) for n, ifs in drafts.items() for i in ifs if i.master is None]
        indexes = assign_addresses(plane, plane_spec, wanted, previous_addresses(previous, plane))
        for node, ifs in drafts.items():
            count = sum(i.master is None for i in ifs)
            result[node] += [
                i if i.master is not None else with_address(i, node, indexes[node, i.name], plane_spec, count)
                for i in ifs
            ]
    return result


def _fabric(
    *, spec: Spec, plane: PlaneName, style: str, members: Members,
    interfaces: dict[str, list[Interface]], previous: Plan | None,
) -> PlaneFabric:
    attached = []
    for _, node in _on_plane(members, plane):
        cabled = [i for i in interfaces[node] if i.plane == plane and i.cabled]
        attached.append(Attachment(node, tuple(i.name for i in cabled), cabled[0].speed_gbps))
    previous_slots = {n.name: n.slots[plane] for n in previous.nodes if plane in n.slots} if previous else {}
    return build_plane_fabric(plane, spec.planes[plane], style, attached, previous_slots)


def _plane(spec: Spec, name: PlaneName, fabric: PlaneFabric) -> Plane:
    p = spec.planes[name]
    return Plane(
        name=name, technology=p.technology, subnet=str(p.subnet),
        subnet6=str(p.subnet6) if p.subnet6 else None, gateway=str(p.gateway) if p.gateway else None,
        vlan=p.vlan, mtu=plane_mtu(name, p), speed_gbps=p.gbps, style=fabric.style,
    )


def _capacity(spec: Spec, plane: PlaneName, fabric: PlaneFabric) -> PlaneCapacity:
    endpoints = sum(1 for c in fabric.links if c.tier in ("node_leaf", "direct"))
    endpoints *= 2 if fabric.style == "direct" else 1
    nic_gbps = max((c.gbps for c in fabric.links if c.tier in ("node_leaf", "direct")), default=0)
    return plane_capacity(plane, fabric, endpoints, nic_gbps, spec.planes[plane].fabric.switch.port_gbps)
