"""The output directory of `gpunet plan`: every file of one run visible together, the previous
plan kept.

plan.json and the files beside it (cabling, addresses, BOM, summary) must agree: a kill between
two of five renames would leave a plan.json of 1 026 nodes beside an addresses.csv of 962. So the
new set is written into a staging directory next to OUT, OUT's other entries (a render/ tree, the
backups, a cluster.yaml) are hard-linked into it (nothing in OUT is moved or changed), and the two
directories are exchanged in one renameat2(2) RENAME_EXCHANGE. A kill before the exchange leaves
OUT as it was, after it the new set; never a mix. The next run removes whichever directory the
killed one left beside OUT.

OUT must be new, empty, or already hold a plan.json: a directory of other things (a home, `/`)
is refused rather than relinked. Where the exchange cannot be used (OUT is a mount point, or the
working directory of this process), each file is replaced atomically, one by one."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
from collections.abc import Collection, Iterator
from pathlib import Path

from gpunet.errors import UsageError
from gpunet.render.write import OutputTree, output_root, refuse_non_directory

MARKER = ".gpunet-staging"  # in the staged set; removed from OUT once exchanged
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
        _refuse_foreign(out_dir)
        output_root(out_dir)
        changed = [name for name, text in files.items() if _read(out_dir / name) != text]
        if changed:
            _replace(out_dir, files | _backups(out_dir, files))
        return changed


def recover(out_dir: Path) -> None:
    """Remove what a killed run left beside OUT (its staged set, or the old set after the swap)."""
    if out_dir.is_symlink() and not out_dir.exists():
        return
    out_dir = out_dir.resolve()
    if out_dir.parent.is_dir():
        with _locked(out_dir):
            _recover(out_dir)


def _recover(out_dir: Path) -> None:
    aside = _aside(out_dir)
    if aside.is_dir() and not out_dir.exists():  # the two-rename fallback stopped between its renames
        os.rename(aside, out_dir)
    for leftover in (staging_dir(out_dir), aside):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover)
    with contextlib.suppress(OSError):
        (out_dir / MARKER).unlink()


def _refuse_foreign(out_dir: Path) -> None:
    if out_dir.is_dir() and not (out_dir / "plan.json").is_file() and any(out_dir.iterdir()):
        raise UsageError(f"{out_dir} is not empty and holds no plan.json; gpunet writes a plan into a new or empty "
                         "directory, or over an earlier plan (name another with -o)")


def _replace(out_dir: Path, files: dict[str, str]) -> None:
    if _is_mount_point(out_dir) or out_dir == Path.cwd().resolve():
        with OutputTree(out_dir) as tree:  # no rename across a mount point, nor of our own cwd
            for name, text in files.items():
                tree.write(name, text)
        return
    staging = staging_dir(out_dir)
    staging.mkdir(mode=0o755)
    (staging / MARKER).write_text("gpunet plan: staged set, not yet exchanged with the output directory\n")
    with OutputTree(staging) as tree:
        for name, text in files.items():
            tree.write(name, text, sync=True)
    _link_tree(out_dir, staging, skip={*files, *backup_names()})
    _sync_directory(staging)
    _exchange(staging, out_dir)
    (out_dir / MARKER).unlink()
    shutil.rmtree(staging)  # the old set


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


def _link_tree(source: Path, target: Path, skip: Collection[str] = ()) -> None:
    """Recreate `source`'s entries in `target` as hard links (directories made anew, symlinks
    copied as links): nothing under `source` is moved or changed."""
    for entry in os.scandir(source):
        if entry.name in skip or entry.name == MARKER:
            continue
        if entry.is_dir(follow_symlinks=False):
            (target / entry.name).mkdir(mode=entry.stat(follow_symlinks=False).st_mode & 0o7777)
            _link_tree(Path(entry.path), target / entry.name)
        else:
            os.link(entry.path, target / entry.name, follow_symlinks=False)


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
