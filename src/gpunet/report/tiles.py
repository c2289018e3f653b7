"""A folded plane's overview: the cores as a bar on top, each pod's spines as a bar with its units'
tiles under it, every tile with its counts, its two cable bundles and the findings inside it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpunet.bench.heatmap import natural_key
from gpunet.model.plan import Switch
from gpunet.report.geometry import CHAR_EM, Bundle, Panel, Rect, Text, Tile, text_width
from gpunet.report.layout import LEFT, RIGHT, TOP
from gpunet.report.model import STATE_RANK, CableState
from gpunet.report.names import compact as fold

TILE_W, TILE_H, TILE_GAP, PER_ROW = 164.0, 76.0, 10.0, 8
BAR_H = 30.0
POD_GAP = 24.0
WIDTH = PER_ROW * (TILE_W + TILE_GAP) - TILE_GAP + POD_GAP  # two pods of half a row fit side by side
MIN_BAR = 3 * (TILE_W + TILE_GAP) - TILE_GAP  # a pod's bar, however few its units: room for its label and note


@dataclass
class Unit:
    """A scalable unit's leaves (or a group of a pod's leaves), the nodes under them, their cables."""

    key: tuple[object, ...]
    name: str
    pod: int
    leaves: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    down: list[int] = field(default_factory=list)  # node-leaf cables
    up: list[int] = field(default_factory=list)  # leaf-spine cables


def fit(text: str, width: float, size: float) -> str:
    """The text, or its start and end around an ellipsis where it is wider than `width`."""
    room = int(width / (size * CHAR_EM))
    if len(text) <= room:
        return text
    return "" if room < 3 else text[: room // 2] + "…" + text[len(text) - (room - room // 2 - 1):]


def worst(members: list[int], state: Callable[[int], CableState]) -> CableState:
    return max(set(map(state, members)), key=STATE_RANK.__getitem__, default="unchecked")


@dataclass
class Overview:
    """Draws into `panel`; `claimed` cables are drawn cable by cable elsewhere (not in a bundle),
    `expanded` maps a unit to the panel that draws it and the findings there, `refs` a unit (or
    ("pod", n)) to the findings about it that are not drawn cable by cable."""

    panel: Panel
    state: Callable[[int], CableState]
    claimed: set[int]
    expanded: dict[tuple[object, ...], tuple[str, list[str]]]
    refs: dict[tuple[object, ...], list[str]]

    def draw(self, switches: dict[str, Switch], units: list[Unit], to_core: dict[int, list[int]]) -> None:
        panel = self.panel
        panel.width, y = LEFT + WIDTH + RIGHT, TOP
        panel.texts.append(Text(LEFT + text_width(panel.title, 14) / 2, 20, panel.title, 14, css="gn-title"))
        cores = sorted((s.name for s in switches.values() if s.tier == "core"), key=natural_key)
        if cores:
            y = self.bar(y, f"cores: {len(cores):,} · {fold(cores)}", [], "core")
        x, row_height = LEFT, 0.0
        for pod in sorted({u.pod for u in units}):
            spines = sorted((s.name for s in switches.values() if s.tier == "spine" and (s.pod or 0) == pod),
                            key=natural_key)
            members = [u for u in units if u.pod == pod]
            span = max(MIN_BAR if spines else 0.0, min(len(members), PER_ROW) * (TILE_W + TILE_GAP) - TILE_GAP)
            if x > LEFT and x + span > LEFT + WIDTH:  # pods side by side while they fit, then the next row
                x, y, row_height = LEFT, y + row_height + 14, 0.0
            top = self.bar(y, f"pod {pod} spines: {len(spines):,} · {fold(spines)}",
                           [i for i in to_core.get(pod, []) if i not in self.claimed], f"pod{pod}", width=span, x=x) \
                if spines else y
            for n, unit in enumerate(members):
                self.tile(unit, Rect(x + (n % PER_ROW) * (TILE_W + TILE_GAP),
                                     top + (n // PER_ROW) * (TILE_H + TILE_GAP), TILE_W, TILE_H))
            rows = (len(members) + PER_ROW - 1) // PER_ROW
            row_height = max(row_height, top - y + rows * (TILE_H + TILE_GAP) - TILE_GAP)
            x += span + POD_GAP
        panel.height = y + row_height + 22

    def bar(self, y: float, label: str, up: list[int], key: str, *, width: float = WIDTH, x: float = LEFT) -> float:
        """A row of switches as one bar over the tiles under it; a pod's bar also bundles its cables
        up to the cores."""
        refs = self.refs.get(("pod", int(key[3:])), []) if key.startswith("pod") else []
        rect = Rect(x, y, width, BAR_H)
        note = " ".join([*refs[:4], *([f"{len(up):,} cables up to the cores"] if up else [])])
        text = fit(label, width - text_width(note, 10) - 60, 11)
        self.panel.tiles.append(Tile(key=key, rect=rect, id=f"{self.panel.key}-{key}", title=label, state="unchecked",
                                     texts=(Text(x + 8 + text_width(text, 11) / 2, y + BAR_H / 2, text, 11),),
                                     refs=tuple(refs)))
        if up:
            state = worst(up, self.state)
            glyph = Rect(rect.right - text_width(note, 10) - 44, y + BAR_H / 2 - 3, 28, 6)
            self.panel.bundles.append(Bundle(f"{key}-up", tuple(up), state, glyph, f"{note}: worst {state}"))
        if note:
            self.panel.texts.append(Text(rect.right - 8 - text_width(note, 10) / 2, y + BAR_H / 2, note, 10,
                                         css="gn-note"))
        return y + BAR_H + 12

    def tile(self, unit: Unit, rect: Rect) -> None:
        """A unit's tile: its name, nodes and counts, its two bundles, and the findings in it: those
        drawn cable by cable below (the tile links there), those about its devices or folded cables."""
        expanded, below = self.expanded.get(unit.key, (None, []))
        refs = self.refs.get(unit.key, [])
        lines = [(fit(unit.name, TILE_W - 12, 11), 11.0), (fit(fold(unit.nodes), TILE_W - 12, 10) or "no nodes", 10.0),
                 (f"{len(unit.nodes):,} nodes · {len(unit.leaves)} leaves", 10.0)]
        texts = [Text(rect.cx, rect.y + 11 + 14 * k, text, size) for k, (text, size) in enumerate(lines)]
        x = rect.x + 8
        for cables, arrow in ((unit.up, "↑"), (unit.down, "↓")):
            members = [i for i in cables if i not in self.claimed]
            if members:
                state, label = worst(members, self.state), f"{arrow}{len(members):,}"
                where = "up to the spines" if arrow == "↑" else "to nodes"
                self.panel.bundles.append(Bundle(f"{unit.name}{arrow}", tuple(members), state,
                                                 Rect(x, rect.bottom - 15, 18, 6),
                                                 f"{len(members):,} cables {where}: worst {state}"))
                texts.append(Text(x + 22 + text_width(label, 10) / 2, rect.bottom - 12, label, 10, css="gn-note"))
                x += 30 + text_width(label, 10)
        note = fit(" ".join([*refs, *([f"{' '.join(below)} below"] if expanded else [])]), rect.right - 6 - x, 10)
        if note:
            texts.append(Text(rect.right - 6 - text_width(note, 10) / 2, rect.bottom - 12, note, 10,
                              css="gn-badge-text"))
        self.panel.tiles.append(Tile(
            key=str(unit.key), rect=rect, texts=tuple(texts), id=f"{self.panel.key}-u{len(self.panel.tiles)}",
            title=f"{unit.name}: {fold(unit.nodes)} under {fold(unit.leaves)}", state=worst(unit.up + unit.down,
                                                                                            self.state),
            expanded=expanded, devices=(*unit.nodes, *unit.leaves), refs=tuple(refs)))
