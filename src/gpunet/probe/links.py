"""LinkReader: read_interfaces(full=False) for a caller that asks every few seconds (the exporter).

Each interface's operstate, carrier, mtu and speed files stay open between calls and are re-read
with pread at offset 0, which makes sysfs render them anew: one system call per fact instead of
open, read and close after a path walk; a scrape of 200 interfaces spends a sixth of the kernel
time. An interface is known by its name and the inode of its /sys/class/net entry, which the
directory listing gives for free: one deleted and created again, or renamed, has a new entry and
its files are opened afresh; one that vanishes while read (ENODEV) is left out and forgotten.
At most `max_open` files are held (a quarter of the file limit by default, so the HTTP server's
connections keep theirs); interfaces beyond it are read the fresh way."""

from __future__ import annotations

import errno
import os
import resource
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpunet.model.state import InterfaceState
from gpunet.probe.sysfs import LINK_FACTS, has_entry, interface_entries, link_state, read_interface


class _Vanished(Exception):
    """The interface went away between the listing and the read."""


@dataclass(frozen=True)
class _Held:
    inode: int
    fds: tuple[int | None, ...]  # one per LINK_FACTS; None where the file could not be opened
    virtual: bool


class LinkReader:
    def __init__(self, root: Path = Path("/"), max_open: int | None = None) -> None:
        self.base = f"{root}/sys/class/net/"
        self.root, self.max_open = root, default_max_open() if max_open is None else max_open
        self._held: dict[str, _Held] = {}
        self.open_files = 0
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _close_all, self._held)

    def read(self, statistics: Mapping[str, dict[str, int]] | None = None) -> list[InterfaceState]:
        """Every interface's link facts, with its counters from `statistics`, in name order."""
        with self._lock:
            listed = interface_entries(self.root)
            self._forget_unlisted(dict(listed))
            states = (self._read_one(name, inode, statistics) for name, inode in listed)
            return [state for state in states if state is not None]

    def close(self) -> None:
        with self._lock:
            _close_all(self._held)
            self.open_files = 0

    def _forget_unlisted(self, listed: dict[str, int]) -> None:
        for name in [n for n, held in self._held.items() if listed.get(n) != held.inode]:
            self._forget(name)

    def _forget(self, name: str) -> None:
        held = self._held.pop(name)
        _close(held)
        self.open_files -= sum(fd is not None for fd in held.fds)

    def _read_one(self, name: str, inode: int, statistics: Mapping[str, dict[str, int]] | None
                  ) -> InterfaceState | None:
        held = self._held.get(name) or self._hold(name, inode)
        if held is None:  # over the budget (or gone): the fresh read
            return read_interface(self.base + name, False, statistics)
        try:
            facts = [_pread(fd) for fd in held.fds]
        except _Vanished:
            self._forget(name)
            return None
        return link_state(name, facts, held.virtual, statistics)

    def _hold(self, name: str, inode: int) -> _Held | None:
        if self.open_files + len(LINK_FACTS) > self.max_open:
            return None
        try:
            directory = os.open(self.base + name, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return None
        try:
            fds = tuple(_open(fact, directory) for fact in LINK_FACTS)
            virtual = not has_entry("device", directory)
        finally:
            os.close(directory)
        held = self._held[name] = _Held(inode, fds, virtual)
        self.open_files += sum(fd is not None for fd in fds)
        return held


def default_max_open() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 4096 if soft == resource.RLIM_INFINITY else soft // 4


def _open(name: str, directory: int) -> int | None:
    try:
        return os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return None


def _pread(fd: int | None) -> str | None:
    """The file rendered anew (offset 0), or None where it cannot be read (EINVAL on a down link's
    speed); ENODEV: the interface is being removed."""
    if fd is None:
        return None
    try:
        return os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError as exc:
        if exc.errno == errno.ENODEV:
            raise _Vanished from None
        return None


def _close(held: _Held) -> None:
    for fd in held.fds:
        if fd is not None:
            os.close(fd)


def _close_all(held: dict[str, _Held]) -> None:
    while held:
        _close(held.popitem()[1])
