"""A bench run's matrix as SVG: % of the Plan's expected rate per pair, on bench's own scale (red at
0 %, yellow at the 85 % flag, green at 100 %, blue above), failed black, inconclusive violet and
hatched, unmeasured left empty; low cells carry a mark too, so the map reads without colour."""

from __future__ import annotations

from html import escape

from gpunet.bench.expected import BELOW_EXPECTED
from gpunet.report.inputs import BenchResult, HeatCell
from gpunet.report.svg import number

# ColorBrewer RdYlGn (11 classes), the scale bench's PNG uses (matplotlib's RdYlGn).
RDYLGN = ("#a50026", "#d73027", "#f46d43", "#fdae61", "#fee08b", "#ffffbf", "#d9ef8b", "#a6d96a", "#66bd63",
          "#1a9850", "#006837")
ABOVE, FAILED, INCONCLUSIVE = "#2b6cb0", "#1a1a1a", "#9f7aea"
SIDE = 640.0  # the matrix's side in pixels
NUMBERS_UP_TO = 16  # names: numbers written in cells up to this many a side
NAMES_UP_TO = 64
MARGIN = 120.0


def scale_colour(percent: float) -> str:
    """bench's scale at the whole percent written in the cell: two linear halves of RdYlGn, 0 to
    the flag and the flag to 100."""
    shown = round(percent)
    if shown > 100:
        return ABOVE
    flag = 100 * BELOW_EXPECTED
    at = shown / flag * 0.5 if shown <= flag else 0.5 + (shown - flag) / (100 - flag) * 0.5
    position = max(0.0, min(1.0, at)) * (len(RDYLGN) - 1)
    low = int(position)
    high = min(low + 1, len(RDYLGN) - 1)
    return _mix(RDYLGN[low], RDYLGN[high], position - low)


def _mix(a: str, b: str, t: float) -> str:
    ca, cb = (tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in (a, b))
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(ca, cb, strict=True))


def cell_fill(cell: HeatCell) -> str:
    if cell.status == "failed":
        return FAILED
    if cell.status == "inconclusive":
        return INCONCLUSIVE
    return scale_colour(cell.percent) if cell.percent is not None else "none"


def heatmap_svg(result: BenchResult) -> str:
    n = len(result.names)
    size = SIDE / max(n, 1)
    margin = MARGIN if n <= NAMES_UP_TO else 24.0
    width = height = margin + SIDE + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="gn-heat" viewBox="0 0 {number(width)} '
             f'{number(height)}" width="{number(width)}" height="{number(height)}" role="img" '
             f'aria-label="bench run {result.run.id}: % of expected per pair">',
             '<defs><pattern id="gn-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
             'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2"/>'
             '</pattern><pattern id="gn-low" width="8" height="8" patternUnits="userSpaceOnUse">'
             '<circle cx="4" cy="4" r="1.3" fill="#000" fill-opacity="0.55"/></pattern></defs>',
             f'<rect class="gn-heat-frame" x="{number(margin)}" y="{number(margin)}" width="{number(SIDE)}" '
             f'height="{number(SIDE)}"/>']
    parts += [_cell(result, c, margin, size) for c in result.cells]
    if n <= NAMES_UP_TO:
        parts += _names(result.names, margin, size)
    parts.append("</svg>")
    return "\n".join(parts)


def _cell(result: BenchResult, cell: HeatCell, margin: float, size: float) -> str:
    x, y = margin + cell.column * size, margin + cell.row * size
    source, destination = result.names[cell.row], result.names[cell.column]
    pct = "no expectation" if cell.percent is None else f"{cell.percent:.0f} % of expected"
    title = f"{source} → {destination}: {cell.status}, {pct}"
    box = f'x="{number(x)}" y="{number(y)}" width="{number(size)}" height="{number(size)}"'
    shapes = [f'<rect {box} fill="{cell_fill(cell)}" class="gn-heat-{cell.status}"/>']
    if cell.status == "inconclusive":
        shapes.append(f'<rect {box} fill="url(#gn-hatch)"/>')
    elif cell.status == "low":
        shapes.append(f'<rect {box} fill="url(#gn-low)"/>')
    if len(result.names) <= NUMBERS_UP_TO and cell.percent is not None:
        ink = "#fff" if cell.status == "failed" else "#000"
        mark = "?" if cell.status == "inconclusive" else ""
        shapes.append(f'<text x="{number(x + size / 2)}" y="{number(y + size / 2)}" font-size="11" fill="{ink}" '
                      f'text-anchor="middle" dominant-baseline="central">{cell.percent:.0f}{mark}</text>')
    return f"<g><title>{escape(title)}</title>{''.join(shapes)}</g>"


def _names(names: tuple[str, ...], margin: float, size: float) -> list[str]:
    font = min(11.0, size * 0.8)
    parts = []
    for i, name in enumerate(names):
        middle = margin + (i + 0.5) * size
        parts.append(f'<text class="gn-heat-name" x="{number(margin - 6)}" y="{number(middle)}" '
                     f'font-size="{number(font)}" text-anchor="end" dominant-baseline="central">{escape(name)}</text>')
        parts.append(f'<text class="gn-heat-name" x="{number(middle)}" y="{number(margin - 6)}" '
                     f'font-size="{number(font)}" text-anchor="start" dominant-baseline="central" '
                     f'transform="rotate(-90 {number(middle)} {number(margin - 6)})">{escape(name)}</text>')
    return parts


def heat_legend() -> str:
    """The scale and the colours off it, as a row of swatches."""
    stops = [(0, "0 %"), (50, "50 %"), (85, "85 % (flag)"), (95, "95 %"), (100, "100 %")]
    items = [(scale_colour(p), label, "") for p, label in stops]
    items += [(ABOVE, "above 100 %", ""), (FAILED, "failed", ""), (INCONCLUSIVE, "inconclusive", "url(#gn-hatch)")]
    x, parts = 4.0, []
    for colour, label, pattern in items:
        parts.append(f'<rect x="{number(x)}" y="4" width="16" height="16" fill="{colour}"/>')
        if pattern:
            parts.append(f'<rect x="{number(x)}" y="4" width="16" height="16" fill="{pattern}"/>')
        parts.append(f'<text x="{number(x + 22)}" y="12" font-size="11" dominant-baseline="central">'
                     f"{escape(label)}</text>")
        x += 30 + 6.6 * len(label)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="gn-heat" viewBox="0 0 {number(x)} 24" '
            f'width="{number(x)}" height="24" role="img" aria-label="heat map scale">{"".join(parts)}</svg>')
