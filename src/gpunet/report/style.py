"""The page's one stylesheet (inline: the page loads nothing). Light and dark follow the reader's
setting; print is light, landscape, each drawing kept whole on a page."""

from __future__ import annotations

from gpunet.report.svg import STYLE as DRAWING

PAGE = """
*{box-sizing:border-box}
html{background:var(--gn-bg);color:var(--gn-fg)}
body{margin:0 auto;max-width:1500px;padding:24px 32px 48px;font:14px/1.45 system-ui,-apple-system,"Segoe UI",
  Roboto,"Noto Sans","DejaVu Sans",sans-serif}
h1{font-size:26px;margin:0}
h1 .sub{font-weight:normal;color:var(--gn-muted);font-size:18px;margin-left:10px}
h2{font-size:19px;margin:34px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--gn-stroke)}
h3{font-size:15px;margin:18px 0 6px}
a{color:var(--gn-degraded)}
code,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:0.92em}
header.masthead{display:flex;flex-wrap:wrap;align-items:baseline;justify-content:space-between;gap:10px 32px;
  border-bottom:3px solid var(--gn-fg);padding-bottom:10px}
dl.facts{display:grid;grid-template-columns:auto auto auto auto;gap:2px 14px;margin:0;font-size:13px}
dl.facts dt{color:var(--gn-muted)}
dl.facts dd{margin:0;font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace}
nav.toc{margin:10px 0 0;font-size:13px;color:var(--gn-muted)}
nav.toc a{margin-right:12px}
ul.strip{list-style:none;display:grid;grid-template-columns:repeat(auto-fit,minmax(190px,1fr));gap:10px;
  padding:0;margin:16px 0 0}
ul.strip li a{display:block;height:100%;padding:9px 12px;border:1px solid var(--gn-stroke);border-radius:6px;
  color:inherit;text-decoration:none;border-left-width:6px}
ul.strip li.v-fail a{border-left-color:var(--gn-fail)}
ul.strip li.v-warn a{border-left-color:var(--gn-warn)}
ul.strip li.v-pass a{border-left-color:var(--gn-ok)}
ul.strip li.v-not-given a{border-left-style:dashed;color:var(--gn-muted)}
ul.strip .family{font-weight:600;display:block}
ul.strip .summary{font-size:12.5px;color:var(--gn-muted);display:block;margin-top:3px}
.pill{display:inline-block;font-size:12px;font-weight:700;padding:0 7px;border-radius:9px;border:1.5px solid;
  text-transform:uppercase;letter-spacing:0.04em;margin-top:2px}
.pill.v-fail{color:var(--gn-fail)}.pill.v-warn{color:var(--gn-warn)}.pill.v-pass{color:var(--gn-ok)}
.pill.v-info,.pill.v-not-given{color:var(--gn-muted)}
figure.plane{margin:18px 0 26px;break-inside:avoid;page-break-inside:avoid}
figure.plane svg,figure.heat svg{display:block;max-width:100%;height:auto}
figure.plane figcaption{font-size:12.5px;color:var(--gn-muted);margin-top:4px}
.legend svg{max-width:100%;height:auto}
table{border-collapse:collapse;width:100%;margin:8px 0 4px;font-size:13px}
th,td{text-align:left;vertical-align:top;padding:4px 8px;border-bottom:1px solid var(--gn-box)}
th{border-bottom:1.5px solid var(--gn-stroke);font-weight:600;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
tbody tr:nth-child(even){background:color-mix(in srgb,var(--gn-box) 55%,transparent)}
td a{white-space:nowrap}
.sev-fail{color:var(--gn-fail);font-weight:700}.sev-warn{color:var(--gn-warn);font-weight:700}
p.note{color:var(--gn-muted);font-size:13px;margin:4px 0}
p.not-given{border:1.5px dashed var(--gn-stroke);border-radius:6px;padding:10px 14px;color:var(--gn-muted)}
.gn-heat text{fill:var(--gn-fg)}
.gn-heat .gn-heat-frame{fill:none;stroke:var(--gn-stroke)}
.gn-badge-text{font-weight:bold}
.gn-s-fail{stroke:var(--gn-fail)}.gn-s-warn{stroke:var(--gn-warn)}
:target{outline:3px solid var(--gn-degraded);outline-offset:2px}
g:target rect{stroke:var(--gn-degraded);stroke-width:3}
footer{margin-top:40px;font-size:12px;color:var(--gn-muted)}
@page{size:landscape;margin:10mm}
@media print{
  body{max-width:none;padding:0;font-size:11px}
  h2{break-after:avoid}
  figure.plane svg{max-height:175mm;width:auto;max-width:100%}
  nav.toc{display:none}
  a{color:inherit;text-decoration:none}
  section{break-inside:auto}
}
"""

STYLE = DRAWING + PAGE
