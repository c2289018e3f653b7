"""A plane drawn in tiers from the Plan's own structure, not by a force layout: cores on top, then
spines, then leaves grouped by scalable unit (and rail), nodes under the leaves they hang from.
The same cables always give the same picture (golden-testable), and every cable is one wire
between the ports of its two ends, ports spread along the box edge in the order of the far ends
so that cables cross as little as the structure allows."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gpunet.bench.heatmap import natural_key
from gpunet.model.plan import Plan, Switch
from gpunet.report.geometry import Device, Panel, Rect, Text, Wire, text_width

RANK = {"node": 0, "leaf": 1, "spine": 2, "core": 3}
ROWS = ("core", "spine", "leaf", "node")
LEFT, RIGHT, TOP = 64.0, 20.0, 44.0  # the left margin holds the tier names; the top the title
NODE_W, NODE_GAP, MAX_NODE_GAP, GROUP_GAP = 20.0, 6.0, 14.0, 22.0
SWITCH_H, SWITCH_GAP, SWITCH_MIN_W = 36.0, 14.0, 84.0
NARROW_W = 24.0  # a switch box with its name written upwards, where a row of wide ones is too long
ROW_GAP = {"core": 96.0, "spine": 96.0, "leaf": 120.0}  # below a row of this tier
TARGET_W = 1400.0  # rows wider than this draw switches narrow
LABEL, SMALL = 11.0, 9.0
PORT_INSET = 4.0
PORT_PITCH = 1.6  # a switch box grows with its cables: at least this much of its edge a port


@dataclass
class _Box:
    name: str
    tier: str
    w: float
    h: float
    narrow: bool = False
    order: tuple[object, ...] = ()  # within its row: pod, then name
    x: float = 0.0
    y: float = 0.0

    @property
    def rect(self) -> Rect:
        return Rect(self.x, self.y, self.w, self.h)


def tiered_panel(plan: Plan, links: Sequence[int], key: str, plane: str, title: str) -> Panel:
    """The cables `links` (indices into plan.links) and the devices at their ends, in tiers."""
    switches = {s.name: s for s in plan.switches if s.plane == plane}
    ends = [(i, plan.links[i].a.device, plan.links[i].b.device) for i in links]
    tier = {d: switches[d].tier if d in switches else "node" for _, a, b in ends for d in (a, b)}
    groups, grouped_nodes = _leaf_groups(ends, tier, switches)
    boxes = {d: _switch_box(switches[d], ends) if t != "node" else _node_box(d) for d, t in tier.items()}
    _narrow_wide_rows(boxes)
    width = _place_columns(boxes, tier, groups, grouped_nodes)
    height = _place_rows(boxes, tier)
    panel = Panel(key=key, plane=plane, title=title, width=max(width, LEFT + text_width(title, 14)) + RIGHT,
                  height=height)
    panel.devices = [_device(plan, key, boxes[d], switches.get(d)) for d in _ordered(tier, boxes)]
    panel.wires = _wires(ends, boxes)
    panel.texts = [*_row_labels(boxes, tier), Text(LEFT + text_width(title, 14) / 2, 20, title, 14, css="gn-title")]
    panel.height = max([panel.height] + [w.y1 + w.arc + 8 for w in panel.wires if w.arc])
    return panel


def _leaf_groups(ends: list[tuple[int, str, str]], tier: dict[str, str],
                 switches: dict[str, Switch]) -> tuple[list[list[str]], dict[int, list[str]]]:
    """Leaves grouped by (pod, scalable unit) where the plan has units, else one group a leaf; each
    node under the group of the first leaf it is cabled to (nodes cabled to no leaf come last)."""
    def key(leaf: str) -> tuple[object, ...]:
        s = switches[leaf]
        unit = (s.su,) if s.su is not None else (math.inf, *natural_key(leaf))
        return (-1 if s.pod is None else s.pod, *unit)

    leaves = sorted((d for d, t in tier.items() if t == "leaf"), key=lambda d: (key(d), s_rail(switches[d]),
                                                                                 natural_key(d)))
    keys = list(dict.fromkeys(key(leaf) for leaf in leaves))
    groups = [[leaf for leaf in leaves if key(leaf) == k] for k in keys]
    group_of = {leaf: n for n, group in enumerate(groups) for leaf in group}
    nodes: dict[int, list[str]] = defaultdict(list)
    placed: set[str] = set()
    for _, a, b in sorted(ends):
        for node, other in ((a, b), (b, a)):
            if tier[node] == "node" and node not in placed and tier[other] == "leaf":
                nodes[group_of[other]].append(node)
                placed.add(node)
    rest = [d for d, t in tier.items() if t == "node" and d not in placed]
    if rest:
        nodes[len(groups)] = rest
        groups.append([])
    return groups, {g: sorted(names, key=natural_key) for g, names in nodes.items()}


def s_rail(switch: Switch) -> int:
    return -1 if switch.rail is None else switch.rail


def _switch_box(switch: Switch, ends: list[tuple[int, str, str]]) -> _Box:
    ports = sum(switch.name in (a, b) for _, a, b in ends)
    sub = _sublabel(switch)
    w = max(SWITCH_MIN_W, text_width(switch.name, LABEL) + 16, text_width(sub, SMALL) + 16, PORT_PITCH * ports)
    return _Box(switch.name, switch.tier, w, SWITCH_H, order=(-1 if switch.pod is None else switch.pod,
                                                              *natural_key(switch.name)))


def _sublabel(switch: Switch) -> str:
    if switch.rail is not None:
        return f"rail {switch.rail}"
    return f"pod {switch.pod}" if switch.pod is not None and switch.tier == "spine" else switch.model


def _node_box(name: str) -> _Box:
    return _Box(name, "node", NODE_W, max(48.0, text_width(name, LABEL) + 14))


def _narrow_wide_rows(boxes: dict[str, _Box]) -> None:
    """A switch row too wide for a page draws its switches narrow, the name written upwards."""
    for row in ("core", "spine", "leaf"):
        members = [b for b in boxes.values() if b.tier == row]
        if sum(b.w + SWITCH_GAP for b in members) > TARGET_W:
            for b in members:
                b.w, b.h, b.narrow = NARROW_W, max(SWITCH_H, text_width(b.name, LABEL) + 14), True


def _place_columns(boxes: dict[str, _Box], tier: dict[str, str], groups: list[list[str]],
                   nodes: dict[int, list[str]]) -> float:
    """x of every box: leaf groups side by side with their nodes under them, the rows above spread
    over the same width. Returns the right edge of the widest row."""
    def span(names: list[str], gap: float) -> float:
        return sum(boxes[n].w for n in names) + gap * max(0, len(names) - 1)

    widths = [max(span(g, SWITCH_GAP), span(nodes.get(n, []), NODE_GAP)) for n, g in enumerate(groups)]
    upper = {row: sorted((d for d in tier if tier[d] == row), key=lambda d: boxes[d].order)
             for row in ("core", "spine")}
    content = max([sum(widths) + GROUP_GAP * max(0, len(groups) - 1)] +
                  [span(names, SWITCH_GAP) for names in upper.values()])
    spare = content - sum(widths)  # spread between the groups (one group: centred)
    gap = spare / (len(groups) - 1) if len(groups) > 1 else 0.0
    x = LEFT + (spare / 2 if len(groups) == 1 else 0.0)
    for n, group in enumerate(groups):
        _centre(boxes, group, x, widths[n], SWITCH_GAP)
        members = nodes.get(n, [])
        # Nodes spread under their leaves (up to a pitch of MAX_NODE_GAP): a narrower fan is easier to read.
        room = (widths[n] - sum(boxes[m].w for m in members)) / max(1, len(members) - 1)
        _centre(boxes, members, x, widths[n], max(NODE_GAP, min(MAX_NODE_GAP, room)))
        x += widths[n] + gap
    for names in upper.values():
        _spread(boxes, names, LEFT, content)
    return LEFT + content


def _centre(boxes: dict[str, _Box], names: list[str], left: float, width: float, gap: float) -> None:
    used = sum(boxes[n].w for n in names) + gap * max(0, len(names) - 1)
    x = left + (width - used) / 2
    for n in names:
        boxes[n].x = x
        x += boxes[n].w + gap


def _spread(boxes: dict[str, _Box], names: list[str], left: float, width: float) -> None:
    """A row of switches over the whole width, evenly apart (one switch: centred)."""
    used = sum(boxes[n].w for n in names)
    gap = (width - used) / (len(names) + 1) if len(names) > 1 else (width - used) / 2
    x = left + gap
    for n in names:
        boxes[n].x = x
        x += boxes[n].w + gap


def _place_rows(boxes: dict[str, _Box], tier: dict[str, str]) -> float:
    """y of every box, tier by tier from the top; returns the bottom of the lowest."""
    y = TOP
    for row in ROWS:
        members = [boxes[d] for d, t in tier.items() if t == row]
        if not members:
            continue
        height = max(b.h for b in members)
        for b in members:
            b.y = y + (height - b.h if row != "node" else 0.0)  # switches sit on their row's floor
        y += height + ROW_GAP.get(row, 0.0)
    return y + 12


def _ordered(tier: dict[str, str], boxes: dict[str, _Box]) -> list[str]:
    return sorted(tier, key=lambda d: (-RANK[tier[d]], boxes[d].x))


def _device(plan: Plan, key: str, box: _Box, switch: Switch | None) -> Device:
    r = box.rect
    if box.tier == "node" or box.narrow:
        texts: tuple[Text, ...] = (Text(r.cx, r.y + r.h / 2, box.name, LABEL, vertical=True),)
    else:
        texts = (Text(r.cx, r.y + 12, box.name, LABEL), Text(r.cx, r.y + 26, _sublabel(switch), SMALL,
                                                             css="gn-sublabel")) if switch else ()
    node = plan.node(box.name)
    title = (f"{box.name}: {switch.tier} {switch.model}, {switch.radix} ports of {switch.port_gbps} Gb/s"
             if switch else f"{box.name}: {node.role if node else 'node'}, group {node.group if node else '-'}")
    return Device(name=box.name, tier=box.tier, rect=r, texts=texts, id=f"{key}-{box.name}", title=title)


def _wires(ends: list[tuple[int, str, str]], boxes: dict[str, _Box]) -> list[Wire]:
    """Each cable from a port on the lower device's top edge to one on the upper device's bottom
    edge; node-to-node cables curve below both nodes."""
    sides: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
    for i, a, b in ends:
        low, high = sorted((a, b), key=lambda d: RANK[boxes[d].tier])
        if boxes[low].tier == boxes[high].tier:
            sides[low, "down"].append((boxes[high].rect.cx, i))
            sides[high, "down"].append((boxes[low].rect.cx, i))
        else:
            sides[low, "up"].append((boxes[high].rect.cx, i))
            sides[high, "down"].append((boxes[low].rect.cx, i))
    port: dict[tuple[str, int], float] = {}
    for (device, _), taken in sides.items():
        r = boxes[device].rect
        step = (r.w - 2 * PORT_INSET) / len(taken)
        for k, (_, i) in enumerate(sorted(taken)):
            port[device, i] = r.x + PORT_INSET + (k + 0.5) * step
    return [_wire(i, a, b, boxes, port) for i, a, b in ends]


def _wire(i: int, a: str, b: str, boxes: dict[str, _Box], port: dict[tuple[str, int], float]) -> Wire:
    low, high = sorted((a, b), key=lambda d: RANK[boxes[d].tier])
    lo, hi = boxes[low].rect, boxes[high].rect
    if boxes[low].tier == boxes[high].tier:
        depth = 18 + min(60.0, abs(port[high, i] - port[low, i]) / 6)
        return Wire(i, port[low, i], lo.bottom, port[high, i], hi.bottom, arc=depth)
    return Wire(i, port[low, i], lo.y, port[high, i], hi.bottom)


def _row_labels(boxes: dict[str, _Box], tier: dict[str, str]) -> list[Text]:
    labels = []
    for row in ROWS:
        members = [boxes[d] for d, t in tier.items() if t == row]
        if members:
            y = min(b.y for b in members) + (SWITCH_H / 2 if row != "node" else 24)
            name = "nodes" if row == "node" else row
            labels.append(Text(LEFT - 10 - text_width(name, LABEL) / 2, y, name, LABEL, css="gn-tier"))
    return labels
