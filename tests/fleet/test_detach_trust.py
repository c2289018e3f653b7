"""Issue 22 F2: a detached run's state is kept only where no other user can write, and `fleet stop`
signals only the process group gpunet started, proven by the supervisor's start time, command
line and recorded group. Real processes on this machine through the local exec transport."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

from gpunet.errors import UsageError
from gpunet.files.inputs import check_private
from gpunet.fleet import local_runner
from gpunet.fleet.detach import run_status, start_detached, stop_run
from gpunet.fleet.runs import RunRecord, load_record, save_record

HERE = NodeSet("here")
NOBODY = 65534


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def bystander() -> object:
    """A process gpunet did not start, in a session and process group of its own."""
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    yield process
    process.kill()
    process.wait()


def test_a_state_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by all, no sticky bit: anyone could plant <run>/<node>/pid
    started = start_detached(local_runner(), HERE, "job", ["true"], state_dir=str(shared / "runs")).states["here"]
    assert started.state == "error" and "writable by others" in (started.error or "")
    assert not (shared / "runs").exists()  # nothing was made in it
    assert stop_run(local_runner(), HERE, "job", state_dir=str(shared / "runs")).states["here"].state == "error"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_state_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    refused = start_detached(local_runner(), HERE, "job", ["true"], state_dir=str(theirs)).states["here"]
    assert refused.state == "error" and f"belongs to uid {NOBODY}" in (refused.error or "")
    # the same through a symlink of one's own: the physical path is what is checked
    (tmp_path / "mine").symlink_to(theirs)
    via_link = start_detached(local_runner(), HERE, "job", ["true"], state_dir=str(tmp_path / "mine"))
    assert via_link.states["here"].state == "error"


def test_a_sticky_root_directory_is_a_parent_but_never_the_state_directory(tmp_path: Path) -> None:
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    if sticky.stat().st_uid != 0:
        pytest.skip("the sticky exception is for root-owned directories (/tmp)")
    ok = start_detached(local_runner(), HERE, "job", ["echo", "hi"], state_dir=str(sticky / "runs"))
    assert ok.states["here"].state == "running"
    assert run_status(local_runner(), HERE, "job", state_dir=str(sticky / "runs"), wait=10).states["here"].rc == 0
    itself = start_detached(local_runner(), HERE, "job", ["true"], state_dir=str(sticky)).states["here"]
    assert itself.state == "error" and "writable by others" in (itself.error or "")


@pytest.mark.parametrize("planted", ["bystander", "init"])
def test_stop_never_signals_a_process_it_cannot_prove_it_started(tmp_path: Path, planted: str,
                                                                 bystander: subprocess.Popen[bytes]) -> None:
    """A pid file naming another process (a reused pid, a file written by hand) or init: the run is
    `lost`, and stop sends nothing."""
    where = str(tmp_path / "runs")
    start_detached(local_runner(), HERE, "job", ["echo", "hi"], state_dir=where, via="setsid")
    assert run_status(local_runner(), HERE, "job", state_dir=where, wait=10).states["here"].state == "done"
    run = tmp_path / "runs" / "job" / "here"
    (run / "rc").unlink()  # as if it still ran
    pid = bystander.pid if planted == "bystander" else 1
    (run / "pid").write_text(f"{pid}\n")
    (run / "group").write_text(f"{pid}\n")
    assert run_status(local_runner(), HERE, "job", state_dir=where).states["here"].state == "lost"
    assert stop_run(local_runner(), HERE, "job", state_dir=where).states["here"].state == "lost"
    assert not (run / "stopped").exists()
    assert bystander.poll() is None  # still running: nothing was sent to it or its group


def test_a_recorded_start_time_that_differs_is_another_process(tmp_path: Path) -> None:
    """The pid is the run's own supervisor but its start time says otherwise (pid reuse): not ours."""
    where = str(tmp_path / "runs")
    start_detached(local_runner(), HERE, "long", ["sleep", "300"], state_dir=where, via="setsid")
    run = tmp_path / "runs" / "long" / "here"
    real = (run / "start").read_text()
    (run / "start").write_text(f"{int(real) + 1}\n")
    assert run_status(local_runner(), HERE, "long", state_dir=where).states["here"].state == "lost"
    pid = int((run / "pid").read_text())
    assert stop_run(local_runner(), HERE, "long", state_dir=where).states["here"].state == "lost"
    assert _alive(pid)
    (run / "start").write_text(real)  # the truth again: stop now ends it
    assert stop_run(local_runner(), HERE, "long", state_dir=where).states["here"].state == "stopped"
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def test_the_admin_side_records_are_kept_only_in_a_private_directory(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "state"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_STATE_HOME", str(shared))
    record = RunRecord(name="job", nodes="here", state_dir="~/x", command="true", started=0.0, local=True)
    with pytest.raises(UsageError, match="writable by others"):
        save_record(record)
    shared.chmod(0o700)
    save_record(record)
    assert load_record("job") == record
    shared.chmod(0o770)
    with pytest.raises(UsageError, match="writable by others"):
        load_record("job")


def test_check_private_walks_every_parent(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    check_private(deep, "state")
    (tmp_path / "a").chmod(0o775)
    with pytest.raises(UsageError, match=f"{tmp_path / 'a'} is writable by others"):
        check_private(deep, "state")
