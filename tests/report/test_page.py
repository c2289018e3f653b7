"""The page as text: self-contained (a Content-Security-Policy of default-src 'none', no reference
outside the file, no script but the data block), every value escaped (a hostile finding stays
text), the data block round-trips, and each family's findings land on the right cables."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

from gpunet.checks.base import Finding
from gpunet.model.plan import Plan
from gpunet.report.inputs import DoctorNode, DoctorResults
from gpunet.report.page import CSP, Report, render_report
from tests.report.conftest import GENERATED
from tests.report.results import LOSSY, MISWIRED


class Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def parsed(html: str) -> list[tuple[str, dict[str, str | None]]]:
    collector = Collect()
    collector.feed(html)
    return collector.tags


def data_block(html: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="gpunet-data">(.*?)</script>', html, re.S)
    assert found is not None
    return json.loads(found[1])  # type: ignore[no-any-return]


def test_the_page_loads_nothing_and_runs_nothing(seeded_report: Report) -> None:
    tags = parsed(seeded_report.html)
    assert ("meta", {"http-equiv": "Content-Security-Policy", "content": CSP}) in tags
    assert CSP == "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    references = [(tag, name, value) for tag, attrs in tags for name, value in attrs.items()
                  if name in ("src", "href", "xlink:href", "action", "srcset", "poster", "data")]
    assert [r for r in references if not (r[2] or "").startswith("#")] == []
    assert [attrs for tag, attrs in tags if tag == "script"] == [{"type": "application/json", "id": "gpunet-data"}]
    assert not re.search(r"url\((?!#)", seeded_report.html) and "@import" not in seeded_report.html
    assert set(re.findall(r"https?://[^\s\"'<>]+", seeded_report.html)) == {"http://www.w3.org/2000/svg"}  # xmlns


def test_the_data_block_holds_what_the_page_shows(seeded_report: Report, su_plan: Plan) -> None:
    data = data_block(seeded_report.html)
    assert data == json.loads(json.dumps(seeded_report.data))
    assert data["site"] == "su1" and data["plan"] == {"nodes": 38, "gpus": 256, "switches": 18, "cables": 704}
    findings = {f["ref"]: f for f in data["findings"]}  # type: ignore[attr-defined]
    assert {f["family"] for f in findings.values()} == {"doctor", "cabling", "localize", "bench", "switch", "sim"}
    assert any(f["cables"] == [LOSSY] and f["state"] == "suspect" for f in findings.values())
    not_ok = data["cables_not_ok"]
    assert not_ok[f"{MISWIRED[0]}:{MISWIRED[1]} mgmt-leaf001:7"] == "miswired"  # type: ignore[index]
    assert not_ok["gpu012:ib3 comp-leaf004:12"] == "down"  # type: ignore[index]
    assert len(data["results"]["cabling"]["cables"]) == 1  # type: ignore[index]  # ok cables counted, not listed
    del su_plan


def test_each_finding_links_to_its_place_in_the_drawing(seeded_report: Report) -> None:
    html = seeded_report.html
    for ref, target in seeded_report.drawing.anchors.items():
        assert f'<a id="finding-{ref}" href="#{target}">{ref}</a>' in html
        assert f'id="{target}"' in html
    placed = {b.ref for panel in seeded_report.drawing.every_panel() for b in panel.badges}
    assert {"F1", "F2", "F3", "F4", "F5", "F6", "F8"} <= placed  # everything about a cable or a device


def test_a_hostile_finding_stays_text(su_plan: Plan) -> None:
    evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
    finding = Finding(check="GN-LINK-01", area="link", title=evil, verdict="fail", node="gpu001", subject="ib0",
                      observed=evil, fix=evil)
    report = render_report(su_plan, {"doctor": DoctorResults(nodes=(DoctorNode(node="gpu001", failed=True,
                                                                               findings=(finding,)),))},
                           generated=GENERATED)
    assert "<img" not in report.html and report.html.count("<script") == 1
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in report.html
    assert data_block(report.html)["findings"][0]["detail"] == f"observed {evil}"  # type: ignore[index]


def test_the_report_is_the_same_for_the_same_inputs(seeded_report: Report, su_plan: Plan,
                                                     seeded: dict[str, Path]) -> None:
    from gpunet.report.build import build_report  # noqa: PLC0415
    from tests.report.conftest import all_files  # noqa: PLC0415

    again = build_report(su_plan, all_files(seeded), generated=GENERATED)
    assert again.html == seeded_report.html
