"""One width rule for every table off a terminal: piped (CliRunner is no terminal), a table is as
wide as its widest row, never cut with '…' or folded to Rich's default 80 columns."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.cli import localize as localize_cli
from gpunet.cli.main import app
from gpunet.localize.report import LocalizeReport, PlaneSummary, Suspect
from gpunet.model.io import read_plan
from gpunet.spec.examples import example_text
from tests.cli.test_cabling_command import write_tables

CLI = Path(localize_cli.__file__).parent
runner = CliRunner()


def _tables_printed_directly(source: str) -> list[str]:
    """Names bound to a `Table(...)` that are handed to some `.print(...)` instead of print_table."""
    tree = ast.parse(source)
    tables = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
              and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "Table"
              for target in node.targets if isinstance(target, ast.Name)}
    return [arg.id for node in ast.walk(tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr == "print"
            for arg in node.args if isinstance(arg, ast.Name) and arg.id in tables]


@pytest.mark.parametrize("module", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_every_table_goes_through_the_one_width_rule(module: Path) -> None:
    assert _tables_printed_directly(module.read_text()) == []


def test_the_guard_sees_a_table_printed_directly() -> None:
    assert _tables_printed_directly("t = Table('a')\nstdout.print(t)\nprint_table(t)\n") == ["t"]


def test_cabling_findings_piped_are_whole_lines(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(example_text("small-ethernet"))
    assert runner.invoke(app, ["plan", str(tmp_path / "cluster.yaml"), "-o", str(tmp_path / "p")]).exit_code == 0
    write_tables(read_plan(tmp_path / "p" / "plan.json"), tmp_path / "lldp", {"compute"}, swap=(0, 5))
    done = runner.invoke(app, ["cabling", "check", "--plan", str(tmp_path / "p" / "plan.json"),
                               "--lldp-dir", str(tmp_path / "lldp"), "--plane", "compute"])
    assert done.exit_code == 1, done.output
    fix = "swap the cables in comp-leaf001:1 and comp-leaf001:6 (or, the same, in node01:ens1f0 and node06:ens1f0)"
    assert any(fix in line for line in done.stdout.splitlines()), done.stdout
    assert "…" not in done.stdout


def test_localize_tables_piped_keep_long_names_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    plane = "storage-plane-with-a-name-longer-than-any-terminal-column-would-hold-0123456789"
    cable = "rack17-chassis03-leaf-switch-0042:swp33s1 rack17-chassis03-spine-switch-0007:swp5s0"
    report = LocalizeReport(
        planes=(PlaneSummary(plane=plane, flows=96, learned=96, packets=9600, lost=12, cables=40, covered=40),),
        suspects=(Suspect(cable=cable, plane=plane, source="probing", confidence=0.9, evidence=("12 of 96 flows lost",),
                          fix="replace the optic at rack17-chassis03-leaf-switch-0042:swp33s1 then re-run localize"),))
    monkeypatch.setattr(localize_cli, "locate", lambda *args, **kwargs: report)
    done = runner.invoke(app, ["localize", "--lab", "a"])
    assert done.exit_code == 1, done.output
    lines = done.stdout.splitlines()
    assert "…" not in done.stdout
    assert any(plane in line and "40/40" in line for line in lines), done.stdout
    assert any(cable.replace(" ", " <-> ") in line and report.suspects[0].fix in line for line in lines)
