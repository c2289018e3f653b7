"""The namespaces' allowed TCP congestion controls while labs are up, on a fake /proc/sys (pure), and
the kernel's own rule that makes it needed (root: a namespace of its own)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from gpunet.lab.congestion import ALLOWED, AVAILABLE, SAVED, permit, restore


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    folder = tmp_path / "proc" / "net/ipv4"
    folder.mkdir(parents=True)
    (folder / "tcp_allowed_congestion_control").write_text("reno bbr\n")
    (folder / "tcp_available_congestion_control").write_text("reno bbr cubic\n")
    return tmp_path / "proc"


def allowed(proc: Path) -> str:
    return (proc / ALLOWED).read_text().strip()


def test_the_first_lab_adds_the_plans_choice_and_the_last_puts_the_hosts_list_back(tmp_path: Path,
                                                                                   proc: Path) -> None:
    assert permit(tmp_path, {"cubic"}, proc) == ["cubic"]
    assert allowed(proc) == "reno bbr cubic"
    assert permit(tmp_path, {"cubic"}, proc) == []  # a second lab: already allowed
    assert json.loads((tmp_path / SAVED).read_text()) == ["reno", "bbr"]  # the host's, not the widened list
    assert restore(tmp_path, proc) == ["reno", "bbr"]
    assert allowed(proc) == "reno bbr" and not (tmp_path / SAVED).exists()
    assert restore(tmp_path, proc) is None  # nothing saved: nothing written


def test_an_algorithm_the_kernel_lacks_or_already_allowed_is_not_added(tmp_path: Path, proc: Path) -> None:
    assert permit(tmp_path, {"dctcp", "bbr", "reno"}, proc) == []
    assert allowed(proc) == "reno bbr"


@pytest.mark.parametrize("saved", ['["reno", "bbr; reboot"]', '"reno bbr"', "[]", "not json", '["' + "x" * 16 + '"]'])
def test_a_tampered_saved_list_is_removed_and_nothing_is_written_from_it(tmp_path: Path, proc: Path,
                                                                         saved: str) -> None:
    permit(tmp_path, {"cubic"}, proc)
    (tmp_path / SAVED).write_text(saved)
    assert restore(tmp_path, proc) is None
    assert allowed(proc) == "reno bbr cubic" and not (tmp_path / SAVED).exists()


@pytest.mark.lab
def test_a_namespace_may_set_only_an_allowed_algorithm(tmp_path: Path) -> None:
    """Why the lab needs it: the kernel refuses a namespace a default outside the allowed list."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a network namespace of its own")
    host = Path("/proc/sys")
    available = (host / AVAILABLE).read_text().split()
    outside = [n for n in available if n not in (host / ALLOWED).read_text().split()]
    if not outside:
        pytest.skip(f"every algorithm this kernel has ({' '.join(available)}) is allowed: nothing is refused")
    done = subprocess.run(["unshare", "--net", "sysctl", "-w", f"net.ipv4.tcp_congestion_control={outside[0]}"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode != 0 and "Operation not permitted" in done.stderr, done
