"""One page a person looks at: the Plan's fabric drawn, every result given placed on it, in one
self-contained HTML file (report/page.py); the drawing alone is topology.svg."""

from gpunet.report.drawing import render_topology_svg
from gpunet.report.families import FAMILIES, Family
from gpunet.report.page import Report, render_report

__all__ = ["FAMILIES", "Family", "Report", "render_report", "render_topology_svg"]
