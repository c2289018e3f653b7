"""The output directory of `gpunet plan`: every file of one run visible together, the previous
plan kept.

plan.json and the files beside it (cabling, addresses, BOM, summary) must agree: a kill between
two of five renames would leave a plan.json of 1 026 nodes beside an addresses.csv of 962. So the
new set is written into a staging directory next to OUT, OUT's other entries (a render/ tree, the
backups) are carried into it, and the two directories are exchanged in one renameat2(2)
RENAME_EXCHANGE. A kill before the exchange leaves the old set (the next run carries the moved
entries back), after it the new set; never a mix. The staging directory holds a marker until the
exchange, which tells the next run which side of it a killed run stopped on."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from gpunet.errors import UsageError
from gpunet.render.plan_files import PLAN_FILES
from gpunet.render.write import OutputTree, output_root, refuse_non_directory

MARKER = ".gpunet-staging"  # present in the staging directory until the exchange
BACKUPS = 5  # plan.json.1 (the one before) .. plan.json.5
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def staging_dir(out_dir: Path) -> Path:
    return out_dir.parent / f".{out_dir.name}.gpunet-staging"


def backup_names() -> list[str]:
    return [f"plan.json.{i}" for i in range(1, BACKUPS + 1)]


def write_plan_set(out_dir: Path, files: dict[str, str]) -> list[str]:
    """Replace the plan files in `out_dir` as one set; returns the names whose content changed.
    The previous plan.json, when it differs, becomes plan.json.1 (older ones shift up)."""
    refuse_non_directory(out_dir)
    out_dir = out_dir.resolve()  # `-o .` and a symlinked OUT: the directory itself is exchanged
    output_root(out_dir.parent)
    with _locked(out_dir):
        _recover(out_dir)
        output_root(out_dir)
        changed = [name for name, text in files.items() if _read(out_dir / name) != text]
        if not changed:
            return []
        set_files = files | _backups(out_dir, files)
        if _is_mount_point(out_dir) or out_dir == Path.cwd().resolve():
            # No rename across a mount point, and the working directory stays where it is: each
            # file atomically, one by one.
            with OutputTree(out_dir) as tree:
                for name, text in set_files.items():
                    tree.write(name, text)
            return changed
        staging = staging_dir(out_dir)
        _stage(staging, set_files)
        _carry(out_dir, staging, keep=set(set_files) | set(backup_names()))
        _exchange(staging, out_dir)
        (out_dir / MARKER).unlink()  # the exchange happened: `staging` now holds the old set
        shutil.rmtree(staging)
        return changed


def recover(out_dir: Path) -> None:
    """Finish what a killed run left: before the exchange, carry OUT's entries back and drop the
    staged set; after it, drop the old set."""
    if out_dir.is_symlink() and not out_dir.exists():
        return
    out_dir = out_dir.resolve()
    if out_dir.parent.is_dir():
        with _locked(out_dir):
            _recover(out_dir)


def _recover(out_dir: Path) -> None:
    aside = _aside(out_dir)
    if aside.exists():  # the two-rename fallback stopped between its renames
        if out_dir.exists() and not any(out_dir.iterdir()):
            out_dir.rmdir()
        if not out_dir.exists():
            os.rename(aside, out_dir)
        else:
            shutil.rmtree(aside)
    staging = staging_dir(out_dir)
    if staging.exists():
        if (staging / MARKER).exists() and out_dir.is_dir():
            _carry_back(staging, out_dir)
        shutil.rmtree(staging)
    with contextlib.suppress(OSError):
        (out_dir / MARKER).unlink()


@contextlib.contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    """One `gpunet plan` at a time next to this directory (they would share the staging path): a
    lock on the parent directory itself, so nothing is left behind."""
    parent = out_dir.parent
    try:
        fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot open {parent}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _is_mount_point(path: Path) -> bool:
    return path.stat().st_dev != path.parent.stat().st_dev


def _aside(out_dir: Path) -> Path:
    return out_dir.parent / f".{out_dir.name}.gpunet-old"


def _read(path: Path) -> str | None:
    try:
        return path.read_text() if path.is_file() and not path.is_symlink() else None
    except (OSError, UnicodeDecodeError):
        return None


def _backups(out_dir: Path, files: dict[str, str]) -> dict[str, str]:
    """plan.json.1..5 after this run: the current plan.json first when it is being replaced."""
    old = _read(out_dir / "plan.json")
    existing = [_read(out_dir / name) for name in backup_names()]
    chain = ([old] if old is not None and old != files.get("plan.json") else []) + existing
    kept = [text for text in chain if text is not None][:BACKUPS]
    return dict(zip(backup_names(), kept, strict=False))


def _stage(staging: Path, files: dict[str, str]) -> None:
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(mode=0o755)
    (staging / MARKER).write_text("gpunet plan: staged set, not yet exchanged with the output directory\n")
    with OutputTree(staging) as tree:
        for name, text in files.items():
            tree.write(name, text, sync=True)
    _sync_directory(staging)


def _carry(source: Path, target: Path, keep: set[str]) -> None:
    """Move every entry of `source` that is not one of the plan's own into `target`."""
    for entry in sorted(os.listdir(source)):
        if entry not in keep and entry != MARKER:
            os.rename(source / entry, target / entry)


def _carry_back(staging: Path, out_dir: Path) -> None:
    planned = {MARKER, *backup_names(), *PLAN_FILES}
    for entry in sorted(os.listdir(staging)):
        if entry not in planned and not (out_dir / entry).exists():
            os.rename(staging / entry, out_dir / entry)


def _exchange(a: Path, b: Path) -> None:
    """Swap two directories atomically; where renameat2 is missing, two renames (a moment with no
    OUT at all, still never a mix)."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        done = renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
        if done == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL):
            raise UsageError(f"cannot replace {b} with the new plan: {os.strerror(code)}")
    aside = _aside(b)
    os.rename(b, aside)
    os.rename(a, b)
    os.rename(aside, a)


def _sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
