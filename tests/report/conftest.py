"""The seeded default example's results and report, made once per test session."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from gpunet.model.plan import Plan
from gpunet.report.build import ReportFiles, build_report, write_report
from gpunet.report.page import Report
from tests.render.rendered import example_plan
from tests.report.results import write_all

GENERATED = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="session")
def su_plan() -> Plan:
    return example_plan("scalable-unit")


@pytest.fixture(scope="session")
def seeded(tmp_path_factory: pytest.TempPathFactory, su_plan: Plan) -> dict[str, Path]:
    return write_all(su_plan, tmp_path_factory.mktemp("results"))


def all_files(paths: dict[str, Path]) -> ReportFiles:
    return ReportFiles(doctor=(paths["doctor"], paths["doctor2"]), cabling=paths["cabling"],
                       localize=paths["localize"], bench_db=paths["bench"], switch=paths["switch"], sim=paths["sim"],
                       compare=paths["compare"], catalog=Path("example"))


@pytest.fixture(scope="session")
def seeded_report(su_plan: Plan, seeded: dict[str, Path]) -> Report:
    return build_report(su_plan, all_files(seeded), generated=GENERATED)


@pytest.fixture(scope="session")
def seeded_html(tmp_path_factory: pytest.TempPathFactory, seeded_report: Report) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    write_report(seeded_report, path)
    return path
