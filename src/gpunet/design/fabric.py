"""Switches and cables of one plane: direct, single switch, spine-leaf, rail-optimized,
three-tier. Port numbering is a pure function of slot and shape, so a node keeps its ports
as long as it keeps its slot and the shape (sized from planned_nodes) does not change."""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil

from gpunet.design.layout import LeafShape, SizingError, UpperShape, leaf_shape, upper_shape
from gpunet.design.naming import port_name, switch_name
from gpunet.errors import DesignError, SpecProblem
from gpunet.model.base import trusted
from gpunet.model.plan import LINK_FIELDS, PORT_FIELDS, FabricBasis, Link, LinkTier, Port, Switch, Tier
from gpunet.model.spec import PlaneName, PlaneSpec


@dataclass(frozen=True)
class Attachment:
    """A node's cabled interfaces on one plane, in NIC order, with their speed."""

    node: str
    plane: PlaneName
    interfaces: tuple[str, ...]
    gbps: int


@dataclass
class PlaneFabric:
    style: str
    switches: list[Switch]
    links: list[Link]
    slots: dict[str, int]
    leaf: LeafShape | None = None
    upper: UpperShape | None = None
    planned_nodes: int = 0




def link(plane: PlaneName, tier: LinkTier, a: tuple[str, str], b: tuple[str, str], gbps: int) -> Link:
    # Built as trusted: these come from our own arithmetic, and at 10^5-10^6 cables validation
    # (or model_construct's default resolution) costs seconds. The Plan's own validator still
    # checks every cable's ends against its switches and nodes.
    return trusted(Link, LINK_FIELDS, {
        "plane": plane, "tier": tier,
        "a": trusted(Port, PORT_FIELDS, {"device": a[0], "port": a[1]}),
        "b": trusted(Port, PORT_FIELDS, {"device": b[0], "port": b[1]}),
        "gbps": gbps, "p2p": None,
    })


def problem(plane: PlaneName, message: str, key: str = "style", hint: str = "") -> DesignError:
    path: tuple[str, ...] = ("planes", plane, "fabric", key)
    if key in ("radix", "port_speed"):
        path = ("planes", plane, "fabric", "switch", key)
    return DesignError([SpecProblem(message, path, hint)])


def resolve_style(spec: PlaneSpec, nodes: int, nic_counts: set[int], bonded: bool) -> str:
    """`auto`: one switch when it holds every NIC; rails when every node has the same several
    unbonded NICs; spine-leaf otherwise (mixed NIC counts included)."""
    fabric = spec.fabric
    if fabric.style != "auto":
        return fabric.style
    planned = max(nodes, fabric.planned_nodes or 0)
    if planned * max(nic_counts) <= fabric.switch.radix:
        return "single-switch"
    rails = len(nic_counts) == 1 and max(nic_counts) > 1 and not bonded
    return "rail-optimized" if rails else "spine-leaf"


def fresh_basis(spec: PlaneSpec, attached: list[Attachment], bonded: bool) -> FabricBasis:
    counts = {len(a.interfaces) for a in attached}
    return FabricBasis(
        style=resolve_style(spec, len(attached), counts, bonded), nics_per_node=max(counts),
        nic_gbps=max(a.gbps for a in attached), planned_nodes=spec.fabric.planned_nodes or 0,
        fabric=spec.fabric,
    )


def kept_basis(spec: PlaneSpec, previous: FabricBasis, attached: list[Attachment]) -> FabricBasis:
    """The previous layout, or a DesignError when new nodes cannot join it without moving
    existing cables."""
    wider = max(len(a.interfaces) for a in attached)
    faster = max(a.gbps for a in attached)
    plane = attached[0].plane
    if wider > previous.nics_per_node or faster > previous.nic_gbps:
        raise problem(plane, f"new nodes have {wider} NIC(s) at {faster}G where the existing layout has "
                      f"{previous.nics_per_node} at {previous.nic_gbps}G per node: fitting them moves "
                      "existing cables", hint="re-plan with --fresh to accept recabling, or give these "
                      "nodes their own plane")
    planned = max(previous.planned_nodes, spec.fabric.planned_nodes or 0)
    return previous.model_copy(update={"planned_nodes": planned})


def assign_slots(nodes: list[str], previous: dict[str, int]) -> dict[str, int]:
    """Each node keeps its previous slot; new nodes take the lowest free ones, in order."""
    slots: dict[str, int] = {}
    taken: set[int] = set()
    for node in nodes:
        slot = previous.get(node)
        if slot is not None and slot not in taken:
            slots[node] = slot
            taken.add(slot)
    free = (s for s in range(len(nodes) + len(taken) + 1) if s not in taken)
    for node in nodes:
        if node not in slots:
            slots[node] = next(free)
    return slots


