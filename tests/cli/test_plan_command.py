"""`gpunet plan`, `examples`, `init` and `validate` through the real Typer app."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.model.io import read_plan
from gpunet.spec.examples import EXAMPLES, SCALE_EXAMPLES

runner = CliRunner()


def test_plan_without_spec_designs_the_scalable_unit(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-o", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    head = json.loads(result.stdout)
    assert head["nodes"] == 38 and head["gpus"] == 32 * 8
    # management 1 + oob 1 + compute 8 rail leaves + storage 2 leaves; compute 4 spines +
    # storage 2 (2 x 22 uplinks of 200G-NIC leaves spread over 2 spines).
    assert head["switches"] == {"leaf": 12, "spine": 6, "core": 0}
    assert head["cables"]["node_leaf"] == 32 * 8 + 36 * 2 + 38 + 38
    assert head["oversubscription"]["compute"] == {"leaf": 1.0}
    assert head["bisection_gbps"]["compute"] == 32 * 8 * 400 / 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "addresses.csv", "bom.csv", "cabling.csv", "plan.json", "summary.md", "topology.svg"]


def test_second_run_changes_nothing(tmp_path: Path) -> None:
    runner.invoke(app, ["plan", "-o", str(tmp_path)])
    again = runner.invoke(app, ["plan", "-o", str(tmp_path), "--json"])
    assert json.loads(again.stdout)["changed"] == []


def test_outputs_agree_with_plan_json(tmp_path: Path) -> None:
    runner.invoke(app, ["plan", "-o", str(tmp_path)])
    plan = read_plan(tmp_path / "plan.json")
    cables = list(csv.DictReader((tmp_path / "cabling.csv").open()))
    assert len(cables) == len(plan.links)
    addresses = list(csv.DictReader((tmp_path / "addresses.csv").open()))
    assert {row["hostname"] for row in addresses} >= {"gpu001", "gpu001-ib3", "gpu001-stor", "gpu001-bmc"}
    bom = {(r["item"], r["plane"], r["tier"]): int(r["count"]) for r in csv.DictReader((tmp_path / "bom.csv").open())}
    assert bom["switch", "compute", "leaf"] == 8 and bom["cable", "compute", "node_leaf"] == 256
    assert "| compute | infiniband | rail-optimized | 2 |" in (tmp_path / "summary.md").read_text()


def test_plan_human_output_names_every_plane(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "-o", str(tmp_path)], terminal_width=200)
    assert result.exit_code == 0
    for plane in ("management", "oob", "compute", "storage"):
        assert plane in result.stdout


def test_examples_and_init_round_trip(tmp_path: Path) -> None:
    listed = json.loads(runner.invoke(app, ["examples", "--json"]).stdout)
    assert set(listed) == set(EXAMPLES) | set(SCALE_EXAMPLES)
    for name in EXAMPLES:  # the scale examples: tests/spec/test_scale_example.py
        target = tmp_path / f"{name}.yaml"
        assert runner.invoke(app, ["init", "--example", name, "-o", str(target)]).exit_code == 0
        check = runner.invoke(app, ["validate", str(target), "--json"])
        assert check.exit_code == 0, check.output
        assert json.loads(check.stdout)["valid"] is True


def test_init_refuses_to_overwrite_and_unknown_examples(tmp_path: Path) -> None:
    target = tmp_path / "c.yaml"
    target.write_text("mine")
    assert runner.invoke(app, ["init", "--example", "one-server", "-o", str(target)]).exit_code == 2
    assert target.read_text() == "mine"
    assert runner.invoke(app, ["init", "--example", "nope", "-o", str(tmp_path / "x.yaml")]).exit_code == 2


def test_plan_from_a_spec_file_and_a_corrupt_previous_plan(tmp_path: Path) -> None:
    spec = tmp_path / "c.yaml"
    runner.invoke(app, ["init", "--example", "two-servers-direct", "-o", str(spec)])
    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.json").write_text("{not json")
    bad = runner.invoke(app, ["plan", str(spec), "-o", str(out)])
    assert bad.exit_code == 2 and "cannot read plan" in bad.output
    good = runner.invoke(app, ["plan", str(spec), "-o", str(out), "--fresh", "--json"])
    assert good.exit_code == 0, good.output
    assert json.loads(good.stdout)["cables"]["direct"] == 1


def test_flows_json_and_tables_narrow_and_wide(tmp_path: Path) -> None:
    flows = json.loads(runner.invoke(app, ["flows", "--json"]).stdout)
    assert {"ssh", "slurmctld", "srun", "job-bootstrap", "ntp", "node-exporter"} <= {f["service"] for f in flows}
    for columns, reasons in ((80, False), (160, True)):
        text = runner.invoke(app, ["flows"], env={"COLUMNS": str(columns)}).stdout
        assert all(len(line) <= columns for line in text.splitlines())
        assert "…" not in text and "198.18.0.250/32" in text and "60001-63000" in text
        assert ("Prometheus scrapes" in text) == reasons


def test_a_piped_table_keeps_each_row_on_one_line() -> None:
    """Without a terminal (and no COLUMNS), Rich would wrap at 80 columns; a piped table is as wide
    as its rows, so grep finds a row whole."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "gpunet", "examples"], capture_output=True, text=True, env=env,
                          check=True, timeout=60)
    rows = [line for line in done.stdout.splitlines() if "two-servers-direct" in line]
    assert len(rows) == 1 and "Two GPU servers joined by a direct 100G RoCE cable." in rows[0]
    assert max(len(line) for line in done.stdout.splitlines()) > 80
