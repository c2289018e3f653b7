"""Panels written as SVG text: real <text> (a search finds a node's name), a <title> on every
cable naming both ends as cabling.csv does, states carried by colour and by a dash pattern and a
label (colour-blind readers), colours from CSS variables that follow dark mode and print light."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from html import escape

from gpunet.report.geometry import Badge, Bundle, Device, Panel, Text, Tile, Wire
from gpunet.report.model import CableState

STATE_NAMES: dict[str, str] = {
    "unchecked": "planned, no result", "ok": "ok (checked)", "missing": "missing", "miswired": "miswired",
    "suspect": "suspect (errors, loss)", "degraded": "degraded (speed, width)", "down": "down",
}
LEGEND_ORDER = ("ok", "unchecked", "down", "missing", "miswired", "degraded", "suspect")
FONT = "ui-monospace, 'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, monospace"
LIGHT = ("--gn-bg:#ffffff;--gn-fg:#1f2933;--gn-muted:#52606d;--gn-box:#f5f7fa;--gn-switch:#e3ecf7;"
         "--gn-stroke:#7b8794;--gn-unchecked:#a7b1bc;--gn-ok:#008f68;--gn-missing:#d55e00;--gn-miswired:#c98a00;"
         "--gn-suspect:#b8468f;--gn-degraded:#0072b2;--gn-down:#b3261e;--gn-warn:#c98a00;--gn-fail:#b3261e;")
DARK = ("--gn-bg:#14171c;--gn-fg:#e4e7eb;--gn-muted:#9aa5b1;--gn-box:#1e252e;--gn-switch:#22324a;"
        "--gn-stroke:#8795a5;--gn-unchecked:#5c6773;--gn-ok:#3ccf9e;--gn-missing:#ff8a4c;--gn-miswired:#f5c04a;"
        "--gn-suspect:#ef8fd0;--gn-degraded:#5bb8f0;--gn-down:#ff6b61;--gn-warn:#f5c04a;--gn-fail:#ff6b61;")
DASH = {"missing": "7 5", "miswired": "12 4 3 4", "suspect": "1.5 3.5", "degraded": "10 4"}
STYLE = f"""
:root{{{LIGHT}}}
@media (prefers-color-scheme: dark){{:root{{{DARK}}}}}
@media print{{:root{{{LIGHT}}}}}
.gn-fabric{{font-family:{FONT};background:var(--gn-bg)}}
.gn-fabric text{{fill:var(--gn-fg)}}
.gn-fabric .gn-sublabel,.gn-fabric .gn-tier,.gn-fabric .gn-note{{fill:var(--gn-muted)}}
.gn-fabric .gn-title{{font-weight:bold}}
.gn-node rect,.gn-tile rect{{fill:var(--gn-box);stroke:var(--gn-stroke);stroke-width:1}}
.gn-switch rect{{fill:var(--gn-switch);stroke:var(--gn-stroke);stroke-width:1}}
.gn-fault-fail rect{{stroke:var(--gn-fail);stroke-width:2.4}}
.gn-fault-warn rect{{stroke:var(--gn-warn);stroke-width:2.4;stroke-dasharray:5 3}}
.gn-cable{{fill:none;stroke-width:0.9;stroke-linecap:round}}
.gn-cable.gn-s-ok{{stroke-opacity:0.55}}
""" + "".join(f".gn-s-{s}{{stroke:var(--gn-{s})}}\n" for s in LEGEND_ORDER) + "".join(
    f".gn-cable.gn-s-{s}{{stroke-width:{2.6 if s != 'down' else 3.2};stroke-dasharray:{DASH.get(s, 'none')}}}\n"
    for s in ("missing", "miswired", "suspect", "degraded", "down")) + """
