"""The output directory of `gpunet plan`: every file of one run visible together, the previous
plan kept.

plan.json and the files beside it (cabling, addresses, BOM, summary) must agree: a kill between
two of five renames would leave a plan.json of 1 026 nodes beside an addresses.csv of 962. When
OUT holds only gpunet's plan files (the default gpunet-out/ does), the new set is written into a
staging directory beside OUT and the two are exchanged in one renameat2(2) RENAME_EXCHANGE: a
kill before it leaves the old set, after it the new one, never a mix. The old set is then removed
file by file, by name; nothing else is ever deleted (no recursive removal that could cross into a
mount or take a file someone wrote meanwhile: such a file is moved back into OUT).

Where OUT also holds other things (a render/ tree, a cluster.yaml), is a mount point or is this
process's working directory, exchanging it would move those, so each file is replaced atomically
on its own instead. OUT must be new, empty or already hold a plan.json: a directory of other
things (a home, `/`) is refused."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from gpunet.errors import UsageError
from gpunet.files.write import OutputTree, output_root, refuse_non_directory
from gpunet.render.plan_files import PLAN_FILES

MARKER = ".gpunet-staging"  # in the staged set; removed from OUT once exchanged
BACKUPS = 5  # plan.json.1 (the one before) .. plan.json.5
TEMPORARY = re.compile(r"\.(.+)\.[0-9a-f]{8}\.tmp")  # OutputTree's temporary name for a file
RENAME_EXCHANGE = 2
AT_FDCWD = -100


def backup_names() -> list[str]:
    return [f"plan.json.{i}" for i in range(1, BACKUPS + 1)]


def own_names() -> set[str]:
    """What gpunet itself puts in OUT."""
    return {*PLAN_FILES, *backup_names(), MARKER}


def staging_dir(out_dir: Path) -> Path:
    """Beside OUT, of fixed length (OUT's own name may already be 255 bytes long)."""
    return out_dir.parent / f".gpunet-staging-{_digest(out_dir)}"


def _aside(out_dir: Path) -> Path:
    return out_dir.parent / f".gpunet-old-{_digest(out_dir)}"


def _digest(out_dir: Path) -> str:
    return hashlib.sha256(os.fsencode(out_dir.name)).hexdigest()[:16]


def write_plan_set(out_dir: Path, files: dict[str, str]) -> list[str]:
    """Replace the plan files in `out_dir` as one set; returns the names whose content changed.
    The previous plan.json, when it differs, becomes plan.json.1 (older ones shift up)."""
    refuse_non_directory(out_dir)
    out_dir = out_dir.resolve()  # `-o .` and a symlinked OUT: the directory itself is exchanged
    output_root(out_dir.parent)
    try:
        with _locked(out_dir):
            _recover(out_dir)
            _refuse_foreign(out_dir)
            output_root(out_dir)
            changed = [name for name, text in files.items() if _read(out_dir / name) != text]
            if changed:
                _replace(out_dir, files | _backups(out_dir, files))
            return changed
    except OSError as exc:
        raise UsageError(f"cannot write the plan into {out_dir}: {exc.strerror or exc}") from None


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
            _remove_set(leftover, out_dir)
    with contextlib.suppress(OSError):
        (out_dir / MARKER).unlink()


def _remove_set(old: Path, out_dir: Path) -> None:
    """Remove a plan set by name; anything else in it (written into OUT meanwhile) goes back to
    OUT, or, where OUT has that name too, stays and is reported."""
    for entry in os.listdir(old):
        if _ours(entry):
            os.unlink(old / entry)
        elif out_dir.is_dir() and not (out_dir / entry).exists():
            os.rename(old / entry, out_dir / entry)
    try:
        old.rmdir()
    except OSError:
        raise UsageError(f"{old} holds files that are not gpunet's and that {out_dir} has too; look at them "
                         "and remove the directory by hand") from None


def _ours(entry: str) -> bool:
    """One of gpunet's names, or the temporary file of one that a killed write left (write.py)."""
    temporary = TEMPORARY.fullmatch(entry)
    return entry in own_names() or (temporary is not None and temporary[1] in own_names())


def _refuse_foreign(out_dir: Path) -> None:
    if out_dir.is_dir() and not (out_dir / "plan.json").is_file() and any(out_dir.iterdir()):
        raise UsageError(f"{out_dir} is not empty and holds no plan.json; gpunet writes a plan into a new or empty "
                         "directory, or over an earlier plan (name another with -o)")


def _shared(out_dir: Path) -> bool:
    """OUT holds more than gpunet's files, is a mount point, or is our working directory."""
    if not out_dir.exists():
        return False
    others = set(os.listdir(out_dir)) - own_names()
    return bool(others) or out_dir.stat().st_dev != out_dir.parent.stat().st_dev or out_dir == Path.cwd().resolve()


def _replace(out_dir: Path, files: dict[str, str]) -> None:
    if _shared(out_dir):
        with OutputTree(out_dir) as tree:
            for name, text in files.items():
                tree.write(name, text)
        return
    staging = staging_dir(out_dir)
    _make_like(staging, out_dir)
    (staging / MARKER).write_text("gpunet plan: staged set, not yet exchanged with the output directory\n")
    with OutputTree(staging) as tree:
        for name, text in files.items():
            tree.write(name, text, sync=True)
    _sync_directory(staging)
    _exchange(staging, out_dir)
    (out_dir / MARKER).unlink()
    _remove_set(staging, out_dir)  # the old set


def _make_like(staging: Path, out_dir: Path) -> None:
    """The staging directory with OUT's mode and owner, so the exchange changes neither."""
    staging.mkdir(mode=0o700)
    if out_dir.exists():
        info = out_dir.stat()
        with contextlib.suppress(PermissionError):
            os.chown(staging, info.st_uid, info.st_gid)
        os.chmod(staging, info.st_mode & 0o7777)
    else:
        os.chmod(staging, 0o755)


@contextlib.contextmanager
def _locked(out_dir: Path) -> Iterator[None]:
    """One `gpunet plan` at a time next to this directory (they would share the staging path): a
    lock on the parent directory itself, so nothing is left behind."""
    fd = os.open(out_dir.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


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
            raise OSError(code, os.strerror(code))
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
