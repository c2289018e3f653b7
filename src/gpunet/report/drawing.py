"""The fabric drawn: one panel a plane (folded past FOLD_ABOVE nodes), each issue's badge placed
on the panel of its plane, and where each issue can be found in the page."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpunet.model.plan import Plan
from gpunet.report.badges import Mark, place_badges
from gpunet.report.fold import FOLD_ABOVE, folded_panel
from gpunet.report.geometry import Panel
from gpunet.report.layout import tiered_panel
from gpunet.report.model import CableState, cable_title
from gpunet.report.svg import STATE_NAMES, legend_svg, panel_svg, stacked


@dataclass
class Drawing:
    plan: Plan
    panels: list[Panel]
    states: dict[int, CableState] = field(default_factory=dict)
    faults: dict[str, str] = field(default_factory=dict)  # device -> fail | warn
    anchors: dict[str, str] = field(default_factory=dict)  # issue reference -> element id

    def every_panel(self) -> Iterator[Panel]:
        for panel in self.panels:
            yield panel
            yield from panel.expansions

    def state(self, index: int) -> CableState:
        return self.states.get(index, "unchecked")

    def svg(self, panel: Panel) -> str:
        return panel_svg(panel, self.state, lambda i: f"{cable_title(self.plan, i)}: {self.state(i)}",
                         self.faults.get, lambda ref: f"finding-{ref}")


def draw(plan: Plan, states: dict[int, CableState] | None = None, marks: list[Mark] | None = None,
         fold_above: int = FOLD_ABOVE) -> Drawing:
    states, marks = states or {}, marks or []
    drawing = Drawing(plan=plan, panels=[], states=states, faults=_faults(marks))
    by_plane: dict[str, list[int]] = defaultdict(list)
    for i, link in enumerate(plan.links):
        by_plane[link.plane].append(i)
    planes = _mark_planes(plan, marks, set(by_plane))
    for plane in plan.planes:
        links = by_plane.get(plane.name, [])
        if not links:
            continue
        mine = [m for m in marks if planes.get(m.ref) == plane.name]
        nodes = sum(any(i.plane == plane.name and i.cabled for i in n.interfaces) for n in plan.nodes)
        if nodes > fold_above:
            drawing.panels.append(folded_panel(plan, plane.name, links, drawing.state, marks=mine, nodes=nodes))
        else:
            panel = tiered_panel(plan, links, plane.name, plane.name, _title(plan, plane.name, links, nodes))
            place_badges(panel, mine)
            drawing.panels.append(panel)
    drawing.anchors = _anchors(drawing, marks)
    return drawing


def _faults(marks: list[Mark]) -> dict[str, str]:
    faults: dict[str, str] = {}
    for mark in marks:
        if mark.state in ("fail", "warn"):
            for device in mark.devices:
                faults[device] = "fail" if "fail" in (mark.state, faults.get(device)) else "warn"
    return faults


def _mark_planes(plan: Plan, marks: list[Mark], cabled: set[str]) -> dict[str, str]:
    """The plane whose panel shows each mark: its first cable's, the plane the issue names, or the
    first plane its first device is cabled on."""
    order = [p.name for p in plan.planes if p.name in cabled]
    switches = {s.name: s.plane for s in plan.switches}
    first_plane: dict[str, str] = {}
    for device in {d for m in marks for d in m.devices}:
        node = plan.node(device)
        planes: set[str | None] = {i.plane for i in node.interfaces if i.cabled} if node else {switches.get(device)}
        found = next((p for p in order if p in planes), None)
        if found is not None:
            first_plane[device] = found
    result: dict[str, str] = {}
    for mark in marks:
        if mark.cables:
            result[mark.ref] = plan.links[mark.cables[0]].plane
        elif mark.plane is not None and any(first_plane.get(d) for d in mark.devices):
            result[mark.ref] = mark.plane
        elif (plane := next((first_plane[d] for d in mark.devices if d in first_plane), None)) is not None:
            result[mark.ref] = plane
    return result


def _title(plan: Plan, plane: str, links: list[int], nodes: int) -> str:
    spec = next(p for p in plan.planes if p.name == plane)
    switches = [s for s in plan.switches if s.plane == plane]
    tiers = " · ".join(f"{n} {t}{'s' if n > 1 else ''}" for t in ("leaf", "spine", "core")
                       if (n := sum(s.tier == t for s in switches)))
    tiers = tiers.replace("leafs", "leaves")
    return f"{plane}: {spec.technology} · {spec.style} · {nodes} nodes · {tiers or 'no switches'} · {len(links)} cables"


def _anchors(drawing: Drawing, marks: list[Mark]) -> dict[str, str]:
    """Issue reference -> the id of its badge, else of its tile, cable or device in the page."""
    anchors: dict[str, str] = {}
    cables: dict[int, str] = {}
    devices: dict[str, str] = {}
    for panel in drawing.every_panel():
        anchors |= {b.ref: f"on-{b.ref}" for b in panel.badges}
        anchors |= {ref: tile.id for tile in panel.tiles for ref in tile.refs if ref not in anchors}
        cables |= {w.index: f"c{w.index}" for w in panel.wires}
        for d in panel.devices:
            devices.setdefault(d.name, d.id)
    for mark in marks:
        if mark.ref not in anchors:
            found = [cables[i] for i in mark.cables if i in cables] + [devices[d] for d in mark.devices if d in devices]
            if found:
                anchors[mark.ref] = found[0]
    return anchors


def render_topology_svg(plan: Plan) -> str:
    """The picture of the design (topology.svg beside summary.md): every plane, no results."""
    drawing = draw(plan)
    panels = list(drawing.every_panel())
    legend = legend_svg({"unchecked": len(plan.links)}, always=("unchecked",)).replace(
        STATE_NAMES["unchecked"], "planned cables", 1)
    return stacked((drawing.svg(p) for p in panels), ((p.width, p.height) for p in panels), legend)
