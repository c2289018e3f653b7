"""The README's picture: the seeded default example's report (tests/report/results.py) as Chromium
draws it, 1600 pixels wide, the top of the page down to the findings, scaled to 1200.

    PYTHONPATH=src python -m tests.report.screenshot docs/report.png
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

from PIL import Image

from gpunet.report.build import build_report, write_report
from tests.render.rendered import example_plan
from tests.report.browser import Browser
from tests.report.conftest import GENERATED, all_files
from tests.report.results import write_all

WIDTH, SHOWN, SCALED = 1600, 2260, 1200


def main(target: Path) -> None:
    plan = example_plan("scalable-unit")
    with tempfile.TemporaryDirectory(prefix="gn-report-") as scratch:
        report = build_report(plan, all_files(write_all(plan, Path(scratch))), generated=GENERATED)
        page = Path(scratch) / "report.html"
        write_report(report, page)
        with Browser() as browser:
            tab = browser.open(WIDTH, 1000)
            browser.load(tab, page)
            png = browser.screenshot(tab, full=True)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    top = image.crop((0, 0, WIDTH, min(SHOWN, image.height)))
    scaled = top.resize((SCALED, round(top.height * SCALED / WIDTH)), Image.Resampling.LANCZOS)
    scaled.quantize(colors=256).save(target, optimize=True)  # a palette: a third of the bytes, no visible loss


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/report.png"))
