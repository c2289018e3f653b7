"""One vocabulary, one error shape, one exit-code table (README, "Options and exit codes"): every
command given bad input under --json exits 2 with a JSON error body; gpunet that could not look
exits 3, not 1; old option spellings still work and say so."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer import main as typer_main
from typer.testing import CliRunner

from gpunet.cli.main import LAZY, app
from gpunet.cli.options import modernize
from gpunet.lab.faults import apply_fault, heal
from tests.labs import SharedLabs

runner = CliRunner()
SRC = Path(__file__).resolve().parents[2] / "src" / "gpunet"


def leaf_commands() -> list[list[str]]:
    """Every command path the CLI has (`lab up`, `fleet copy`, `doctor` ...)."""
    group = typer_main.get_command(app)
    paths: list[list[str]] = []
    for name in group.list_commands(None):  # type: ignore[attr-defined,arg-type]
        command = group.get_command(None, name)  # type: ignore[attr-defined,arg-type]
        subs = getattr(command, "list_commands", None)
        paths += [[name, sub] for sub in subs(None)] if subs else [[name]]
    return paths


COMMANDS = leaf_commands()


def test_the_cli_has_every_family() -> None:
    assert {path[0] for path in COMMANDS} >= {"validate", "plan", "render", "flows", "lab", "fleet", "apply", "doctor",
                                              "bench", "cabling", "localize", "exporter", "ibsim", "compare", *LAZY}


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_an_unknown_option_under_json_is_exit_2_with_a_json_body(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--json", "--no-such-option"])
    assert result.exit_code == 2, result.output
    body = json.loads(result.stdout)
    assert body["error"] == "UsageError" and body["exit_code"] == 2
    # the first thing wrong: the unknown option, --json itself where the command prints no result of
    # its own (exec, attach ...), or a required option missing where unknown ones pass to a tool (ibsim run)
    assert re.search(r"--no-such-option|--json|Missing option", body["problems"][0]["message"]), body


BAD_INPUT = [
    ["validate", "/nonexistent/cluster.yaml"],
    ["plan", "/nonexistent/cluster.yaml"],
    ["render", "/nonexistent/plan.json"],
    ["flows", "/nonexistent/plan.json"],
    ["compare", "/nonexistent/a.yaml"],
    ["init", "--example", "no-such-example"],
    ["lab", "status", "--lab", "../.."],
    ["lab", "fault", "gpu1:eth0", "--lab", "zq9x", "--mtu", "1400", "--down"],
    ["ibsim", "status", "--ibsim", "zq9x"],
    ["fleet", "run", "gpu[", "--plan", "/nonexistent/plan.json"],
    ["doctor", "--plan", "/nonexistent/plan.json"],
    ["doctor", "gpu[1-2", "--lab", "zq9x"],
    ["apply", "run", "gpu1", "--lab", "zq9x"],
    ["bench", "run", "--lab", "zq9x", "--tool", "no-such-tool"],
    ["bench", "history", "--db", "/nonexistent/bench.sqlite"],
    ["cabling", "check"],
    ["localize"],
    ["exporter", "--plan", "/nonexistent/plan.json"],
]


@pytest.mark.parametrize("command", BAD_INPUT, ids=[" ".join(c[:2]) for c in BAD_INPUT])
def test_bad_input_is_exit_2_with_a_json_error_body(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--json"])
    assert result.exit_code == 2, result.output
    body = json.loads(result.stdout)
    assert body["exit_code"] == 2 and body["problems"] and all(p["message"] for p in body["problems"])


def test_json_is_declared_once_and_so_are_plan_and_lab() -> None:
    """`grep` finds one declaration each of --json, --plan, --lab: every command takes them from
    cli/options.py."""
    declared = {flag: [str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
                       if re.search(rf'Option\(\s*"{flag}"', p.read_text())] for flag in ("--json", "--plan", "--lab")}
    assert declared == {"--json": ["cli/options.py"], "--plan": ["cli/options.py"], "--lab": ["cli/options.py"]}


def test_every_command_that_prints_takes_json() -> None:
    silent = {("lab", "exec"), ("lab", "ssh-config"), ("ibsim", "run"), ("fleet", "attach"), ("exporter",)}
    for command in COMMANDS:
        if tuple(command) in silent:
            continue
        shown = runner.invoke(app, [*command, "--help"], terminal_width=200)
        assert "--json" in shown.stdout, command


def test_old_spellings_work_for_a_release_and_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert modernize(["lab", "status", "--id", "a"]) == ["lab", "status", "--lab", "a"]
    assert modernize(["ibsim", "down", "--id=b"]) == ["ibsim", "down", "--ibsim=b"]
    assert modernize(["doctor", "--fleet", "gpu[1-4]", "--ssh-lab", "a"]) == ["doctor", "gpu[1-4]", "--lab", "a"]
    assert modernize(["cabling", "check", "--nodes", "gpu1", "--plan", "p.json"]) == [
        "cabling", "check", "gpu1", "--plan", "p.json"]
    # after `--`, the command's own words are never touched
    assert modernize(["fleet", "run", "x", "--lab", "a", "--", "tool", "--ssh-lab"])[-1] == "--ssh-lab"
    said = capsys.readouterr().err
    assert "--id is deprecated, use --lab" in said and "--fleet is deprecated, use the NODES argument" in said


@pytest.mark.lab
def test_an_unreachable_lab_node_exits_3_and_says_so_in_json(shared_labs: SharedLabs) -> None:
    lab = shared_labs.get("small").lab_id
    apply_fault(lab, "gpu8:eth0", "down")
    try:
        done = subprocess.run([sys.executable, "-m", "gpunet", "fleet", "run", "gpu[7-8]", "--lab", lab, "--json",
                               "--connect-timeout", "10", "--", "true"], capture_output=True, text=True, timeout=120,
                              check=False)
    finally:
        heal(lab)
    assert done.returncode == 3, done.stderr  # gpu8 could not be reached, gpu7 ran fine: not a finding
    groups = {g["nodes"]: g for g in json.loads(done.stdout)["groups"]}
    assert groups["gpu7"]["rc"] == 0 and groups["gpu8"]["rc"] in (None, 255)
