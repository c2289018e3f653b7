"""`gpunet report` through Typer (cli/report.py, loaded as cli/main.py's LAZY table will load it): the
page written, the verdicts printed; a result of another plan refused with exit 2, the file named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpunet.cli.report import report
from gpunet.render.plan_files import render_plan_json
from tests.render.rendered import example_plan
from tests.report.results import write_all

runner = CliRunner()


def gpunet_report(*args: str) -> tuple[int, str]:
    app = typer.Typer(add_completion=False)
    app.command(name="report")(report)
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    plan = example_plan("scalable-unit")
    directory = tmp_path_factory.mktemp("inputs")
    paths = write_all(plan, directory)
    paths["plan"] = directory / "plan.json"
    paths["plan"].write_text(render_plan_json(plan))
    return paths


def test_the_page_is_written_and_the_verdicts_printed(tmp_path: Path, inputs: dict[str, Path]) -> None:
    out = tmp_path / "site" / "report.html"
    code, output = gpunet_report("--plan", str(inputs["plan"]), "-o", str(out), "--doctor", str(inputs["doctor"]),
                                 "--doctor", str(inputs["doctor2"]), "--cabling", str(inputs["cabling"]),
                                 "--bench-db", str(inputs["bench"]), "--run", "1", "--json")
    assert code == 0, output
    printed = json.loads(output)
    assert printed["report"] == str(out) and out.read_text().startswith("<!doctype html>")
    assert printed["verdicts"]["cabling"]["verdict"] == "fail"
    assert printed["verdicts"]["localize"] == {"verdict": "not given", "summary": "not given: a localization"}
    assert {f["family"] for f in printed["findings"]} == {"doctor", "cabling", "bench"}


def test_the_terminal_lines_name_each_family(tmp_path: Path, inputs: dict[str, Path]) -> None:
    code, output = gpunet_report("--plan", str(inputs["plan"]), "-o", str(tmp_path / "r.html"))
    assert code == 0, output
    assert "not given doctor" in " ".join(output.split()) and "0 finding(s); wrote" in output


def test_a_result_of_another_plan_exits_2_naming_the_file(tmp_path: Path, inputs: dict[str, Path]) -> None:
    other = example_plan("small-ethernet")
    (tmp_path / "other.json").write_text(render_plan_json(other))
    code, output = gpunet_report("--plan", str(tmp_path / "other.json"), "-o", str(tmp_path / "r.html"),
                                 "--cabling", str(inputs["cabling"]))
    said = " ".join(output.split())
    assert code == 2 and "cabling.json" in said and f"plan '{other.site.name}' does not have" in said, output
    assert not (tmp_path / "r.html").exists()


def test_a_directory_as_the_output_is_refused(tmp_path: Path, inputs: dict[str, Path]) -> None:
    code, output = gpunet_report("--plan", str(inputs["plan"]), "-o", str(tmp_path))
    assert code == 2 and "is a directory" in output