.gn-badge rect{fill:var(--gn-bg);stroke-width:1.6}
.gn-badge text{font-weight:bold}
.gn-leader{stroke:var(--gn-muted);stroke-width:0.8;stroke-dasharray:3 3;fill:none}
.gn-bundle{stroke-width:5;stroke-linecap:butt}
"""


def number(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def text_svg(t: Text) -> str:
    turn = f' transform="rotate(-90 {number(t.x)} {number(t.y)})"' if t.vertical else ""
    return (f'<text x="{number(t.x)}" y="{number(t.y)}" font-size="{number(t.size)}" class="{t.css}" '
            f'text-anchor="middle" dominant-baseline="central"{turn}>{escape(t.text)}</text>')


def wire_svg(w: Wire, state: CableState, title: str) -> str:
    css = f'class="gn-cable gn-s-{state}" id="c{w.index}" data-cable="{w.index}" data-state="{state}"'
    if w.arc:
        low = max(w.y1, w.y2) + w.arc
        shape = (f'<path {css} d="M{number(w.x1)} {number(w.y1)} C{number(w.x1)} {number(low)} {number(w.x2)} '
                 f'{number(low)} {number(w.x2)} {number(w.y2)}">')
        return f"{shape}<title>{escape(title)}</title></path>"
    return (f'<line {css} x1="{number(w.x1)}" y1="{number(w.y1)}" x2="{number(w.x2)}" y2="{number(w.y2)}">'
            f"<title>{escape(title)}</title></line>")


def device_svg(d: Device, fault: str | None) -> str:
    kind = "gn-node" if d.tier == "node" else "gn-switch"
    css = f"gn-device {kind}" + (f" gn-fault-{fault}" if fault else "")
    r = d.rect
    return (f'<g id="{d.id}" class="{css}" data-device="{escape(d.name)}"><title>{escape(d.title)}</title>'
            f'<rect x="{number(r.x)}" y="{number(r.y)}" width="{number(r.w)}" height="{number(r.h)}" rx="3"/>'
            + "".join(text_svg(t) for t in d.texts) + "</g>")


def badge_svg(b: Badge, anchor: str) -> str:
    r = b.rect
    leader = "" if b.leader is None else (
        f'<line class="gn-leader" x1="{number(b.leader[0])}" y1="{number(b.leader[1])}" x2="{number(b.leader[2])}" '
        f'y2="{number(b.leader[3])}"/>')
    dash = f' stroke-dasharray="{DASH[b.state]}"' if b.state in DASH else ""
    return (f'{leader}<a href="#{anchor}"><g class="gn-badge" id="on-{b.ref}" data-ref="{b.ref}">'
            f'<rect class="gn-s-{b.state}" x="{number(r.x)}" y="{number(r.y)}" width="{number(r.w)}" '
            f'height="{number(r.h)}" rx="3"{dash}/>{text_svg(b.label)}</g></a>')


def tile_svg(t: Tile) -> str:
    r = t.rect
    fault = " gn-fault-fail" if t.state not in ("ok", "unchecked") else ""
    body = (f'<rect x="{number(r.x)}" y="{number(r.y)}" width="{number(r.w)}" height="{number(r.h)}" rx="4"/>'
            + "".join(text_svg(x) for x in t.texts))
    if t.expanded:
        body = f'<a href="#{t.expanded}">{body}</a>'
    return f'<g id="{t.id}" class="gn-tile{fault}"><title>{escape(t.title)}</title>{body}</g>'


def bundle_svg(b: Bundle) -> str:
    r = b.rect
    return (f'<line class="gn-bundle gn-s-{b.state}" data-bundle="{len(b.members)}" data-state="{b.state}" '
            f'x1="{number(r.x)}" y1="{number(r.cy)}" x2="{number(r.right)}" y2="{number(r.cy)}">'
            f"<title>{escape(b.title)}</title></line>")


def panel_svg(panel: Panel, states: Callable[[int], CableState], titles: Callable[[int], str],
              faults: Callable[[str], str | None], targets: Callable[[str], str]) -> str:
    """One panel as an <svg> element (no style of its own: the page or topology.svg holds it)."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="gn-fabric" id="{panel.key}" '
             f'viewBox="0 0 {number(panel.width)} {number(panel.height)}" width="{number(panel.width)}" '
             f'height="{number(panel.height)}" role="img" aria-label="{escape(panel.title)}">',
             f"<title>{escape(panel.title)}</title>", '<g class="gn-wires">']
    parts += [wire_svg(w, states(w.index), titles(w.index)) for w in panel.wires]
    parts += ["</g>", '<g class="gn-bundles">', *(bundle_svg(b) for b in panel.bundles), "</g>"]
    parts += ['<g class="gn-devices">', *(device_svg(d, faults(d.name)) for d in panel.devices),
              *(tile_svg(t) for t in panel.tiles), "</g>"]
    parts += [text_svg(t) for t in panel.texts]
    parts += ['<g class="gn-badges">', *(badge_svg(b, targets(b.ref)) for b in panel.badges), "</g>", "</svg>"]
    return "\n".join(parts)


def legend_svg(counts: dict[str, int], always: tuple[str, ...] = ("ok", "unchecked")) -> str:
    """The cable states, each with its line as drawn and how many cables are in it: those in
    `always`, and every other state some cable is in."""
    items = [s for s in LEGEND_ORDER if counts.get(s) or s in always]
    x, parts = 8.0, []
    for state in items:
        label = f"{STATE_NAMES[state]}: {counts.get(state, 0):,}"
        parts.append(f'<line class="gn-cable gn-s-{state}" x1="{number(x)}" y1="14" x2="{number(x + 34)}" y2="14"/>'
                     f'<text x="{number(x + 42)}" y="14" font-size="11" dominant-baseline="central">'
                     f"{escape(label)}</text>")
        x += 42 + len(label) * 6.6 + 22
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="gn-fabric gn-legend" viewBox="0 0 {number(x)} 28" '
            f'width="{number(x)}" height="28" role="img" aria-label="legend of cable states">'
            f"<title>cable states</title>{''.join(parts)}</svg>")


def stacked(panels: Iterable[str], sizes: Iterable[tuple[float, float]], legend: str) -> str:
    """Panels one under the other in one SVG document (topology.svg), the legend on top."""
    y, width, body = 36.0, 0.0, []
    for svg, (w, h) in zip(panels, sizes, strict=True):
        body.append(svg.replace("<svg ", f'<svg x="0" y="{number(y)}" ', 1))
        y, width = y + h + 16, max(width, w)
    head = legend.replace("<svg ", '<svg x="8" y="4" ', 1)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="gn-fabric" viewBox="0 0 {number(width)} {number(y)}" '
            f'width="{number(width)}" height="{number(y)}">\n<style>{STYLE}</style>\n'
            f'<rect width="100%" height="100%" fill="var(--gn-bg)"/>\n{head}\n' + "\n".join(body) + "\n</svg>\n")
