"""One node's transaction: the worker backs up, writes, checks and applies; the guard reverts when
the worker dies short of `applied`, at the deadline, or when told to; settle reverts a transaction
nobody looks after any more.

    staged -> backed-up -> writing -> written -> applied -> committed
                 \\___________\\__________\\__________\\--> reverting -> reverted (or revert-failed)
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from gpunet.node.contract import FINAL, Manifest
from gpunet.node.files import backup_files, restore_files, under, write_atomic
from gpunet.node.guard import spawn_guard
from gpunet.node.journal import GUARD_START_S, alive, load_journal, locked, move_to, wait_for
from gpunet.node.runtime import act, take_snapshot

WHICH = {"committed": "new", "reverted": "old", "revert-failed": "mixed: restore by hand from the backup"}


class Transaction:
    def __init__(self, state: Path, root: Path, txid: str) -> None:
        self.state, self.root, self.txid = state, root, txid
        self.tx = state / "tx" / txid

    def manifest(self) -> Manifest:
        loaded: Manifest = json.loads((self.tx / "manifest.json").read_text())
        return loaded

    def pause(self, manifest: Manifest, step: str) -> None:
        """Fault injection for the kill tests: stop at `step` until killed."""
        if manifest.get("pause_at") == step:
            (self.tx / f"paused-{step}").touch()
            time.sleep(3600)

    def work(self) -> None:
        """The worker: backup, write, check, apply; revert at once on any failure."""
        manifest = self.manifest()
        with locked(self.state) as _:
            journal = load_journal(self.state)
            move_to(self.state, journal, "staged", worker_pid=os.getpid())
            spawn_guard(self)
            if not wait_for(lambda: alive(load_journal(self.state).get("guard_pid"), self.txid), GUARD_START_S):
                self.revert(journal, "the guard did not start: nothing applied")
                return
            journal = load_journal(self.state)  # with the guard's pid, which the guard wrote
            try:
                self.steps(manifest, journal)
            except Exception as exc:
                self.revert(load_journal(self.state), f"apply failed at {journal.get('state')}: {exc}")

    def steps(self, manifest: Manifest, journal: dict[str, Any]) -> None:
        targets = manifest["targets"]
        for target in targets:
            for kind in target.get("snapshot", []):
                take_snapshot(kind, target, self.root, self.tx)
        records = backup_files(self.root, self.tx, manifest["files"])
        move_to(self.state, journal, "backed-up", files=records)
        self.pause(manifest, "backed-up")
        move_to(self.state, journal, "writing")
        for n, f in enumerate(manifest["files"]):
            write_atomic(under(self.root, f["path"]), f["content"].encode(), int(f["mode"]))
            if n == 0:
                self.pause(manifest, "writing")
        move_to(self.state, journal, "written")
        for target in targets:
            for action in target.get("check", []) + target.get("apply", []):
                act(action, target, self.root, self.tx)
        self.pause(manifest, "applied")
        move_to(self.state, journal, "applied", applied_at=round(time.time(), 3))

    def revert(self, journal: dict[str, Any], reason: str) -> None:
        """Old files back, then each target's runtime back, whatever fails."""
        if journal.get("state") in FINAL:
            return
        # a revert that was itself cut short is done again from where the apply had got to
        interrupted = journal.get("interrupted_at") if journal.get("state") == "reverting" else journal.get("state")
        move_to(self.state, journal, "reverting", reason=reason, interrupted_at=interrupted)
        errors = []
        if journal.get("files"):
            try:
                restore_files(self.root, self.tx, journal["files"])
            except OSError as exc:
                errors.append(f"files: {exc}")
        if interrupted in ("written", "applied"):  # the runtime changes only after every file is written
            errors += self._revert_runtime()
        move_to(self.state, journal, "revert-failed" if errors else "reverted", revert_errors=errors,
                finished_at=round(time.time(), 3))

    def _revert_runtime(self) -> list[str]:
        errors = []
        # In the apply's order: the network back before sshd reloads (a lab sshd binds its address).
        for target in self.manifest()["targets"]:
            for action in target.get("revert", []):
                try:
                    act(action, target, self.root, self.tx)
                except Exception as exc:
                    errors.append(f"{target['name']}: {exc}")
        return errors


def settle(state: Path, root: Path) -> dict[str, Any]:
    """Revert a transaction that nobody looks after any more (worker and guard gone); the journal."""
    journal = load_journal(state)
    txid = journal.get("txid")
    if not txid or journal.get("state") in FINAL:
        return journal
    with locked(state, wait_s=0) as got:
        journal = load_journal(state)
        if not got or journal.get("state") in FINAL:
            return journal  # the worker holds the lock: the apply is under way
        if not alive(journal.get("guard_pid"), txid):
            Transaction(state, root, txid).revert(
                journal, f"found at {journal['state']} with its guard gone (killed, or the node restarted)")
    return load_journal(state)


def summary(journal: dict[str, Any]) -> dict[str, Any]:
    if not journal:
        return {"txid": None, "state": None, "configuration": "untouched by gpunet apply"}
    keys = ("txid", "state", "reason", "interrupted_at", "revert_errors", "deadline", "started", "finished_at",
            "applied_at", "timeout_s", "node")
    found = {k: journal[k] for k in keys if k in journal}
    found["configuration"] = configuration(journal.get("state", ""))
    return found


def configuration(state: str) -> str:
    """Which configuration the node is on, in a word or two."""
    if state in WHICH:
        return WHICH[state]
    if state == "applied":
        return "new, awaiting confirmation"
    return "changing (the apply or its revert is under way)"
