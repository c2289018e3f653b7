"""`gpunet compare` and `gpunet plan --catalog` through the real Typer app."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.design.bom import plan_bom
from gpunet.model.io import read_plan
from gpunet.spec.examples import example_text

runner = CliRunner()
ROCE = Path(__file__).parent.parent / "fixtures" / "compare" / "su-roce.yaml"
BAD_CATALOG = "version: 1\nswitches:\n  QM9700-64xNDR: {part: X, price: 1, wats: 2}\n"


def example(tmp_path: Path) -> Path:
    path = tmp_path / "su-infiniband.yaml"
    path.write_text(example_text("scalable-unit"))
    return path


def test_compare_json_has_every_design_and_marks_the_rows_that_differ(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", str(example(tmp_path)), str(ROCE), "--catalog", "example", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert [d["name"] for d in body["designs"]] == ["su-infiniband", "su-roce"]
    assert body["placeholder"] is True and body["currency"] == "USD"
    rows = {(r["section"], r["metric"]): r for r in body["rows"]}
    assert rows["cluster", "switches"]["values"] == ["18", "16"] and rows["cluster", "switches"]["differs"]
    assert not rows["storage", "cables"]["differs"]
    assert rows["compute", "technology · style"]["values"] == ["infiniband · rail-optimized", "roce · rail-optimized"]


def test_a_spec_and_its_own_plan_json_do_not_differ(tmp_path: Path) -> None:
    spec = example(tmp_path)
    assert runner.invoke(app, ["plan", str(spec), "-o", str(tmp_path / "out")]).exit_code == 0
    result = runner.invoke(app, ["compare", str(spec), str(tmp_path / "out" / "plan.json"), "--json"])
    assert result.exit_code == 0, result.output
    assert not [r for r in json.loads(result.stdout)["rows"] if r["differs"]]


def test_markdown_and_terminal_tables(tmp_path: Path) -> None:
    spec = example(tmp_path)
    markdown = runner.invoke(app, ["compare", str(spec), str(ROCE), "--markdown", "--catalog", "example"])
    assert markdown.exit_code == 0 and markdown.stdout.startswith("| | su-infiniband | su-roce |")
    assert "| **switches** | **18** | **16** |" in markdown.stdout and "not prices" in markdown.stdout
    table = runner.invoke(app, ["compare", str(spec), str(ROCE)], terminal_width=200)
    assert table.exit_code == 0 and "one spine lost" in table.stdout and "differs between" in table.stdout


def test_compare_needs_two_designs(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", str(example(tmp_path))])
    assert result.exit_code == 2 and "two or more designs" in result.output


def test_a_bad_catalog_exits_2_with_its_location(tmp_path: Path) -> None:
    (tmp_path / "parts.yaml").write_text(BAD_CATALOG)
    spec = example(tmp_path)
    for args in (["compare", str(spec), str(ROCE)], ["plan", str(spec), "-o", str(tmp_path / "out")]):
        result = runner.invoke(app, [*args, "--catalog", str(tmp_path / "parts.yaml")])
        assert result.exit_code == 2, result.output
        assert "parts.yaml:3:38: switches.QM9700-64xNDR.wats: unknown key 'wats'" in result.output
    assert not (tmp_path / "out").exists()  # refused before anything was designed or written


def test_the_example_catalog_prints_and_reads_back(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", "--example-catalog"])
    assert result.exit_code == 0 and yaml.safe_load(result.stdout)["placeholder"] is True
    (tmp_path / "parts.yaml").write_text(result.stdout)
    again = runner.invoke(app, ["plan", str(example(tmp_path)), "-o", str(tmp_path / "out"), "--catalog",
                                str(tmp_path / "parts.yaml"), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["cost"]["total"]["unpriced"] == 0


def test_plan_with_a_catalog_prices_bom_csv_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["plan", "-o", str(out), "--catalog", "example"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "growth headroom" in result.stdout and "placeholder numbers, not prices" in result.stdout
    rows = list(csv.DictReader((out / "bom.csv").open()))
    assert all(r["part"] == "PLACEHOLDER" and float(r["price"]) == float(r["unit_price"]) * int(r["count"])
               for r in rows)
    summary = (out / "summary.md").read_text()
    assert "## What one failure costs" in summary and "| storage | leaf | stor-leaf001 | 21 |" in summary
    assert "| compute/leaf_spine |" in summary and "| per GPU (256 GPUs) |" in summary


def test_a_plan_json_from_before_the_full_bom_still_compares(tmp_path: Path) -> None:
    spec = example(tmp_path)
    runner.invoke(app, ["plan", str(spec), "-o", str(tmp_path / "out")])
    data = json.loads((tmp_path / "out" / "plan.json").read_text())
    for plane in data["planes"]:
        del plane["cabling"], plane["nics"]
    data["bom"] = [{"item": "cable", "plane": "compute", "tier": "node_leaf", "model": "400G", "count": 256}]
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = read_plan(tmp_path / "old.json")
    assert sum(b.cables for b in plan_bom(old) if b.item == "cable") == len(old.links)
    result = runner.invoke(app, ["compare", str(tmp_path / "old.json"), str(spec), "--json"])
    assert result.exit_code == 0, result.output


def test_a_model_the_catalog_lacks_is_unpriced_never_zero(tmp_path: Path) -> None:
    catalog = yaml.safe_load(runner.invoke(app, ["compare", "--example-catalog"]).stdout)
    del catalog["switches"]["QM9700-64xNDR"]
    (tmp_path / "parts.yaml").write_text(yaml.safe_dump(catalog))
    result = runner.invoke(app, ["plan", "-o", str(tmp_path / "out"), "--catalog", str(tmp_path / "parts.yaml"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    cost = json.loads(result.stdout)["cost"]
    assert cost["total"]["cost"] is None and cost["total"]["unpriced"] == 2 and cost["per_gpu"] is None
    assert cost["planes"]["storage"]["cost"] is not None  # the planes without the switch stay priced
    rows = [r for r in csv.DictReader((tmp_path / "out" / "bom.csv").open()) if r["model"] == "QM9700-64xNDR"]
    assert [(r["tier"], r["part"], r["price"]) for r in rows] == [("leaf", "unpriced", ""), ("spine", "unpriced", "")]