def build_plane_fabric(
    plane: PlaneName, spec: PlaneSpec, basis: FabricBasis, attached: list[Attachment],
    previous_slots: dict[str, int],
) -> PlaneFabric:
    """Switches and cables of one plane laid out on `basis`; nodes keep their previous slots."""
    if basis.style == "direct":
        return _direct(plane, attached)
    slots = assign_slots([a.node for a in attached], previous_slots)
    try:
        if basis.style == "single-switch":
            return _single_switch(plane, spec, basis, attached, slots)
        return _tiered(plane, spec, basis, attached, slots)
    except SizingError as exc:
        raise problem(plane, str(exc), "radix", "use switches with more ports, or a higher "
                      "oversubscription, or style three-tier") from exc


def _direct(plane: PlaneName, attached: list[Attachment]) -> PlaneFabric:
    if len(attached) != 2 or len(attached[0].interfaces) != len(attached[1].interfaces):
        raise problem(plane, f"style direct joins exactly two nodes with equal NIC counts, "
                      f"got {len(attached)} node(s)", hint="use single-switch or spine-leaf")
    a, b = attached
    links = [
        link(plane, "direct", (a.node, ia), (b.node, ib), min(a.gbps, b.gbps))
        for ia, ib in zip(a.interfaces, b.interfaces, strict=True)
    ]
    return PlaneFabric("direct", [], links, {}, planned_nodes=2)


def _switch(plane: PlaneName, spec: PlaneSpec, tier: Tier, index: int, **where: int | None) -> Switch:
    model = spec.fabric.switch
    return Switch(name=switch_name(plane, tier, index), plane=plane, tier=tier,
                  model=model.model, radix=model.radix, port_gbps=model.port_gbps, **where)


