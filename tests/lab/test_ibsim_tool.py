"""run_tool against a stand-in `ibsim-run` that crashes the way ibsim's umad2sim preload now and
then does (SIGSEGV): the tool is run once more; an ordinary failure is returned as it is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpunet.lab import ibsim
from gpunet.lab.ibsim_state import IbsimState

STAND_IN = """#!/bin/sh
count=$(cat runs 2>/dev/null || echo 0)
echo $((count + 1)) > runs
if [ "$count" -lt "$CRASHES" ]; then kill -SEGV $$; fi
echo "ran $* at $IBSIM_SOCKNAME"
exit "$EXIT"
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ibsim-run").write_text(STAND_IN)
    (bin_dir / "ibsim-run").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    state = IbsimState(sim_id="zz", plane="compute", routing="ftree", sm_node="H-gpu1-mlx5_0", servers=1)
    monkeypatch.setattr(ibsim, "read_sim", lambda sim_id: state)
    monkeypatch.setattr(ibsim, "sim_dir", lambda sim_id: tmp_path)
    return tmp_path


# (crashes before it runs, its exit code) -> (times run, the return code run_tool gives)
CASES = [((0, 0), (1, 0)), ((1, 0), (2, 0)), ((2, 0), (2, -11)), ((0, 3), (1, 3))]


@pytest.mark.parametrize(("stand_in_does", "expected"), CASES)
def test_a_tool_the_preload_crashed_runs_once_more(stand_in: Path, monkeypatch: pytest.MonkeyPatch,
                                                  stand_in_does: tuple[int, int], expected: tuple[int, int]) -> None:
    crashes, exit_code = stand_in_does
    runs, returncode = expected
    monkeypatch.setenv("CRASHES", str(crashes))
    monkeypatch.setenv("EXIT", str(exit_code))
    done = ibsim.run_tool("zz", ["ibqueryerrors"], timeout=30)
    assert (stand_in / "runs").read_text().strip() == str(runs)
    assert done.returncode == returncode
    assert (done.stdout == "ran ibqueryerrors at gpunet-ib-zz\n") == (returncode >= 0)
