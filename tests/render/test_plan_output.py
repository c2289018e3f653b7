"""`gpunet plan`'s output directory: one set at a time, the old plan kept, nothing else touched."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpunet.errors import UsageError
from gpunet.render.plan_output import _remove_set, staging_dir, write_plan_set

FILES = {"plan.json": '{"a": 1}\n', "cabling.csv": "x\n", "addresses.csv": "y\n", "bom.csv": "z\n", "summary.md": "#\n"}


def test_a_new_set_replaces_the_old_and_keeps_it_as_a_backup(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert write_plan_set(out, FILES) == list(FILES)
    assert write_plan_set(out, FILES) == []
    newer = FILES | {"plan.json": '{"a": 2}\n'}
    assert write_plan_set(out, newer) == ["plan.json"]
    assert (out / "plan.json.1").read_text() == '{"a": 1}\n' and (out / "plan.json").read_text() == '{"a": 2}\n'
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no staging or old set left beside it


def test_the_exchange_keeps_the_directorys_mode_and_owner(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_plan_set(out, FILES)
    out.chmod(0o2750)
    if os.geteuid() == 0:
        os.chown(out, 65534, 65534)
    write_plan_set(out, FILES | {"plan.json": "{}\n"})
    info = out.stat()
    assert info.st_mode & 0o7777 == 0o2750
    assert os.geteuid() != 0 or (info.st_uid, info.st_gid) == (65534, 65534)


def test_a_directory_name_of_245_bytes_works(tmp_path: Path) -> None:
    out = tmp_path / ("a" * 245)
    write_plan_set(out, FILES)
    write_plan_set(out, FILES | {"plan.json": "{}\n"})
    assert (out / "plan.json.1").exists() and len(staging_dir(out).name) < 40


def test_other_files_in_out_are_left_alone_and_the_files_replaced_one_by_one(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_plan_set(out, FILES)
    (out / "render").mkdir()
    (out / "render" / "x").write_text("mine")
    inode = (out / "render").stat().st_ino
    write_plan_set(out, FILES | {"plan.json": "{}\n"})
    assert (out / "render").stat().st_ino == inode and (out / "render" / "x").read_text() == "mine"


def test_removing_an_old_set_moves_back_what_someone_wrote_meanwhile(tmp_path: Path) -> None:
    """A file created in OUT between the check and the exchange lands in the old set: it is moved
    back into OUT, never deleted; one that OUT has too stops the removal with a message."""
    out, old = tmp_path / "out", tmp_path / "old"
    out.mkdir()
    old.mkdir()
    for name in (*FILES, "plan.json.1", ".plan.json.0123abcd.tmp", "late.txt"):
        (old / name).write_text(name)
    _remove_set(old, out)
    assert not old.exists() and (out / "late.txt").read_text() == "late.txt"
    old.mkdir()
    (old / "late.txt").write_text("again")
    with pytest.raises(UsageError, match="not gpunet's"):
        _remove_set(old, out)
    assert (old / "late.txt").read_text() == "again"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare (mounts)")
def test_a_mount_inside_out_is_never_entered(tmp_path: Path) -> None:
    """A tmpfs mounted at OUT/m, in a private mount namespace: its file survives two plans."""
    out = tmp_path / "out"
    assert subprocess.run([sys.executable, "-m", "gpunet", "plan", "-o", str(out)], check=False).returncode == 0
    (out / "m").mkdir()
    script = (f"mount -t tmpfs none {out}/m && echo keep > {out}/m/important.txt && "
              f"{sys.executable} -m gpunet plan -o {out} --fresh >/dev/null && "
              f"{sys.executable} -m gpunet plan -o {out} --fresh >/dev/null && cat {out}/m/important.txt")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "keep", done.stderr
