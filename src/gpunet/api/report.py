"""`gpunet report`: one self-contained HTML page of a Plan and the results given (doctor, cabling,
localize, bench, switch checks, simulated job times, compare), the fabric drawn."""

from __future__ import annotations

from pathlib import Path

from gpunet.report.build import ReportFiles, build_report, write_report
from gpunet.report.page import Report
from gpunet.spec.plan import plan_of

__all__ = ["Report", "ReportFiles", "report"]


def report(plan: Path, files: ReportFiles, output: Path) -> Report:
    """Build the page from the plan and the results, refusing results of another plan, and write it."""
    page = build_report(plan_of(plan), files)
    write_report(page, output)
    return page
