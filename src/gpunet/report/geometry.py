"""The pieces of a drawing, placed: boxes, text with its extent, cables as lines or curves, folded
bundles. Text is measured from a monospace font (every glyph 0.6 em wide), so where a label ends
is known before any browser draws it, and labels are placed so that none overlaps another."""

from __future__ import annotations

from dataclasses import dataclass, field

CHAR_EM = 0.6  # advance of one glyph of a monospace font, in em (DejaVu Sans Mono: 0.602)
LINE_EM = 1.25  # a line's height, in em: ascenders and descenders inside it


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y + self.h

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    def overlaps(self, other: Rect) -> bool:
        return self.x < other.right and other.x < self.right and self.y < other.bottom and other.y < self.bottom

    def grown(self, by: float) -> Rect:
        return Rect(self.x - by, self.y - by, self.w + 2 * by, self.h + 2 * by)


def text_width(text: str, size: float) -> float:
    return len(text) * size * CHAR_EM


@dataclass(frozen=True)
class Text:
    """A label centred on (x, y); `vertical` reads bottom to top."""

    x: float
    y: float
    text: str
    size: float = 11.0
    vertical: bool = False
    css: str = "gn-label"

    @property
    def box(self) -> Rect:
        w, h = text_width(self.text, self.size), self.size * LINE_EM
        if self.vertical:
            w, h = h, w
        return Rect(self.x - w / 2, self.y - h / 2, w, h)


@dataclass(frozen=True)
class Device:
    """A node or switch drawn as a box with its labels; `id` is its anchor in the page."""

    name: str
    tier: str  # node, leaf, spine, core
    rect: Rect
    texts: tuple[Text, ...]
    id: str
    title: str


@dataclass(frozen=True)
class Wire:
    """One planned cable: `index` in plan.links; a straight line, or a curve under two nodes."""

    index: int
    x1: float
    y1: float
    x2: float
    y2: float
    arc: float = 0.0  # depth of a curve below both ends (node-to-node cables), 0: straight

    def at(self, t: float) -> tuple[float, float]:
        if self.arc:
            return (self.x1 + self.x2) / 2, max(self.y1, self.y2) + 0.75 * self.arc
        return self.x1 + t * (self.x2 - self.x1), self.y1 + t * (self.y2 - self.y1)


@dataclass(frozen=True)
class Badge:
    """An issue's reference on the drawing (F3 miswired), beside what it is about; `leader` draws a
    line to that place when the badge had to go aside."""

    ref: str
    text: str
    state: str
    label: Text
    leader: tuple[float, float, float, float] | None = None

    @property
    def rect(self) -> Rect:
        return self.label.box.grown(3)


@dataclass(frozen=True)
class Bundle:
    """Cables of a folded part drawn as one mark: their indices and the worst state among them."""

    key: str
    members: tuple[int, ...]
    state: str
    rect: Rect
    title: str


@dataclass(frozen=True)
class Tile:
    """A folded unit (a scalable unit's leaves and nodes, or a group of leaves) as one box."""

    key: str
    rect: Rect
    texts: tuple[Text, ...]
    id: str
    title: str
    state: str  # the worst state of its cables
    expanded: str | None = None  # anchor of the panel that draws it cable by cable
    devices: tuple[str, ...] = ()  # nodes and leaves it stands for
    refs: tuple[str, ...] = ()  # the findings about its devices


@dataclass
class Panel:
    """One plane's drawing (or an expanded part of a folded plane)."""

    key: str  # anchor prefix, unique in the page
    plane: str
    title: str
    width: float = 0.0
    height: float = 0.0
    devices: list[Device] = field(default_factory=list)
    wires: list[Wire] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    badges: list[Badge] = field(default_factory=list)
    tiles: list[Tile] = field(default_factory=list)
    bundles: list[Bundle] = field(default_factory=list)
    expansions: list[Panel] = field(default_factory=list)

    def labels(self) -> list[Rect]:
        """The extent of every text and badge: the things that must not overlap."""
        boxes = [t.box for t in self.texts]
        boxes += [t.box for d in self.devices for t in d.texts]
        boxes += [t.box for tile in self.tiles for t in tile.texts]
        return boxes + [b.rect for b in self.badges]


def first_free(candidates: list[Rect], taken: list[Rect]) -> Rect | None:
    return next((c for c in candidates if not any(c.overlaps(t) for t in taken)), None)


def overlapping_pairs(boxes: list[Rect]) -> list[tuple[Rect, Rect]]:
    """Every pair of boxes that overlap (a sweep along x: thousands of labels stay fast)."""
    ordered = sorted(boxes, key=lambda r: r.x)
    found: list[tuple[Rect, Rect]] = []
    active: list[Rect] = []
    for box in ordered:
        active = [a for a in active if a.right > box.x]
        found += [(a, box) for a in active if a.overlaps(box)]
        active.append(box)
    return found
