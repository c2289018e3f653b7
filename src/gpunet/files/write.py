"""Writing rendered text to disk: atomic per file, only when the content changed, and never
outside the output tree.

Every directory below the output root is opened with O_NOFOLLOW relative to its parent's file
descriptor (openat), so a symlink planted inside the tree (`nodes/gpu001/etc` -> `/etc`) stops the
write instead of redirecting it; the file itself is replaced by rename, which replaces a symlink
rather than following it. The root is the one path the user names, and may be a symlink."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from gpunet.errors import UsageError

OPEN_DIRECTORIES = 256
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def refuse_non_directory(directory: Path) -> None:
    """UsageError when `directory` is there and is not a directory (a file, a dangling symlink)."""
    if directory.is_symlink() and not directory.exists():
        raise UsageError(f"{directory} is a symlink to nothing; name a directory to write into")
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory; name a directory to write into")


def output_root(directory: Path) -> None:
    """The output directory exists (created if missing) and is a directory; UsageError if not."""
    refuse_non_directory(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {directory}: {exc.strerror or exc}") from None


class OutputTree:
    """Files written under `root` through directory descriptors, never through a symlink."""

    def __init__(self, root: Path) -> None:
        output_root(root)
        self.root = root
        self._dirs: dict[PurePosixPath, int] = {PurePosixPath("."): _open_dir(root)}

    def __enter__(self) -> OutputTree:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()

    def write(self, name: str, text: str, mode: int = 0o644, sync: bool = False) -> bool:
        """Atomically replace `name` (relative) with `text`; False, with nothing written, when it
        already holds exactly that with that mode."""
        path = _relative(name)
        parent = self._directory(path.parent)
        data = text.encode()
        if _holds(parent, path.name, data, mode):
            return False
        temporary = f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                         dir_fd=parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                os.fchmod(handle.fileno(), mode)
                if sync:
                    os.fsync(handle.fileno())
            os.replace(temporary, path.name, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as exc:
            _unlink_quietly(temporary, parent)
            raise UsageError(f"cannot write {self.root / name}: {exc.strerror or exc}") from None
        return True

    def _directory(self, relative: PurePosixPath) -> int:
        """The descriptor of a directory of the tree, each level opened (or made) below the last."""
        if relative in self._dirs:
            return self._dirs[relative]
        if len(self._dirs) > OPEN_DIRECTORIES:
            self._close_all_but(relative)
        parent = self._directory(relative.parent)
        try:
            fd = os.open(relative.name, DIRECTORY_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            _mkdir(self.root / relative, relative.name, parent)
            fd = os.open(relative.name, DIRECTORY_FLAGS, dir_fd=parent)
        except OSError as exc:
            raise UsageError(_refusal(self.root / relative, exc)) from None
        self._dirs[relative] = fd
        return fd


    def _close_all_but(self, relative: PurePosixPath) -> None:
        """Descriptors are a limited resource (2 048 nodes are 20 000 directories): keep the root
        and the chain above `relative`, which the next writes are likely to share."""
        keep = {PurePosixPath("."), *relative.parents}
        for path in [p for p in self._dirs if p not in keep]:
            os.close(self._dirs.pop(path))


def _open_dir(root: Path) -> int:
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot open {root}: {exc.strerror or exc}") from None


def _mkdir(shown: Path, name: str, parent: int) -> None:
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        pass  # made meanwhile; the open that follows checks what it is
    except OSError as exc:
        raise UsageError(f"cannot create {shown}: {exc.strerror or exc}") from None


def _refusal(path: Path, exc: OSError) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return (f"refusing to write through {path}: it is a symlink or not a directory, and gpunet writes "
                "only inside the output tree")
    return f"cannot open {path}: {exc.strerror or exc}"


def _relative(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts or name.endswith("/"):
        raise UsageError(f"{name!r} is not a file path inside the output tree")
    return path


def _holds(parent: int, name: str, data: bytes, mode: int) -> bool:
    try:  # O_NONBLOCK: a FIFO planted there must not hang the render
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    except OSError:
        return False  # missing, or a symlink: rewritten either way
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o7777 != mode:
            return False
        return handle.read(len(data) + 1) == data


def _unlink_quietly(name: str, parent: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=parent)


def write_files(directory: Path, files: dict[str, str], mode: Callable[[str], int] = lambda _: 0o644) -> list[str]:
    """Write every file under `directory`; returns the names that changed."""
    with OutputTree(directory) as tree:
        return [name for name, text in files.items() if tree.write(name, text, mode(name))]


def write_if_changed(path: Path, text: str, mode: int = 0o644) -> bool:
    """One file, atomically, in its own directory (which is the tree)."""
    with OutputTree(path.parent) as tree:
        return tree.write(path.name, text, mode)
