"""`gpunet sim` and `gpunet place` through Typer apps of their own (cli/main.py wires them in LAZY):
what-ifs side by side, the free nodes from Slurm's text, and exit 2 with the valid choices on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from gpunet.cli.place import place_job
from gpunet.cli.sim import sim
from gpunet.spec.examples import example_text

runner = CliRunner()
FIXTURES = Path(__file__).parent.parent / "fixtures"


def app_of(name: str, command: object) -> typer.Typer:
    app = typer.Typer(add_completion=False)
    app.command(name=name)(command)  # type: ignore[arg-type]
    app.command(name="unused")(lambda: None)  # two commands: the name stays on the command line
    return app


SIM, PLACE = app_of("sim", sim), app_of("place", place_job)


def test_sim_json_has_a_column_per_what_if(tmp_path: Path) -> None:
    spec = tmp_path / "su.yaml"
    spec.write_text(example_text("scalable-unit"))
    result = runner.invoke(SIM, ["sim", str(spec), "--sizes", "1G,8G", "--fail", "comp-leaf001", "--place",
                                 "gpu[001-016]", "--oversubscription", "2", "--json"])
    assert result.exit_code == 0, result.output
    reports = json.loads(result.stdout)
    assert [r["scenario"] for r in reports] == ["as planned", "comp-leaf001 down", "on gpu[001-016]", "leaf 2:1"]
    assert [row["bytes"] for row in reports[0]["rows"]] == [1 << 30, 8 << 30]
    assert reports[1]["rows"][-1]["busbw"] < reports[0]["rows"][-1]["busbw"]
    assert reports[2]["nodes"] == 16


def test_sim_table_names_the_bottleneck() -> None:
    result = runner.invoke(SIM, ["sim", "--sizes", "8G"])
    assert result.exit_code == 0, result.output
    assert "busbw GB/s (nccl-tests)" in result.stdout and "comp-leaf" in result.stdout


def test_sim_runs_a_pattern(tmp_path: Path) -> None:
    pattern = tmp_path / "pairs.txt"
    pattern.write_text("# one rail each\ngpu001 gpu002 0\ngpu003 gpu004\n")
    result = runner.invoke(SIM, ["sim", "--collective", "sendrecv", "--pattern", str(pattern), "--sizes", "1G",
                                 "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["algorithm"] == "p2p"


@pytest.mark.parametrize(("args", "needle"), [
    (["--collective", "allreduce"], "all_reduce, all_gather"),
    (["--algorithm", "nvls"], "ring, tree"),
    (["--sizes", "8X"], "K, M, G or T"),
    (["--sizes", "0"], "from 1 byte"),
    (["--nodes", "gpu[001-002],gpu999"], "gpu[001-032]"),
    (["--fail", "comp-leaf099"], "comp-leaf001"),
    (["--fail", "gpu001:ib9"], "cabling.csv"),
    (["--routing", "ecmp"], "hash or spray"),
])
def test_sim_bad_input_exits_2_with_the_choices(args: list[str], needle: str) -> None:
    result = runner.invoke(SIM, ["sim", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_place_reads_free_nodes_from_slurm(tmp_path: Path) -> None:
    listing = tmp_path / "sinfo.txt"
    listing.write_text("PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
                       "gpu*         up   infinite     20   idle gpu[005-024]\n"
                       "gpu*         up   infinite     12  alloc gpu[001-004,025-032]\n")
    result = runner.invoke(PLACE, ["place", "8", "--slurm", str(listing), "--size", "1G", "--json"])
    assert result.exit_code == 0, result.output
    placed = json.loads(result.stdout)
    assert placed["nodes"] == "gpu[005-012]" and placed["units"] == 1
    assert placed["chosen"]["busbw"] >= placed["random"]["busbw"]


@pytest.mark.parametrize(("args", "needle"), [
    (["64"], "ask for 1 to 32"),
    (["4", "--free", "gpu[001-002]"], "does not fit the 2 free"),
    (["2", "--free", "login01,gpu001"], "not on plane compute"),
    (["2", "--slurm", str(FIXTURES / "sinfo" / "arjuna_drng_fail_maint_mix" / "output.txt")], "not on plane"),
    (["2", "--collective", "bcast"], "all_reduce"),
])
def test_place_bad_input_exits_2(args: list[str], needle: str) -> None:
    result = runner.invoke(PLACE, ["place", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output
