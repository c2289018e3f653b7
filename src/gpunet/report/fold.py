"""A large plane folded: scalable units (or groups of leaves) as tiles with their counts, under the
spines of their pod, the cores on top; the cables of a tile as two bundles (up to the spines, down
to the nodes), coloured by the worst state among them. Where a cable finding lives, its unit is
drawn again cable by cable (the tiered layout of just that part), so 12 500 servers make a page a
browser paints at once and the fault is still shown on its own cable."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from gpunet.bench.heatmap import natural_key
from gpunet.model.plan import Plan, Switch
from gpunet.report.badges import Mark, place_badges
from gpunet.report.geometry import Panel
from gpunet.report.layout import tiered_panel
from gpunet.report.model import CableState
from gpunet.report.names import compact as fold
from gpunet.report.tiles import Overview, Unit

FOLD_ABOVE = 64  # nodes on a plane: above this the plane is folded
MAX_EXPANDED = 3  # parts of one plane drawn cable by cable
UNIT_LEAVES = 8  # leaves a tile stands for where the plan has no scalable units


def folded_panel(plan: Plan, plane: str, links: Sequence[int], state: Callable[[int], CableState], *,
                 marks: list[Mark], nodes: int) -> Panel:
    switches = {s.name: s for s in plan.switches if s.plane == plane}
    units, unit_of = _units(switches)
    to_core = _sort_cables(plan, links, switches, units, unit_of)
    expansions = _expansions(plan, links, switches, marks, (units, unit_of, to_core))
    claimed = {i for _, members in expansions for i in members}
    panel = Panel(key=plane, plane=plane, title=_title(plane, switches, links, nodes))
    expanded_at = {unit_of[leaf]: (f"{plane}-x{n}", [m.ref for m in marks if set(m.cables) & set(members)])
                   for n, (leaves, members) in enumerate(expansions) for leaf in leaves if leaf in unit_of}
    refs = _refs(plan, switches, units, [m for m in marks if not set(m.cables) & claimed])
    Overview(panel, state, claimed, expanded_at, refs).draw(switches, list(units.values()), to_core)
    for n, (leaves, members) in enumerate(expansions):
        named = " ".join(m.ref for m in marks if set(m.cables) & set(members))
        part = tiered_panel(plan, members, f"{plane}-x{n}", plane,
                            f"{plane}: {_part_name(switches, leaves)}, cable by cable ({named})")
        place_badges(part, marks)
        panel.expansions.append(part)
    return panel


def _units(switches: dict[str, Switch]) -> tuple[dict[tuple[object, ...], Unit], dict[str, tuple[object, ...]]]:
    """Leaves into units: a scalable unit where the plan has them, else UNIT_LEAVES leaves of a pod."""
    leaves = sorted((s for s in switches.values() if s.tier == "leaf"),
                    key=lambda s: (s.pod or 0, s.su if s.su is not None else -1, natural_key(s.name)))
    units: dict[tuple[object, ...], Unit] = {}
    unit_of: dict[str, tuple[object, ...]] = {}
    count: dict[int, int] = defaultdict(int)
    for leaf in leaves:
        pod = leaf.pod or 0
        key: tuple[object, ...] = (pod, leaf.su) if leaf.su is not None else (pod, count[pod] // UNIT_LEAVES)
        count[pod] += 1
        name = f"su {leaf.su}" if leaf.su is not None else ""
        units.setdefault(key, Unit(key=key, name=name, pod=pod)).leaves.append(leaf.name)
        unit_of[leaf.name] = key
    for unit in units.values():
        unit.name = unit.name or fold(unit.leaves)
    return units, unit_of


def _sort_cables(plan: Plan, links: Sequence[int], switches: dict[str, Switch], units: dict[tuple[object, ...], Unit],
                 unit_of: dict[str, tuple[object, ...]]) -> dict[int, list[int]]:
    """Each cable into its unit's bundles (node-leaf down, leaf-spine up) or its pod's core bundle;
    a unit's nodes in the order their cables come. Returns the core cables by pod."""
    to_core: dict[int, list[int]] = defaultdict(list)
    unit_at = {leaf: units[key] for leaf, key in unit_of.items()}
    pod_of_spine = {s.name: s.pod or 0 for s in switches.values() if s.tier == "spine"}
    for i in links:
        link = plan.links[i]
        a, b = link.a.device, link.b.device
        if link.tier == "spine_core":
            to_core[pod_of_spine[a] if a in pod_of_spine else pod_of_spine[b]].append(i)
            continue
        unit = unit_at.get(a) or unit_at.get(b)
        if unit is None:
            continue  # a cable between nodes: none on a plane with leaves
        if link.tier != "node_leaf":
            unit.up.append(i)
            continue
        unit.down.append(i)
        node = b if a in unit_at else a
        if not unit.nodes or unit.nodes[-1] != node:
            unit.nodes.append(node)
    return to_core


