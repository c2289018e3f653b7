"""Each issue's reference placed on the drawing beside what it is about (F3 miswired on its cable,
F5 under its node), where it overlaps no other label; where no place beside it is free, in a row
below the drawing with a leader line to it."""

from __future__ import annotations

from dataclasses import dataclass

from gpunet.report.geometry import Badge, Panel, Rect, Text, Wire, first_free, text_width

SIZE = 10.0
ALONG = (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78, 0.14, 0.86)  # where on a cable a badge may sit
BELOW_ROWS = 6  # rows tried under a node before the badge goes aside
ROW = 20.0


@dataclass(frozen=True)
class Mark:
    """An issue to point at: its reference, a short label, the state it draws, what it is about."""

    ref: str
    label: str
    state: str  # a cable state, or fail / warn for a device
    cables: tuple[int, ...] = ()
    devices: tuple[str, ...] = ()
    plane: str | None = None  # where a mark about devices only is shown, when the issue says


def place_badges(panel: Panel, marks: list[Mark]) -> None:
    wires = {w.index: w for w in panel.wires}
    devices = {d.name: d.rect for d in panel.devices}
    taken = panel.labels() + list(devices.values())
    aside: list[tuple[Mark, float, float]] = []
    for mark in marks:
        wire = next((wires[i] for i in mark.cables if i in wires), None)
        device = next((devices[d] for d in mark.devices if d in devices), None)
        if wire is None and device is None:
            continue
        candidates = _along(wire, mark.label) if wire else _around(device, mark.label)  # type: ignore[arg-type]
        spot = first_free([_label(mark, _within(panel, mark, x), y).box.grown(3) for x, y in candidates], taken)
        if spot is None:
            target = wire.at(0.5) if wire else (device.cx, device.bottom)  # type: ignore[union-attr]
            aside.append((mark, *target))
            continue
        badge = Badge(mark.ref, mark.label, mark.state, _label(mark, spot.cx, spot.cy))
        panel.badges.append(badge)
        taken.append(badge.rect)
    _aside(panel, aside)


def _within(panel: Panel, mark: Mark, x: float) -> float:
    """x moved so that the badge stays inside the panel's width."""
    half = text_width(mark.label, SIZE) / 2 + 4
    return min(max(x, half), panel.width - half)


def _label(mark: Mark, x: float, y: float) -> Text:
    return Text(x, y, mark.label, SIZE, css="gn-badge-text")


def _along(wire: Wire, label: str) -> list[tuple[float, float]]:
    del label
    return [wire.at(t) for t in ALONG]


def _around(rect: Rect, label: str) -> list[tuple[float, float]]:
    """Under a box first (nodes have free space below), then above it."""
    half = SIZE * 0.7
    below = [(rect.cx, rect.bottom + 6 + half + k * ROW) for k in range(BELOW_ROWS)]
    return [*below, (rect.cx, rect.y - 6 - half), (rect.x + text_width(label, SIZE) / 2, rect.y - 6 - half)]


def _aside(panel: Panel, aside: list[tuple[Mark, float, float]]) -> None:
    """Badges with no free place beside their target: a row under the drawing, leaders to them."""
    x, y = 70.0, panel.height + ROW / 2
    for mark, tx, ty in aside:
        width = text_width(mark.label, SIZE) + 6
        if x + width > panel.width - 10 and x > 70:
            x, y = 70.0, y + ROW
        label = _label(mark, x + width / 2, y)
        panel.badges.append(Badge(mark.ref, mark.label, mark.state, label, leader=(label.x, label.y, tx, ty)))
        x += width + 12
    if aside:
        panel.height = y + ROW
        panel.width = max([panel.width] + [b.rect.right + 4 for b in panel.badges])
    panel.height = max(panel.height, max((b.rect.bottom + 6 for b in panel.badges), default=0.0))
