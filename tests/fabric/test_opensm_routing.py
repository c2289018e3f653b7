"""Which routing engine opensm used, read from its own log: two logs recorded from the real
opensm 3.3.23 on ibsim 0.10 here (tests/fixtures/opensm_log/*/SOURCE.md), no simulator needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.cli import ibsim as ibsim_cli
from gpunet.cli.main import app
from gpunet.lab import ibsim
from gpunet.lab.ibsim import RoutingUsed, routing_of_log
from gpunet.lab.ibsim_state import IbsimState

LOGS = Path(__file__).parent.parent / "fixtures" / "opensm_log"
REFUSED = ("Different number of downward port groups on switches: GUID 0x0000000000200018, LID 97, Index 1.0.0 - "
           "16 port groups GUID 0x000000000020001a, LID 105, Index 1.1.0 - 8 port groups")


def _log(name: str) -> str:
    return (LOGS / name / "opensm.log").read_text()


def test_ftree_accepted() -> None:
    assert routing_of_log(_log("ftree_accepted"), "ftree,minhop") == RoutingUsed(engine="ftree", asked="ftree,minhop")


def test_ftree_refused_names_the_fallback_and_ftrees_own_reason_not_the_generic_one() -> None:
    used = routing_of_log(_log("ftree_refused_minhop"), "ftree,minhop")
    assert (used.engine, used.ftree_refused) == ("minhop", REFUSED)
    assert str(used) == f"minhop (ftree refused: {REFUSED})"


def test_before_the_first_sweep_no_engine_is_claimed() -> None:
    before = _log("ftree_accepted").split("osm_ucast_mgr_process")[0]
    assert str(routing_of_log(before, "updn")) == "none yet"


@pytest.mark.parametrize("as_json", [False, True])
def test_ibsim_status_says_the_engine_used_and_the_engines_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  as_json: bool) -> None:
    (tmp_path / "opensm.log").write_text(_log("ftree_refused_minhop"))
    state = IbsimState(sim_id="s8", plane="compute", routing="ftree,minhop", sm_node="H-gpu001-1", servers=768)
    monkeypatch.setattr(ibsim, "sim_dir", lambda sim_id: tmp_path)
    monkeypatch.setattr(ibsim_cli.labs, "ibsim_status", lambda sim_id: state)
    done = CliRunner().invoke(app, ["ibsim", "status", "--ibsim", "s8", *(["--json"] if as_json else [])])
    assert done.exit_code == 0, done.output
    if as_json:
        shown = json.loads(done.stdout)
        assert (shown["routing"], shown["routing_engine"], shown["ftree_refused"]) == ("ftree,minhop", "minhop",
                                                                                      REFUSED)
        assert shown["routing_used"] == f"minhop (ftree refused: {REFUSED})"
    else:
        line = done.stdout.splitlines()[0]  # one line, unwrapped: piped output is not cut at 80 columns
        assert line.endswith(f"opensm (-R ftree,minhop) routing minhop (ftree refused: {REFUSED})"), line
