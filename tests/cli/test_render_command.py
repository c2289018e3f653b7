"""`gpunet render` through the real Typer app."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpunet.cli.main import app

runner = CliRunner()


def render(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = runner.invoke(app, ["render", *args, "--json"])
    return result.exit_code, json.loads(result.stdout) if result.exit_code == 0 else {"output": result.output}


def test_render_writes_node_and_admin_trees_and_a_rerun_changes_nothing(tmp_path: Path) -> None:
    code, first = render("-o", str(tmp_path))
    assert code == 0 and first["changed"] and len(first["changed"]) == first["files"]
    assert (tmp_path / "nodes/gpu001/etc/netplan/60-gpunet.yaml").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "nodes/gpu001/etc/hosts").read_text() == (tmp_path / "nodes/stor04/etc/hosts").read_text()
    assert (tmp_path / "admin/ansible/site.yml").exists() and (tmp_path / "admin/slurm/topology.conf").exists()
    code, second = render("-o", str(tmp_path))
    assert (code, second["changed"], second["files"]) == (0, [], first["files"])


def test_render_a_plan_json_for_some_nodes_and_targets(tmp_path: Path) -> None:
    runner.invoke(app, ["plan", "-o", str(tmp_path / "plan")])
    code, out = render(str(tmp_path / "plan/plan.json"), "-o", str(tmp_path / "r"), "--node", "gpu[001-002]",
                       "--target", "netplan,nftables")
    assert code == 0
    written = sorted(str(p.relative_to(tmp_path / "r")) for p in (tmp_path / "r").rglob("*") if p.is_file())
    assert written == ["nodes/gpu001/etc/netplan/60-gpunet.yaml", "nodes/gpu001/etc/nftables.d/gpunet.nft",
                       "nodes/gpu002/etc/netplan/60-gpunet.yaml", "nodes/gpu002/etc/nftables.d/gpunet.nft"]
    assert out["files"] == 4


def test_render_refuses_unknown_targets_and_nodes(tmp_path: Path) -> None:
    bad_target = runner.invoke(app, ["render", "-o", str(tmp_path), "--target", "netplan,bogus"])
    assert bad_target.exit_code == 2 and "--target: unknown bogus" in bad_target.output
    bad_node = runner.invoke(app, ["render", "-o", str(tmp_path), "--node", "gpu[900-901]"])
    assert bad_node.exit_code == 2 and "not in the plan: gpu[900-901]" in bad_node.output
    assert not any(tmp_path.iterdir())
