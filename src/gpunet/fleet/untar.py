"""Unpacking an archive a node sent (issue 22 F1), trusting neither tarfile's filters nor path
resolution: `tarfile`'s `data` filter checks names with `os.path.realpath`, which stops resolving
past PATH_MAX, so on Python before 3.11.13/3.12.11/3.13.4 (CVE-2025-4517) a chain of symlinks
leads a later member anywhere, as root; whether a Python has the fix cannot be told from
`hasattr(tarfile, "data_filter")`.

So an archive from a node holds regular files and directories, nothing else: a symlink, a hard
link, a device or a FIFO refuses the whole archive. Every name is checked as text (relative, no
`.` or `..` or empty component, under the expected top), and every file and directory is made by
walking directory descriptors from the staging directory, each opened with O_NOFOLLOW |
O_DIRECTORY and each file created with O_CREAT | O_EXCL | O_NOFOLLOW, so no name can reach
outside it whatever is already there. Modes keep at most rwxr-xr-x (no setuid, setgid or sticky
bit, nothing writable by others); owners are never taken from the archive."""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

MAX_NAME_BYTES = 4096  # PATH_MAX: a longer name cannot be opened whole anyway
MAX_COMPONENT_BYTES = 255  # NAME_MAX
MODE_KEPT = 0o755
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
KINDS = {tarfile.SYMTYPE: "a symlink", tarfile.LNKTYPE: "a hard link", tarfile.CHRTYPE: "a character device",
         tarfile.BLKTYPE: "a block device", tarfile.FIFOTYPE: "a FIFO"}


class TransferRefused(Exception):
    """A node's archive or files cannot be accepted (outside the named path, a checksum mismatch)."""


def extract(stream: IO[bytes], into: Path, top: str | None) -> None:
    """Every member of the tar stream into `into` (an existing directory): with `top`, each named
    `top` or `top/...`; without, each a single regular file named by one component. Raises
    TransferRefused (what was written stays inside `into`, for the caller to remove)."""
    root = os.open(into, DIRECTORY)
    try:
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                _one(tar, member, root, top)
    except (tarfile.TarError, EOFError) as exc:
        raise TransferRefused(f"the archive is damaged: {exc}") from None
    finally:
        os.close(root)


def _one(tar: tarfile.TarFile, member: tarfile.TarInfo, root: int, top: str | None) -> None:
    if not (member.isreg() or member.isdir()):
        kind = KINDS.get(member.type, f"of tar type {member.type!r}")
        raise TransferRefused(f"the archive holds {_shown(member.name)}, {kind}: gpunet accepts regular files "
                              "and directories only")
    parts = components(member.name, top)
    if top is None and (member.isdir() or len(parts) != 1):
        raise TransferRefused(f"the archive holds {_shown(member.name)}: one file was expected")
    mode = member.mode & MODE_KEPT
    if member.isdir():
        with _directory(root, parts) as fd:
            os.fchmod(fd, mode | 0o700)  # the owner keeps rwx: files still go in
        return
    data = tar.extractfile(member)
    if data is None:
        raise TransferRefused(f"the archive's {_shown(member.name)} has no data")
    with _directory(root, parts[:-1]) as parent:
        _write(parent, parts[-1], data, mode, member.mtime)


def components(name: str, top: str | None) -> list[str]:
    """A member's name as path components, or TransferRefused: relative, no `.`, `..` or empty
    component (a leading `./` and a trailing slash aside), no NUL, within PATH_MAX and NAME_MAX,
    under `top`."""
    parts = name.removeprefix("./").rstrip("/").split("/")
    size = len(name.encode(errors="surrogateescape"))
    bad = name.startswith("/") or "\0" in name or any(p in ("", ".", "..") for p in parts) \
        or size > MAX_NAME_BYTES or any(len(p.encode(errors="surrogateescape")) > MAX_COMPONENT_BYTES for p in parts)
    if bad:
        raise TransferRefused(f"the archive holds {_shown(name)}: not a plain relative name")
    if top is not None and parts[0] != top:
        raise TransferRefused(f"the archive holds {_shown(name)}, outside {top!r}")
    return parts


@contextlib.contextmanager
def _directory(root: int, parts: list[str]) -> Iterator[int]:
    """A descriptor of root/parts..., each component made (0700) where missing and opened with
    O_NOFOLLOW: a symlink or a file in the way refuses the archive."""
    fd = os.dup(root)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            try:
                inner = os.open(part, DIRECTORY, dir_fd=fd)
            except OSError as exc:  # ELOOP (a symlink), ENOTDIR (a file): never followed
                raise TransferRefused(f"the archive's {part!r} is not a directory where one is needed: "
                                      f"{exc.strerror}") from None
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _write(parent: int, name: str, data: IO[bytes], mode: int, mtime: float) -> None:
    try:
        fd = os.open(name, NEW_FILE, 0o600, dir_fd=parent)
    except FileExistsError:
        raise TransferRefused(f"the archive holds {name!r} twice, or in a directory's place") from None
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(data, out, 1 << 20)
        os.fchmod(fd, mode)
        with contextlib.suppress(OverflowError, ValueError, OSError):  # a time no file can have: left as now
            os.utime(fd, (mtime, mtime))


def _shown(name: str) -> str:
    return repr(name if len(name) <= 120 else f"{name[:60]}...{name[-40:]}")
