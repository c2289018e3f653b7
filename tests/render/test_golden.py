"""Golden files: every target for one node of each group of two examples, byte for byte.
Regenerate after an intended change with GPUNET_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpunet.render import TARGETS
from tests.render.rendered import MANIFEST, actual_manifest, manifest, rendered, targets_of

GOLDEN = Path(__file__).parent.parent / "fixtures" / "render"
EXAMPLES = ("scalable-unit", "small-ethernet")
NO_FILES = {"small-ethernet": ("roce_qos",)}  # no RoCE plane there: nothing to render


def cases() -> list[tuple[str, str]]:
    return [(name, path) for name in EXAMPLES for path in manifest()[name]]


def test_the_manifest_lists_exactly_what_renders() -> None:
    """The parametrisation of every render test comes from the manifest: it must be the truth."""
    actual = actual_manifest()
    if os.environ.get("GPUNET_UPDATE_GOLDEN"):
        MANIFEST.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
    assert manifest() == actual or os.environ.get("GPUNET_UPDATE_GOLDEN")


@pytest.mark.parametrize(("example", "path"), cases())
def test_rendered_file_matches_golden(example: str, path: str) -> None:
    golden = GOLDEN / example / path
    text = rendered(example)[path]
    if os.environ.get("GPUNET_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with GPUNET_UPDATE_GOLDEN=1"
    assert text == golden.read_text()


@pytest.mark.parametrize("example", EXAMPLES)
def test_no_golden_file_is_orphaned(example: str) -> None:
    on_disk = {str(p.relative_to(GOLDEN / example)) for p in (GOLDEN / example).rglob("*") if p.is_file()}
    assert on_disk == set(rendered(example))


def test_every_target_has_golden_files() -> None:
    markers = {"netplan": "netplan/", "networkmanager": "NetworkManager/", "sysctl": "sysctl.d/",
               "nftables": "nftables.d/", "firewalld": "firewalld/", "sshd": "sshd_config.d/", "hosts": "etc/hosts",
               "nccl": "nccl.env", "ssh_config": "admin/ssh_config", "slurm": "slurm/", "ansible": "ansible/",
               "prometheus": "admin/prometheus/", "grafana": "admin/grafana/",
               "clustershell": "admin/clustershell/", "ntp": "etc/chrony/conf.d/",
               "roce_qos": "gpunet-roce-qos", "frr": "/etc/frr/frr.conf", "sonic": "/etc/sonic/config_db.json",
               "nvue": "/nvue.sh"}
    assert set(markers) == set(TARGETS)
    for example in EXAMPLES:
        for target in targets_of(example):
            assert target in NO_FILES.get(example, ()) or any(markers[target] in path for path in rendered(example)), (
                example, target)
