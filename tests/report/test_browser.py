"""The report in a real headless Chromium (Debian's chromium): the seeded default example (a miswired
management cable, a lossy leaf-spine cable named by counters, gpu012's ib3 down and gpu020's MTU
drift) loads with no request beyond the file itself and no console message, paints a non-blank
screen at 1600x1000 and a non-blank PDF page, and its DOM holds one element per planned cable,
the faulty ones in their fault state with a visible label."""

from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpunet.model.plan import Plan
from gpunet.report.page import Report
from tests.report.browser import Browser, Page, chromium
from tests.report.results import LOSSY, MISWIRED

Image = pytest.importorskip("PIL.Image", reason="Pillow (matplotlib's dependency, gpunet[test]) reads screenshots")
pytestmark = pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (apt-get install chromium)")
WIDTH, HEIGHT = 1600, 1000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with Browser() as running:
        yield running


@pytest.fixture(scope="module")
def page(browser: Browser, seeded_html: Path) -> Page:
    opened = browser.open(WIDTH, HEIGHT)
    browser.load(opened, seeded_html)
    return opened


def non_blank(png: bytes) -> tuple[float, int]:
    """Share of pixels that are not the background's colour, and how many colours there are."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=image.width * image.height)
    background = max(count for count, _ in colours)
    return 1 - background / (image.width * image.height), len(colours)


def cable_index(plan: Plan, a: str, b: str | None = None) -> int:
    return next(i for i, link in enumerate(plan.links)
                if f"{link.a.device}:{link.a.port}" == a and (b is None or f"{link.b.device}:{link.b.port}" == b))


def test_it_loads_with_no_request_and_no_console_message(browser: Browser, page: Page, seeded_html: Path) -> None:
    assert page.requests == [seeded_html.resolve().as_uri()]
    assert page.console == []
    logged = [line for line in browser.stderr().splitlines() if "CONSOLE" in line or "Refused to" in line]
    assert logged == []


def test_the_harness_sees_requests_and_policy_violations(browser: Browser, tmp_path: Path) -> None:
    """The two checks above are not blind: a page that loads a file is seen loading it, and a page
    whose policy refuses an inline script is seen refusing it."""
    (tmp_path / "style.css").write_text("body{color:red}")
    loads = tmp_path / "loads.html"
    loads.write_text('<!doctype html><link rel="stylesheet" href="style.css"><p>x</p>')
    refused = tmp_path / "refused.html"
    refused.write_text("<!doctype html><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">"
                       "<script>document.title='ran'</script><p>x</p>")
    probe = browser.open(400, 300)
    browser.load(probe, loads)
    assert (tmp_path / "style.css").as_uri() in probe.requests
    browser.load(probe, refused)
    assert any("Content Security Policy" in line for line in probe.console), probe.console
    assert browser.evaluate(probe, "document.title") != "ran"


def test_the_embedded_data_is_a_data_block_the_policy_allows(browser: Browser, page: Page,
                                                            seeded_report: Report) -> None:
    data = browser.evaluate(page, "JSON.parse(document.getElementById('gpunet-data').textContent)")
    assert data["site"] == "su1" and len(data["findings"]) == len(seeded_report.issues)
    assert browser.evaluate(page, "document.scripts.length") == 1


def test_the_screen_is_not_blank(browser: Browser, page: Page) -> None:
    png = browser.screenshot(page)
    assert Image.open(io.BytesIO(png)).size == (WIDTH, HEIGHT)
    share, colours = non_blank(png)
    assert share > 0.03 and colours > 20, (share, colours)


def test_the_printed_page_is_not_blank(browser: Browser, page: Page, tmp_path: Path) -> None:
    pdf = browser.pdf(page)
    assert pdf.startswith(b"%PDF")
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm (poppler-utils) draws the PDF's page to look at it")
    (tmp_path / "report.pdf").write_bytes(pdf)
    subprocess.run(["pdftoppm", "-r", "60", "-f", "1", "-l", "2", "-png", "--", str(tmp_path / "report.pdf"),
                    str(tmp_path / "page")], check=True, timeout=60)
    pages = sorted(tmp_path.glob("page-*.png"))
    assert pages, "no page drawn from the PDF"
    first = Image.open(pages[0])
    assert first.width > first.height  # landscape
    for drawn in pages:
        share, colours = non_blank(drawn.read_bytes())
        assert share > 0.02 and colours > 8, (drawn.name, share, colours)


def test_every_planned_cable_is_one_element_and_the_faulty_ones_show_it(browser: Browser, page: Page,
                                                                       su_plan: Plan) -> None:
    cables: list[list[Any]] = browser.evaluate(page, "[...document.querySelectorAll('[data-cable]')].map(e => "
                                                     "[Number(e.dataset.cable), e.dataset.state, "
                                                     "parseFloat(getComputedStyle(e).strokeWidth)])")
    assert sorted(c[0] for c in cables) == list(range(len(su_plan.links)))
    state = {c[0]: (c[1], c[2]) for c in cables}
    faulty = {cable_index(su_plan, f"{MISWIRED[0]}:{MISWIRED[1]}"): "miswired",
              cable_index(su_plan, *LOSSY.split(" ")): "suspect", cable_index(su_plan, "gpu012:ib3"): "down"}
    for index, wanted in faulty.items():
        assert state[index][0] == wanted and state[index][1] > 2, (index, state[index])
    oob = [c for c in cables if su_plan.links[c[0]].plane == "oob"]
    assert {c[1] for c in oob} == {"unchecked"}  # no result covers the BMC cables: not shown as ok
    assert {c[1] for c in cables if c[0] not in faulty} <= {"ok", "unchecked", "suspect"}


def test_each_faulty_cable_has_a_visible_label(browser: Browser, page: Page, seeded_report: Report) -> None:
    for issue in seeded_report.issues:
        if issue.state is None or not issue.cables:
            continue
        ref = next(r for r, target in seeded_report.drawing.anchors.items()
                   if target == f"on-{r}" and _issue_of(seeded_report, r) is issue)
        box = browser.evaluate(page, f"(() => {{ const b = document.getElementById('on-{ref}'); "
                                     "const r = b.getBoundingClientRect(); "
                                     "return [b.textContent, r.width, r.height, "
                                     "getComputedStyle(b.querySelector('text')).visibility]; })()")
        assert box[0].startswith(f"{ref} {issue.state}") and box[1] > 20 and box[2] > 8 and box[3] == "visible"


def _issue_of(report: Report, ref: str) -> object:
    return report.issues[int(ref[1:]) - 1]


def test_no_two_labels_overlap_as_the_browser_draws_them(browser: Browser, page: Page) -> None:
    overlaps = browser.evaluate(page, """(() => {
      const found = [];
      for (const svg of document.querySelectorAll('svg.gn-fabric')) {
        const boxes = [...svg.querySelectorAll('text')].map(t => [t.textContent, t.getBoundingClientRect()]);
        for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
          const [a, r] = boxes[i], [b, s] = boxes[j];
          if (r.left < s.right - 0.5 && s.left < r.right - 0.5 && r.top < s.bottom - 0.5 && s.top < r.bottom - 0.5)
            found.push([svg.id, a, b]);
        }
      }
      return found; })()""")
    assert overlaps == []


def test_every_finding_links_to_an_element_of_the_page(browser: Browser, page: Page) -> None:
    missing = browser.evaluate(page, "[...document.querySelectorAll('a[href^=\"#\"]')].map(a => "
                                     "a.getAttribute('href').slice(1)).filter(id => !document.getElementById(id))")
    assert missing == []


def test_dark_mode_draws_on_a_dark_page(browser: Browser, seeded_html: Path) -> None:
    dark = browser.open(WIDTH, HEIGHT, dark=True)
    browser.load(dark, seeded_html)
    background = browser.evaluate(dark, "getComputedStyle(document.documentElement).backgroundColor")
    assert background == "rgb(20, 23, 28)"
    share, _ = non_blank(browser.screenshot(dark))
    assert share > 0.03
