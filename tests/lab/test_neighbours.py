"""The host's neighbour-table limits while labs are up, on a fake /proc/sys (pure)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunet.lab.neighbours import LAB_LIMITS, SAVED, raise_limits, restore_limits


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    folder = tmp_path / "proc" / "net/ipv4/neigh/default"
    folder.mkdir(parents=True)
    (folder / "gc_thresh2").write_text("512\n")
    (folder / "gc_thresh3").write_text("1024\n")
    return tmp_path / "proc"


def limits(proc: Path) -> dict[str, int]:
    folder = proc / "net/ipv4/neigh/default"
    return {key: int((folder / key).read_text()) for key in ("gc_thresh2", "gc_thresh3")}


def test_the_first_lab_raises_the_limits_and_the_last_puts_the_hosts_back(tmp_path: Path, proc: Path) -> None:
    assert raise_limits(tmp_path, proc) == {"gc_thresh3": 1024, "gc_thresh2": 512}
    assert limits(proc) == {"gc_thresh2": LAB_LIMITS["gc_thresh2"], "gc_thresh3": LAB_LIMITS["gc_thresh3"]}
    assert raise_limits(tmp_path, proc) == {}  # a second lab: nothing more to raise
    assert json.loads((tmp_path / SAVED).read_text()) == {"gc_thresh3": 1024, "gc_thresh2": 512}  # not overwritten
    assert restore_limits(tmp_path, proc) == {"gc_thresh2": 512, "gc_thresh3": 1024}
    assert limits(proc) == {"gc_thresh2": 512, "gc_thresh3": 1024}
    assert not (tmp_path / SAVED).exists()
    assert restore_limits(tmp_path, proc) == {}  # nothing saved: nothing written


def test_higher_limits_the_host_already_has_are_never_lowered(tmp_path: Path, proc: Path) -> None:
    folder = proc / "net/ipv4/neigh/default"
    (folder / "gc_thresh3").write_text("200000")
    assert raise_limits(tmp_path, proc) == {"gc_thresh2": 512}
    assert limits(proc) == {"gc_thresh2": LAB_LIMITS["gc_thresh2"], "gc_thresh3": 200000}
    restore_limits(tmp_path, proc)
    assert limits(proc) == {"gc_thresh2": 512, "gc_thresh3": 200000}


@pytest.mark.parametrize("saved", ['{"gc_thresh2": "1; reboot", "gc_thresh3": 1024}', '{"gc_thresh2": 512}',
                                   '{"gc_thresh2": -1, "gc_thresh3": 1024}', '{"gc_thresh2": true, "gc_thresh3": 1}',
                                   '{"gc_thresh2": 512, "gc_thresh3": 1024, "../x": 1}', "not json"])
def test_a_tampered_saved_file_is_removed_and_nothing_is_written_from_it(tmp_path: Path, proc: Path,
                                                                          saved: str) -> None:
    raise_limits(tmp_path, proc)
    (tmp_path / SAVED).write_text(saved)
    assert restore_limits(tmp_path, proc) == {}
    assert limits(proc) == {"gc_thresh2": LAB_LIMITS["gc_thresh2"], "gc_thresh3": LAB_LIMITS["gc_thresh3"]}
    assert not (tmp_path / SAVED).exists()
