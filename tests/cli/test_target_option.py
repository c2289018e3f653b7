"""`--target` is one option wherever it appears (cli/options.py): comma-separated or repeated, an
unknown target refused with exit 2 and the valid ones, its help holding every target there is."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ClusterShell.NodeSet import NodeSet
from typer import main as typer_main
from typer.testing import CliRunner

from gpunet.api import apply as applying
from gpunet.api import plans
from gpunet.cli.main import app
from gpunet.cli.options import APPLY_TARGETS, RENDER_TARGETS

runner = CliRunner()


def _with_target() -> dict[tuple[str, ...], Any]:
    """Every command's --target option, by the command's path (`render`, `apply run`)."""
    top = typer_main.get_command(app)
    found: dict[tuple[str, ...], Any] = {}
    for name in top.list_commands(None):  # type: ignore[attr-defined,arg-type]
        command = top.get_command(None, name)  # type: ignore[attr-defined,arg-type]
        subs = getattr(command, "list_commands", None)
        leaves = [((name, sub), command.get_command(None, sub)) for sub in subs(None)] if subs else [((name,), command)]
        found |= {path: p for path, leaf in leaves for p in leaf.params if "--target" in getattr(p, "opts", ())}
    return found


def test_every_target_option_is_the_shared_one_and_its_help_names_every_target() -> None:
    found = _with_target()
    assert set(found) == {("render",), ("apply", "run")}
    for path, option in found.items():
        assert option.opts == ["--target", "-t"] and option.multiple, path
        assert "comma-separated or repeated" in (option.help or ""), path
    assert ", ".join(plans.TARGETS) == RENDER_TARGETS and RENDER_TARGETS in (found["render",].help or "")
    assert ", ".join(applying.TARGETS) == APPLY_TARGETS and APPLY_TARGETS in (found["apply", "run"].help or "")


@pytest.mark.parametrize("given", [["--target", "netplan,nftables"], ["-t", "netplan", "-t", "nftables"],
                                   ["-t", "netplan, nftables", "--target", "netplan"]])
def test_render_takes_the_comma_and_the_repeated_form(tmp_path: Path, given: list[str]) -> None:
    done = runner.invoke(app, ["render", "-o", str(tmp_path), "--node", "gpu001", *given])
    assert done.exit_code == 0, done.output
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == [
        "nodes/gpu001/etc/netplan/60-gpunet.yaml", "nodes/gpu001/etc/nftables.d/gpunet.nft"]


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """`apply run --dry-run` with no node reached: the targets each run asked for."""
    asked: list[tuple[str, ...]] = []
    reached = SimpleNamespace(nodes=NodeSet)

    def fake_reach(**_: Any) -> tuple[None, None, SimpleNamespace]:
        return None, None, reached

    def fake_dry_run(plan: None, nodes: NodeSet, remote: None, targets: tuple[str, ...]) -> list[Any]:
        asked.append(targets)
        return []

    monkeypatch.setattr(applying, "reach", fake_reach)
    monkeypatch.setattr(applying, "dry_run", fake_dry_run)
    return asked


@pytest.mark.parametrize("given", [["--target", "netplan,sysctl"], ["-t", "netplan", "-t", "sysctl"],
                                   ["-t", " netplan,,sysctl ", "--target", "sysctl"]])
def test_apply_takes_the_comma_and_the_repeated_form(applied: list[tuple[str, ...]], given: list[str]) -> None:
    done = runner.invoke(app, ["apply", "run", "gpu1", "--lab", "zz", "--dry-run", *given])
    assert done.exit_code == 0, done.output
    assert applied == [("netplan", "sysctl")]


def test_apply_without_a_target_applies_the_default_four(applied: list[tuple[str, ...]]) -> None:
    assert runner.invoke(app, ["apply", "run", "gpu1", "--lab", "zz", "--dry-run"]).exit_code == 0
    assert applied == [applying.DEFAULT_TARGETS]


@pytest.mark.parametrize(("command", "known"), [(["render", "--node", "gpu001"], RENDER_TARGETS),
                                                (["apply", "run", "gpu1", "--lab", "zz"], APPLY_TARGETS)])
def test_an_unknown_target_is_bad_input_naming_the_valid_ones(tmp_path: Path, applied: list[tuple[str, ...]],
                                                               command: list[str], known: str) -> None:
    out = ["-o", str(tmp_path)] if command[0] == "render" else []
    done = runner.invoke(app, [*command, *out, "--target", "netplan,bogus"])
    assert done.exit_code == 2
    assert "unknown bogus" in done.output and f"choose from {known}" in " ".join(done.output.split())
    assert applied == [] and not any(tmp_path.iterdir())  # nothing reached, nothing written
