"""The guard: a process that outlives the worker and the SSH session (a transient systemd service
where systemd is the init, else a session of its own) and reverts the transaction when its worker
dies short of `applied`, when the deadline passes unconfirmed, or when told to."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpunet.node.contract import FINAL, PRE_APPLIED
from gpunet.node.journal import POLL_S, alive, load_journal, locked, save_journal

if TYPE_CHECKING:
    from gpunet.node.transaction import Transaction

AGENT_FILE = "agent.py"  # the agent's own script, kept beside the journal for the worker and the guard


def spawn_guard(tx: Transaction) -> None:
    """The guard outlives the worker and the SSH session: a transient systemd service where systemd
    is the init (outside the session's cgroup), else a process in a session of its own."""
    argv = [sys.executable, str(tx.state / AGENT_FILE), "guard", "--state", str(tx.state), "--root", str(tx.root),
            tx.txid]
    if Path("/run/systemd/system").is_dir() and shutil.which("systemd-run"):
        subprocess.run(["systemd-run", "--quiet", "--collect", f"--unit=gpunet-apply-guard-{tx.txid}", "--", *argv],
                       check=True, capture_output=True, timeout=30)
    else:
        detached(argv, tx.tx / "guard.log")


def detached(argv: list[str], log: Path) -> int:
    with open(log, "ab") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                                close_fds=True).pid


def guard(tx: Transaction) -> None:
    """Revert when the worker dies short of `applied`, at the deadline, or when aborted."""
    while True:
        journal = load_journal(tx.state)
        if journal.get("txid") != tx.txid or journal.get("state") in FINAL:
            return
        if time.time() >= float(journal["deadline"]):
            _expire(tx, journal)
            return
        with locked(tx.state, wait_s=0) as got:
            journal = load_journal(tx.state)
            # read again under the lock: this transaction may have ended, and the next begun, since
            if got and journal.get("txid") == tx.txid and journal.get("state") in PRE_APPLIED:
                tx.revert(journal, f"the apply stopped at {journal['state']} (its worker is gone)")
                return
        time.sleep(POLL_S)


def _expire(tx: Transaction, journal: dict[str, Any]) -> None:
    worker = journal.get("worker_pid")
    if isinstance(worker, int) and alive(worker, tx.txid):
        with contextlib.suppress(OSError):
            os.kill(worker, signal.SIGKILL)  # a hung `netplan apply` must not hold the revert up
    with locked(tx.state, wait_s=30):
        journal = load_journal(tx.state)
        if journal.get("txid") == tx.txid and journal.get("state") not in FINAL:
            tx.revert(journal, f"not confirmed within {float(journal.get('timeout_s', 0)):g} s")


def start_guard(tx: Transaction) -> None:
    """Record this pid (the worker holds the lock, writes nothing and waits for it), then guard."""
    journal = load_journal(tx.state)
    if journal.get("txid") == tx.txid:
        save_journal(tx.state, {**journal, "guard_pid": os.getpid()})
    guard(tx)
