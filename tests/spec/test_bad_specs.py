"""Broken specs: each fixture folder under tests/fixtures/bad_specs/<case>/ holds a spec.yaml and
an expected.json ({"line", "message_contains", "hint_contains"}). `gpunet validate` must exit 2 and
print file:line: with the message and a hint on that line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.cli.main import app

BAD_SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "bad_specs"
CASES = sorted(p for p in BAD_SPECS.iterdir() if p.is_dir())
runner = CliRunner()


def _expected(case: Path) -> dict[str, object]:
    expected: dict[str, object] = json.loads((case / "expected.json").read_text())
    return expected


def test_there_are_at_least_20_cases() -> None:
    assert len(CASES) >= 20
    for case in CASES:
        assert (case / "spec.yaml").is_file() and (case / "expected.json").is_file(), case.name


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_spec_is_located_with_a_hint(case: Path) -> None:
    expected = _expected(case)
    spec = str(case / "spec.yaml")
    result = runner.invoke(app, ["validate", spec])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    where = f"{spec}:{expected['line']}:"
    assert where in result.output, result.output
    located = next(line for line in result.output.splitlines() if where in line)
    message, _, hint = located.partition(" (hint: ")
    assert str(expected["message_contains"]) in message, located
    assert str(expected["hint_contains"]) in hint, located


def test_json_lists_located_problems() -> None:
    case = BAD_SPECS / "bad-nodeset"
    result = runner.invoke(app, ["validate", "--json", str(case / "spec.yaml")])
    assert result.exit_code == 2, result.output
    body = json.loads(result.stdout)
    assert body["error"] == "SpecError"
    # one problem only: the failed group must not also report `groups` as empty
    assert [(p["line"], p["path"]) for p in body["problems"]] == [(9, ["groups", 0, "nodes"])]
    problem = body["problems"][0]
    assert problem["file"] == str(case / "spec.yaml") and problem["column"] == 5
    assert "bad NodeSet" in problem["message"] and problem["hint"]


def test_python_m_gpunet_exits_2_without_traceback() -> None:
    spec = BAD_SPECS / "unknown-key-typo" / "spec.yaml"
    done = subprocess.run([sys.executable, "-m", "gpunet", "validate", str(spec)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{spec}:7:" in done.stderr and "did you mean 'gateway'?" in done.stderr


def test_problem_text_is_not_read_as_rich_markup(tmp_path: Path) -> None:
    spec = tmp_path / "cluster.yaml"
    spec.write_text((BAD_SPECS / "unknown-key-typo" / "spec.yaml").read_text().replace("gatway", '"[/x]"'))
    result = runner.invoke(app, ["validate", str(spec)])
    assert result.exit_code == 2 and "unknown key '[/x]'" in result.output
