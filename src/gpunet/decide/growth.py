"""Growth headroom: how many nodes a plane takes before an existing cable moves.

New nodes fill free slots, then new leaves; `gpunet plan` keeps every existing cable as long as
the spine and core layers sized for the larger count wire the existing leaves as before (the same
spines per pod, links per leaf-spine pair, cores per group ...). This replays that sizing
(design/layout.py) leaf group by leaf group from the plane's FabricBasis, up to the first size
that rewires an existing leaf or that the radix cannot build."""

from __future__ import annotations

from collections.abc import Hashable
from math import ceil

from gpunet.decide.memo import last_plan
from gpunet.design.layout import LeafShape, SizingError, UpperShape, leaf_shape, upper_shape
from gpunet.model.plan import FabricBasis, Plan, Plane

MAX_NODES = 1_000_000  # as many as a NodeSet of the spec can name


@last_plan
def plan_headroom(plan: Plan) -> dict[str, int | None]:
    """Nodes each plane can add before a cable moves; None for a plan.json without a basis."""
    return {p.name: plane_headroom(plan, p) for p in plan.planes}


def plane_headroom(plan: Plan, plane: Plane) -> int | None:
    basis = plane.basis
    if basis is None:
        return None
    slots = [n.slots[plane.name] for n in plan.nodes if plane.name in n.slots]
    if basis.style == "direct" or not slots:
        return 0
    switch = basis.fabric.switch
    if basis.style == "single-switch":
        return max(0, switch.radix // basis.nics_per_node - len(slots))
    return _tiered_headroom(basis, len(slots), max(slots) + 1)


def _leaf_shape(basis: FabricBasis) -> LeafShape:
    """As design/fabric.py's _tiered lays out the plane's leaves."""
    fabric, nics = basis.fabric, basis.nics_per_node
    rails = nics if basis.style == "rail-optimized" or (fabric.dual_homed and nics > 1) else 0
    return leaf_shape(rails=rails, nics=nics, nodes_per_leaf=fabric.nodes_per_leaf, radix=fabric.switch.radix,
                      ratio=fabric.oversubscription.leaf, nic_gbps=basis.nic_gbps,
                      port_gbps=fabric.switch.port_gbps, min_spines=fabric.min_spines)


def _tiered_headroom(basis: FabricBasis, nodes: int, top_slot: int) -> int:
    shape = _leaf_shape(basis)
    built = ceil(top_slot / shape.slots_per_group) * shape.leaves_per_group
    groups = ceil(max(nodes, top_slot, basis.planned_nodes) / shape.slots_per_group)
    now = _upper(basis, shape, groups)
    wiring = _wiring(now, built, now.tiers == 3)
    while (groups + 1) * shape.slots_per_group <= MAX_NODES:
        try:
            upper = _upper(basis, shape, groups + 1)
        except SizingError:
            break
        if _refused(basis, upper) or _wiring(upper, built, now.tiers == 3) != wiring:
            break
        groups += 1
    return groups * shape.slots_per_group - nodes


def _upper(basis: FabricBasis, shape: LeafShape, groups: int) -> UpperShape:
    fabric = basis.fabric
    return upper_shape(leaves=groups * shape.leaves_per_group, up=shape.up_ports, radix=fabric.switch.radix,
                       ratio=fabric.oversubscription.spine, leaves_per_group=shape.leaves_per_group,
                       min_tiers=3 if basis.style == "three-tier" else 2, min_spines=fabric.min_spines)


def _refused(basis: FabricBasis, upper: UpperShape) -> bool:
    """A spine-leaf plane the spec pins to two tiers cannot grow a third."""
    return upper.tiers == 3 and basis.style == "spine-leaf" and basis.fabric.style == "spine-leaf"


def _wiring(upper: UpperShape, built_leaves: int, spine_core: bool) -> Hashable:
    """What the existing cables depend on: those of the first `built_leaves` leaves to their pods'
    spines, and (`spine_core`: the plane has a core layer already) the spines' cables to the cores.
    Growing from two tiers to three adds spine-core cables and moves none."""
    pods = ceil(built_leaves / upper.leaves_per_pod)
    per_pod = tuple((upper.spines_in(p), upper.links_per_pair(p)) for p in range(pods))
    spread = (upper.leaves_per_pod, upper.spines_per_pod) if pods > 1 else ()  # pod and spine numbering
    cores = (upper.tiers, upper.cores_per_group, upper.links_spine_core, upper.spine_down_ports) if spine_core else ()
    return per_pod, spread, cores