def _single_switch(
    plane: PlaneName, spec: PlaneSpec, basis: FabricBasis, attached: list[Attachment], slots: dict[str, int]
) -> PlaneFabric:
    nics = basis.nics_per_node
    radix = spec.fabric.switch.radix
    planned = max(len(attached), basis.planned_nodes, max(slots.values()) + 1)
    if planned * nics > radix:
        raise problem(plane, f"{planned} nodes x {nics} NIC(s) exceed one {radix}-port switch",
                      "radix", "use style spine-leaf (or auto), or a larger switch")
    leaf = _switch(plane, spec, "leaf", 0)
    links = [
        link(plane, "node_leaf", (a.node, ifname), (leaf.name, port_name(slots[a.node] * nics + i + 1)), a.gbps)
        for a in attached for i, ifname in enumerate(a.interfaces)
    ]
    shape = LeafShape(1, radix // nics, nics, planned * nics, 0)
    return PlaneFabric("single-switch", [leaf], links, slots, shape, UpperShape(1, 1), planned)


def _tiered(
    plane: PlaneName, spec: PlaneSpec, basis: FabricBasis, attached: list[Attachment], slots: dict[str, int]
) -> PlaneFabric:
    fabric, model, style = spec.fabric, spec.fabric.switch, basis.style
    nics = basis.nics_per_node
    if style == "rail-optimized" and any(len(a.interfaces) != nics for a in attached):
        raise problem(plane, "rail-optimized needs the same NIC count on every node of the plane",
                      hint="use style spine-leaf, or put nodes with other NIC counts on their own plane")
    # Rails and dual-homing lay out alike: NIC i of a node on leaf i of its group, same port.
    rails = nics if style == "rail-optimized" or (fabric.dual_homed and nics > 1) else 0
    shape = leaf_shape(rails=rails, nics=nics, nodes_per_leaf=fabric.nodes_per_leaf, radix=model.radix,
                       ratio=fabric.oversubscription.leaf, nic_gbps=basis.nic_gbps, port_gbps=model.port_gbps,
                       min_spines=fabric.min_spines)
    planned = max(len(attached), basis.planned_nodes, max(slots.values()) + 1)
    leaves = ceil(planned / shape.slots_per_group) * shape.leaves_per_group
    upper = upper_shape(leaves=leaves, up=shape.up_ports, radix=model.radix, ratio=fabric.oversubscription.spine,
                        leaves_per_group=shape.leaves_per_group, min_tiers=3 if style == "three-tier" else 2,
                        min_spines=fabric.min_spines)
    if upper.tiers == 3 and style == "spine-leaf" and fabric.style == "spine-leaf":
        raise problem(plane, f"{leaves} leaves do not fit under {model.radix}-port spines in two "
                      "tiers", hint="use style three-tier or auto, or a larger radix")
    built = (max(slots.values()) // shape.slots_per_group + 1) * shape.leaves_per_group
    switches, links = _wire_tiers(plane, spec, shape, upper, built)
    links[:0] = _node_links(plane, spec, shape, attached, slots)
    if style == "spine-leaf" and upper.tiers == 3:
        style = "three-tier"
    return PlaneFabric(style, switches, links, slots, shape, upper, planned)


def _leaf_index(shape: LeafShape, slot: int, nic: int) -> tuple[int, int]:
    """(leaf index, 1-based port) of a node's NIC: rails spread NICs over the unit's leaves."""
    group, position = divmod(slot, shape.slots_per_group)
    if shape.leaves_per_group > 1:
        return group * shape.leaves_per_group + nic, position + 1
    return group, position * shape.nics_per_slot + nic + 1


def _node_links(
    plane: PlaneName, spec: PlaneSpec, shape: LeafShape, attached: list[Attachment], slots: dict[str, int]
) -> list[Link]:
    links = []
    for a in attached:
        for nic, ifname in enumerate(a.interfaces):
            leaf, port = _leaf_index(shape, slots[a.node], nic)
            links.append(link(plane, "node_leaf", (a.node, ifname),
                              (switch_name(plane, "leaf", leaf), port_name(port)), a.gbps))
    return links


def _wire_tiers(
    plane: PlaneName, spec: PlaneSpec, shape: LeafShape, upper: UpperShape, built_leaves: int
) -> tuple[list[Switch], list[Link]]:
    """Leaves, spines and cores with the cables between them, for the built leaves only."""
    pods = ceil(built_leaves / upper.leaves_per_pod)
    three = upper.tiers == 3
    leaves = [
        _switch(plane, spec, "leaf", i, pod=i // upper.leaves_per_pod if three else None,
                su=i // shape.leaves_per_group if shape.leaves_per_group > 1 else None,
                rail=i % shape.leaves_per_group if shape.leaves_per_group > 1 else None)
        for i in range(built_leaves)
    ]
    spines = [_switch(plane, spec, "spine", pod * upper.spines_per_pod + j, pod=pod if three else None)
              for pod in range(pods) for j in range(upper.spines_in(pod))]
    cores = [_switch(plane, spec, "core", c) for c in range(upper.cores)]
    links = _leaf_spine_links(plane, spec, shape, upper, built_leaves)
    if three:
        links += _spine_core_links(plane, spec, upper, pods)
    return [*leaves, *spines, *cores], links


def _leaf_spine_links(
    plane: PlaneName, spec: PlaneSpec, shape: LeafShape, upper: UpperShape, built_leaves: int
) -> list[Link]:
    gbps = spec.fabric.switch.port_gbps
    links = []
    for leaf in range(built_leaves):
        pod, local = divmod(leaf, upper.leaves_per_pod)
        per_pair = upper.links_per_pair(pod)
        for j in range(upper.spines_in(pod)):
            spine = switch_name(plane, "spine", pod * upper.spines_per_pod + j)
            for t in range(per_pair):
                leaf_port = shape.down_ports + j * per_pair + t + 1
                links.append(link(plane, "leaf_spine", (switch_name(plane, "leaf", leaf), port_name(leaf_port)),
                                  (spine, port_name(local * per_pair + t + 1)), gbps))
    return links


def _spine_core_links(plane: PlaneName, spec: PlaneSpec, upper: UpperShape, pods: int) -> list[Link]:
    """Spine j of every pod joins each core of group j with links_spine_core cables."""
    gbps, per_pair = spec.fabric.switch.port_gbps, upper.links_spine_core
    links = []
    for pod in range(pods):
        for j in range(upper.spines_in(pod)):
            spine = switch_name(plane, "spine", pod * upper.spines_per_pod + j)
            for m in range(upper.cores_per_group):
                core = switch_name(plane, "core", j * upper.cores_per_group + m)
                for t in range(per_pair):
                    spine_port = upper.spine_down_ports + m * per_pair + t + 1
                    links.append(link(plane, "spine_core", (spine, port_name(spine_port)),
                                      (core, port_name(pod * per_pair + t + 1)), gbps))
    return links
