"""The transaction's journal (STATE/journal.json, replaced whole) and its lock (STATE/lock,
flock: dropped by the kernel when its holder dies, which is how the guard sees a dead worker)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpunet.node.files import write_atomic

POLL_S = 0.1


def journal_path(state: Path) -> Path:
    return state / "journal.json"


def load_journal(state: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(journal_path(state).read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def save_journal(state: Path, journal: dict[str, Any]) -> None:
    write_atomic(journal_path(state), json.dumps(journal, indent=1, sort_keys=True).encode(), 0o600)


def move_to(state: Path, journal: dict[str, Any], step: str, **fields: Any) -> None:
    journal.update(fields, state=step)
    journal.setdefault("history", []).append([round(time.time(), 3), step])
    save_journal(state, journal)


@contextlib.contextmanager
def locked(state: Path, wait_s: float | None = None) -> Iterator[bool]:
    """STATE/lock held for the block: True when taken (None waits for ever, 0 tries once)."""
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        yield _take(fd, wait_s)
    finally:
        os.close(fd)  # closing drops the lock, as the kernel does when a holder is killed


def _take(fd: int, wait_s: float | None) -> bool:
    end = None if wait_s is None else time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if end is not None and time.monotonic() >= end:
                return False
            time.sleep(POLL_S / 2)


def alive(pid: Any, txid: str) -> bool:
    """A process of this transaction (its command line names the txid) still runs."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return txid.encode() in cmdline and status.rsplit(")", 1)[-1].split()[0] != "Z"


# How long begin (and the worker) wait for the guard, a new Python process, to start: a node busy
# with a training job can take many seconds to start one; under the controller's 60 s for begin.
GUARD_START_S = 45.0


def wait_for(predicate: Any, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(POLL_S / 2)
    return False
