"""Detached runs on this machine through the local exec transport: tmux, setsid and (through a
recording stand-in, there is no systemd here) systemd-run; what status, logs and stop read."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet
from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.errors import UsageError
from gpunet.fleet import ClusterShellRunner, local_runner
from gpunet.fleet.detach import attach_argv, check_run, follow_output, run_status, start_detached, stop_run
from gpunet.fleet.runs import detach_here

HERE = NodeSet("here")
JOB = ["sh", "-c", "echo begin; sleep 1; echo end >&2; exit 3"]


def _states(tmp_path: Path, via: str) -> tuple[str, int | None, str, str]:
    runner = local_runner()
    started = start_detached(runner, HERE, "job", JOB, state_dir=str(tmp_path / "runs"), via=via)
    assert started.states["here"].state == "running" and started.states["here"].via == via
    done = run_status(runner, HERE, "job", state_dir=str(tmp_path / "runs"), wait=20, lines=-1).states["here"]
    return done.state, done.rc, done.output, done.via


@pytest.mark.parametrize("via", ["setsid", "tmux"])
def test_a_detached_run_records_its_output_and_exit_status(tmp_path: Path, via: str) -> None:
    if via == "tmux" and shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (.ci/run installs it)")
    assert _states(tmp_path, via) == ("done", 3, "begin\nend", via)


def test_without_tmux_or_systemd_a_supervisor_is_setsid(tmp_path: Path) -> None:
    """`auto` on a node without tmux and without systemd (a lab namespace, a container)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "cat", "date", "mkdir", "rm", "mv", "tee", "sleep", "setsid", "kill", "id", "tail", "stat",
                 "cksum", "cut"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool) or "")
    runner = ClusterShellRunner(transport="exec", template=f"env PATH={bin_dir} sh -c %c")
    started = start_detached(runner, HERE, "job", ["echo", "hi"], state_dir=str(tmp_path / "runs"))
    assert started.states["here"].via == "setsid"
    assert run_status(runner, HERE, "job", state_dir=str(tmp_path / "runs"), wait=10).states["here"].output == "hi"


def test_systemd_run_gets_a_named_transient_unit(tmp_path: Path) -> None:
    """No systemd here: a stand-in systemd-run records its arguments and starts the supervisor
    with setsid, as the unit would; gpunet's side (the unit, the files it reads back) is real."""
    bin_dir, log = tmp_path / "bin", tmp_path / "systemd-run.args"
    bin_dir.mkdir()
    shim = bin_dir / "systemd-run"
    shim.write_text(f'#!/bin/sh\necho "$@" > {log}\n'
                    'while [ $# -gt 0 ]; do case $1 in --unit|-E) shift 2 ;; --*) shift ;; *) break ;; esac; done\n'
                    'exec setsid -f "$@" </dev/null >/dev/null 2>&1\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    runner = ClusterShellRunner(transport="exec", template=f"env PATH={bin_dir}:{os.environ['PATH']} sh -c %c")
    start_detached(runner, HERE, "train-7", ["echo", "hi"], state_dir=str(tmp_path / "runs"), via="systemd")
    done = run_status(runner, HERE, "train-7", state_dir=str(tmp_path / "runs"), wait=10).states["here"]
    assert (done.state, done.rc, done.via, done.output) == ("done", 0, "systemd", "hi")
    args = log.read_text().split()
    assert args[:5] == ["--quiet", "--collect", "--unit", "gpunet-run-train-7", "--same-dir"]
    assert args[-3:] == ["sh", f"{tmp_path}/runs/train-7/here/run.sh", f"{tmp_path}/runs/train-7/here"]


def test_stop_ends_the_whole_process_group_and_says_so(tmp_path: Path) -> None:
    runner, where = local_runner(), str(tmp_path / "runs")
    start_detached(runner, HERE, "long", ["sh", "-c", "sleep 300 & sleep 300"], state_dir=where, via="setsid")
    pid = run_status(runner, HERE, "long", state_dir=where).states["here"].pid
    assert pid is not None
    refused = start_detached(runner, HERE, "long", ["true"], state_dir=where, via="setsid").states["here"]
    assert refused.state == "error" and "still running" in (refused.error or "")
    assert stop_run(runner, HERE, "long", state_dir=where).states["here"].state == "stopped"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert run_status(runner, HERE, "long", state_dir=where).states["here"].state == "stopped"


def test_follow_streams_lines_until_the_run_ends(tmp_path: Path) -> None:
    runner, where = local_runner(), str(tmp_path / "runs")
    start_detached(runner, HERE, "f", ["sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.1; done"],
                   state_dir=where, via="setsid")
    lines: list[tuple[str, str]] = []
    follow_output(runner, HERE, "f", lambda node, line: lines.append((node, line)), state_dir=where)
    assert lines == [("here", "line 1"), ("here", "line 2"), ("here", "line 3")]


def test_a_node_without_the_run_says_missing(tmp_path: Path) -> None:
    assert run_status(local_runner(), HERE, "nothing", state_dir=str(tmp_path)).states["here"].state == "missing"


@pytest.mark.parametrize(("name", "state_dir"), [("a/b", "/tmp"), ("-x", "/tmp"), ("a.b", "/tmp"), ("ok", "relative"),
                                                 ("ok", "/tmp/../etc"), ("ok", "/tmp/$(x)")])
def test_run_names_and_state_directories_are_plain(name: str, state_dir: str) -> None:
    with pytest.raises(UsageError):
        check_run(name, state_dir)


def test_attach_is_an_interactive_ssh_to_the_node() -> None:
    runner = ClusterShellRunner(user="admin", key="/k", addresses={"gpu1": "198.18.0.2"})
    argv = attach_argv(runner, "gpu1", "train")
    assert argv[:2] == ["ssh", "-t"] and argv[-2] == "198.18.0.2" and argv[argv.index("-i"):][:2] == ["-i", "/k"]
    assert argv[-1].endswith("gpunet-run '~/.local/state/gpunet/runs' train gpu1")


def test_a_run_detached_here_is_found_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `bench run --detach` is to call: the run on this machine, remembered, so `gpunet fleet
    status NAME` (a later process, no options) comes back to it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "admin"))
    detach_here("sweep-1", ["sh", "-c", "echo round 1 stored"], state_dir=str(tmp_path / "runs"), via="setsid")
    done = CliRunner().invoke(app, ["fleet", "status", "sweep-1", "--wait", "10", "--json"])
    assert done.exit_code == 0, done.output
    (group,) = json.loads(done.stdout)["groups"]
    assert (group["nodes"], group["state"], group["rc"], group["output"]) == ("localhost", "done", 0, "round 1 stored")
    missing = CliRunner().invoke(app, ["fleet", "status", "never-started", "--json"])
    assert missing.exit_code == 2 and "no record" in json.loads(missing.stdout)["problems"][0]["message"]
