"""The Plan's node sets: `@role:gpu`, `@leaf:NAME`, `@rail:N`, `@plane:NAME`, `@GROUP`, for the
fleet, the Ansible inventory and ClusterShell's own groups file (read by the real `nodeset`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpunet.api import plan_spec
from gpunet.errors import UsageError
from gpunet.fleet.groups import resolve_nodes
from gpunet.model.inventory import node_groups
from gpunet.render.clustershell import render_clustershell_groups

PLAN = plan_spec(None)  # the scalable unit: gpu[001-032] on 8 rail leaves, stor[01-04], login[01-02]


@pytest.mark.parametrize(("pattern", "expected"), [
    ("@role:storage", "stor[01-04]"),
    ("@gpu!gpu[001-030]", "gpu[031-032]"),
    ("@leaf:comp-leaf003", "gpu[001-032]"),  # rail 2's leaf: every node of the unit has rail 2
    ("@rail:7&gpu[001-002]", "gpu[001-002]"),
    ("@plane:storage!@role:gpu", "stor[01-04]"),
    ("gpu[001-002],login01", "gpu[001-002],login01"),
])
def test_plan_groups_resolve_like_clustershell_groups(pattern: str, expected: str) -> None:
    assert str(resolve_nodes(pattern, PLAN)) == expected


@pytest.mark.parametrize(("pattern", "message"), [
    ("@switch:x", "bad NodeSet '@switch:x'.*groups: @role:NAME"),
    ("@role:nobody", "names no node"),
    ("gpu[", "missing bracket"),
])
def test_bad_node_sets_are_usage_errors(pattern: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        resolve_nodes(pattern, PLAN)


def test_a_rail_optimized_node_is_under_every_rail_leaf() -> None:
    leaves = node_groups(PLAN)["leaf"]
    compute_leaves = [name for name in leaves if name.startswith("comp-leaf")]
    assert len(compute_leaves) == 8 and all("gpu001" in leaves[name] for name in compute_leaves)


@pytest.mark.skipif(shutil.which("nodeset") is None, reason="ClusterShell's nodeset CLI is missing")
def test_the_rendered_groups_file_is_read_by_clustershell(tmp_path: Path) -> None:
    (tmp_path / "groups.d").mkdir()
    (tmp_path / "groups.d" / "gpunet.yaml").write_text(render_clustershell_groups(PLAN))
    (tmp_path / "groups.conf").write_text(f"[Main]\ndefault: group\nautodir: {tmp_path / 'groups.d'}\n")
    env = {"CLUSTERSHELL_CFGDIR": str(tmp_path), "PATH": "/usr/bin:/bin:" + str(Path(shutil.which("nodeset")).parent)}
    for pattern in ("@role:storage", "@leaf:comp-leaf003", "@gpu!gpu[001-030]"):
        done = subprocess.run(["nodeset", "-f", pattern], capture_output=True, text=True, env=env, check=True)
        assert done.stdout.strip() == str(resolve_nodes(pattern, PLAN)), pattern