Sorted = tuple[dict[tuple[object, ...], Unit], dict[str, tuple[object, ...]], dict[int, list[int]]]


def _expansions(plan: Plan, links: Sequence[int], switches: dict[str, Switch], marks: list[Mark],
                sorted_cables: Sorted) -> list[tuple[list[str], list[int]]]:
    """The parts drawn cable by cable, one per finding's place, the first MAX_EXPANDED: a leaf's
    scalable unit (or the leaf) with its node and uplink cables, or a spine with its core cables."""
    units, unit_of, to_core = sorted_cables
    on_plane = set(links)
    parts: list[tuple[str, ...]] = []
    for mark in marks:
        for i in mark.cables:
            if i in on_plane and len(parts) < MAX_EXPANDED:
                part = _part_of(plan, i, switches)
                parts += [part] if part not in parts else []
    result = []
    for part in parts:
        first = switches[part[0]]
        nearby = to_core.get(first.pod or 0, []) if first.tier == "spine" else sorted(
            units[unit_of[first.name]].down + units[unit_of[first.name]].up)
        result.append((list(part), [i for i in nearby if plan.links[i].a.device in part
                                    or plan.links[i].b.device in part]))
    return result


def _part_of(plan: Plan, i: int, switches: dict[str, Switch]) -> tuple[str, ...]:
    link = plan.links[i]
    ends = [switches[d] for d in (link.a.device, link.b.device) if d in switches]
    if link.tier == "spine_core":
        return tuple(s.name for s in ends if s.tier == "spine")
    leaf = next(s for s in ends if s.tier == "leaf")
    if leaf.su is None:
        return (leaf.name,)
    return tuple(sorted((s.name for s in switches.values() if s.tier == "leaf" and s.su == leaf.su
                         and s.pod == leaf.pod), key=natural_key))


def _part_name(switches: dict[str, Switch], part: list[str]) -> str:
    first = switches[part[0]]
    if first.tier == "spine":
        return f"{first.name} and its core cables"
    if first.su is not None:
        return f"su {first.su}" + (f" of pod {first.pod}" if first.pod is not None else "")
    return first.name


def _title(plane: str, switches: dict[str, Switch], links: Sequence[int], nodes: int) -> str:
    tiers = {t: sum(s.tier == t for s in switches.values()) for t in ("leaf", "spine", "core")}
    counts = " · ".join(f"{n:,} {'leaves' if t == 'leaf' else t + 's'}" for t, n in tiers.items() if n)
    return f"{plane}: {nodes:,} nodes · {counts} · {len(links):,} cables (folded)"


def _refs(plan: Plan, switches: dict[str, Switch], units: dict[tuple[object, ...], Unit],
          marks: list[Mark]) -> dict[tuple[object, ...], list[str]]:
    """Marks not drawn cable by cable, by the tile that stands for their place: a unit for its
    nodes, leaves and their cables, a pod's spine bar (key ("pod", n)) for spines and core cables."""
    unit_of: dict[str, tuple[object, ...]] = {d: u.key for u in units.values() for d in (*u.nodes, *u.leaves)}
    unit_of |= {s.name: ("pod", s.pod or 0) for s in switches.values() if s.tier == "spine"}
    refs: dict[tuple[object, ...], list[str]] = defaultdict(list)
    for mark in marks:
        places = [d for i in mark.cables for d in _ends_by_tier(plan, i, switches)] + list(mark.devices)
        unit = next((unit_of[d] for d in places if d in unit_of), None)
        if unit is not None:
            refs[unit].append(mark.ref)
    return refs


def _ends_by_tier(plan: Plan, i: int, switches: dict[str, Switch]) -> list[str]:
    """A cable's ends, the one that places it first: its leaf, else its spine."""
    ends = (plan.links[i].a.device, plan.links[i].b.device)
    rank = {"leaf": 0, "spine": 1}
    return sorted(ends, key=lambda d: rank.get(switches[d].tier, 2) if d in switches else 3)
