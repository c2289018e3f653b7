"""Start-up (issue 24): `gpunet --help` lists every command without importing the modules of those
that live in their own (cli/commands.py), and `gpunet validate` imports no renderer, catalog or
fleet. What is imported is held here; how long it takes is benchmarks/startup.py's, not a test's
(a loaded machine would fail a timing)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer import main as typer_main
from typer.testing import CliRunner

from gpunet.cli.commands import LAZY
from gpunet.cli.main import ORDER, app
from gpunet.spec.examples import DEFAULT_EXAMPLE, example_text

runner = CliRunner()
GROUP = typer_main.get_command(app)
NAMES = GROUP.list_commands(None)  # type: ignore[attr-defined]
# Never imported by `--help`, nor by `validate` (which needs pydantic, PyYAML and ClusterShell's
# NodeSet, and nothing more of a third party's than typer and rich).
HEAVY = ("numpy", "networkx", "prometheus_client", "bcrypt", "matplotlib", "gpunet.render", "gpunet.decide",
         "gpunet.sim", "gpunet.lab", "gpunet.fleet", "gpunet.api.plans", *{lazy.module for lazy in LAZY.values()})
# `--help` builds no pydantic model and reads no YAML either.
NOT_FOR_HELP = (*HEAVY, "pydantic", "yaml", "ClusterShell", "gpunet.model", "gpunet.api")


def first_paragraph(name: str) -> str:
    command = GROUP.get_command(None, name)  # type: ignore[attr-defined]
    assert command is not None and command.help is not None, name
    return inspect.cleandoc(command.help).split("\n\n")[0]


@pytest.mark.parametrize("name", sorted(LAZY))
def test_the_listed_summary_is_the_first_paragraph_of_the_commands_own_help(name: str) -> None:
    assert LAZY[name].summary == first_paragraph(name)


def test_every_command_is_listed_in_the_missions_order() -> None:
    assert set(LAZY) < set(NAMES)
    assert list(ORDER) == NAMES


def test_help_lists_every_command_with_its_summary() -> None:
    shown = runner.invoke(app, ["--help"], env={"COLUMNS": "1000"})  # Rich: no wrap inside a line
    assert shown.exit_code == 0, shown.output
    listed = [line.strip("│ ").split(None, 1) for line in shown.stdout.splitlines()]
    summaries = {words[0]: words[1] for words in listed if len(words) == 2 and words[0] in NAMES}
    assert list(summaries) == NAMES
    for name in NAMES:  # the first line of it: Rich keeps a summary's own line breaks
        assert summaries[name] == first_paragraph(name).splitlines()[0], name


@pytest.mark.parametrize("name", NAMES)
def test_each_commands_help_works(name: str) -> None:
    shown = runner.invoke(app, [name, "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert f"gpunet {name}" in shown.stdout and first_paragraph(name).split()[0] in shown.stdout


def imported_by(argv: list[str]) -> tuple[int, list[str]]:
    """Run the CLI with argv in a fresh interpreter: its exit code and every module it imported."""
    script = textwrap.dedent(f"""
        import json, sys
        from gpunet.cli.main import app
        try:
            app({argv!r}, prog_name="gpunet")
        except SystemExit as done:
            code = done.code
        print(json.dumps([code, sorted(sys.modules)]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120)
    code, modules = json.loads(done.stdout.splitlines()[-1])
    return code, modules


def among(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_help_imports_no_command_module_and_no_model() -> None:
    code, modules = imported_by(["--help"])
    assert code == 0
    assert among(modules, NOT_FOR_HELP) == []


def test_validate_imports_no_renderer_catalog_fleet_or_numpy(tmp_path: Path) -> None:
    spec = tmp_path / "cluster.yaml"
    spec.write_text(example_text(DEFAULT_EXAMPLE))
    code, modules = imported_by(["validate", str(spec)])
    assert code == 0
    assert among(modules, HEAVY) == []
    assert "gpunet.api.specs" in modules  # what validated it: the test is not vacuous
