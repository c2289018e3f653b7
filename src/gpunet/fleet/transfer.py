"""`fleet copy` and `fleet gather`: files to and from many nodes through ClusterShell's copy
(gather and its unpacking here are in gather.py).

Copy packs SOURCE once (tar, compressed on the fly, each file's sha256 in the same pass), sends
the one archive to every node beside its destination under a hidden temporary name, and each node
unpacks it there, checks every file with sha256sum and renames it into place. Gather has each node
pack and checksum what was named; the admin host fetches the archives, unpacks each into a
staging directory (nothing outside it), checks every file and renames it to OUT/<node>/<name>.
A failure anywhere leaves nothing under the final name; per-node outcomes fold like `fleet run`."""

from __future__ import annotations

import os
import posixpath
import secrets
import shutil
import stat
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Literal

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import UsageError
from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.fleet.pack import (
    COMPRESSORS,
    PERMISSIONS,
    Packed,
    compressible,
    digest_file,
    pack,
)
from gpunet.fleet.scripts import COPY_FINISH, DEST_READY, SHARED_DESTINATION
from gpunet.fleet.steps import copy_each, multiplexed, run_each
from gpunet.model.base import Frozen
from gpunet.model.nodeset import fold

Phase = Callable[[str, int, int], None]  # phase ("pack" in bytes, else nodes), done, total
Placer = Callable[[str, Path], str]  # node, unpacked path -> where it now is
COMPRESS_CHOICES = ("auto", *COMPRESSORS)
# a missing destination: each node's copy fails there ("fail", after the transfer), or it is checked
# on every node before anything is packed: "refuse" the whole copy, or "create" it (mkdir -p)
MissingDest = Literal["fail", "refuse", "create"]
SSH_FAILED = 255  # ssh's and scp's status when the node was not reached


class TransferOutcome(Frozen):
    node: str
    ok: bool
    path: str = ""  # where the copy now is: on the node (copy) or here (gather; one a line)
    error: str | None = None
    packets: dict[str, int] | None = None  # a capture's packets per interface
    bytes: int = 0  # gathered: what this node's files hold, and what came over the wire
    packed_bytes: int = 0
    reached: bool = True  # False: SSH never got to the node (exit 3, not a failed copy)
    # copy: another node sharing the destination (an NFS home) had already landed exactly these files
    already_in_place: bool = False


class TransferResult(Frozen):
    operation: Literal["copy", "gather"]
    source: str
    dest: str
    files: int = 0
    bytes: int = 0
    packed_bytes: int = 0
    compress: str
    seconds: float
    outcomes: dict[str, TransferOutcome]

    @property
    def failed(self) -> list[str]:
        return [n for n, o in self.outcomes.items() if not o.ok]

    def groups(self) -> list[tuple[str, TransferOutcome]]:
        """Nodes with the same outcome folded (`gpu[1-7]`), failures last."""
        by_key: dict[tuple[bool, str | None, bool], list[str]] = defaultdict(list)
        for name, outcome in self.outcomes.items():
            by_key[outcome.ok, outcome.error, outcome.already_in_place].append(name)
        folded = [(fold(names), self.outcomes[names[0]]) for names in by_key.values()]
        return sorted(folded, key=lambda g: (not g[1].ok, g[0]))


def remote_path(text: str, what: str) -> str:
    """An absolute path on the nodes, as named: UsageError for a relative path or one that steps
    out of what it names with '..' (the path the user reads must be the path written)."""
    if not text.startswith("/"):
        raise UsageError(f"{what} {text!r}: give an absolute path (a relative one depends on each node's login "
                         "directory)")
    if len(text) > 4096 or any(ord(c) < 32 or c == "\x7f" for c in text):
        raise UsageError(f"{what} {text[:80]!r}: not a plain path (control characters or over 4096 characters)")
    if ".." in PurePosixPath(text).parts:
        raise UsageError(f"{what} {text!r} leaves the directory it names ('..'): give the path itself")
    return posixpath.normpath(text)


def reached(outcome: NodeOutcome) -> bool:
    """SSH got to the node: it ran something there (a timeout or ssh's own 255 say it did not)."""
    return outcome.rc not in (None, SSH_FAILED)


def why(outcome: NodeOutcome) -> str:
    """One line for a failed step: the script's own `gpunet:` message, else ssh's (scp says only
    "Connection closed" after it), else the tool's last line."""
    lines = [line.strip() for line in outcome.stderr.splitlines() if line.strip()]
    ours = [line.removeprefix("gpunet: ") for line in lines if line.startswith("gpunet: ")]
    ssh = [line for line in lines if line.startswith("ssh: ")]
    text = (ours or ssh or lines or [outcome.error or f"exit {outcome.rc}"])[-1]
    return text[:300]


def _compression(compress: str) -> str:
    if compress not in COMPRESS_CHOICES:
        raise UsageError(f"--compress {compress!r}: one of {', '.join(COMPRESS_CHOICES)}")
    if compress == "auto":
        return "zstd" if shutil.which("zstd") else "gzip"
    return compress


def tick(progress: Phase | None, phase: str, total: int) -> Callable[[str, bool], None]:
    done = [0]

    def step(node: str, ok: bool) -> None:
        del node, ok
        done[0] += 1
        if progress:
            progress(phase, done[0], total)

    return step


def copy_to(runner: ClusterShellRunner, nodes: NodeSet, source: Path, dest: str, *, compress: str = "auto",
            progress: Phase | None = None, timeout: float | None = None,
            missing_dest: MissingDest = "fail") -> TransferResult:
    """SOURCE (a file or directory here) to DEST/<name> on every node."""
    dest = remote_path(dest, "destination")
    if not source.exists():
        raise UsageError(f"{source}: no such file or directory here")
    source = Path(os.path.abspath(source))  # `.` and `..` by the names they stand for
    if not source.name:
        raise UsageError("copy a file or a directory, not /")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpunet-copy-") as stage, multiplexed(runner) as shared:
        unreached = _ready_destination(shared, nodes, dest, missing_dest, timeout)
        targets = [n for n in nodes if n not in unreached]  # a dead node is not tried twice
        packed, finish = _prepare(source, Path(stage), compress, progress)
        run_id = secrets.token_hex(4)
        remote = {n: posixpath.join(dest, f".gpunet-copy-{run_id}-{n}") for n in targets}
        sent = copy_each(shared, {n: (str(packed.archive), remote[n]) for n in targets}, timeout=timeout,
                         on_done=tick(progress, "send", len(targets)))
        arrived = [n for n in targets if reached(sent[n])]
        finished = run_each(shared, {n: ["sh", "-c", COPY_FINISH, "gpunet-copy", remote[n], dest, source.name,
                                         *finish] for n in arrived},
                            timeout=timeout, on_done=tick(progress, "check", len(arrived)))
    outcomes = {n: _copy_outcome(n, unreached.get(n) or sent[n], finished.get(n)) for n in nodes}
    return TransferResult(operation="copy", source=str(source), dest=dest, files=packed.files, bytes=packed.bytes,
                          packed_bytes=packed.packed_bytes, compress=packed.compress,
                          seconds=round(time.monotonic() - start, 3), outcomes=outcomes)


def _ready_destination(runner: ClusterShellRunner, nodes: NodeSet, dest: str, missing: MissingDest,
                       timeout: float | None) -> dict[str, NodeOutcome]:
    """The nodes SSH did not reach while DEST was checked (or made); UsageError, before anything is
    packed or sent, naming the nodes where DEST is missing or could not be created."""
    if missing == "fail":
        return {}
    checked = run_each(runner, {n: ["sh", "-c", DEST_READY, "gpunet-dest", dest, missing] for n in nodes},
                       timeout=timeout)
    refused: dict[str, list[str]] = defaultdict(list)
    for node, outcome in checked.items():
        if reached(outcome) and outcome.rc != 0:
            refused[why(outcome)].append(node)
    if refused:
        where = "; ".join(f"{fold(names)}: {reason}" for reason, names in sorted(refused.items())[:5])
        hint = "" if missing == "create" else " (create it, or pass --mkdir)"
        raise UsageError(f"nothing sent: destination {dest} is not ready on {sum(map(len, refused.values()))} "
                         f"of {len(nodes)} node(s): {where}{hint}")
    return {n: o for n, o in checked.items() if not reached(o)}


def _prepare(source: Path, stage: Path, compress: str, progress: Phase | None) -> tuple[Packed, list[str]]:
    """What to send and the finishing step's last arguments: a single file that would not compress
    goes as itself (its sha256, mode and mtime travel beside it), anything else as one archive."""
    total, real = _size(source), source.resolve()
    report = (lambda n: progress("pack", n, total)) if progress else None
    if real.is_file() and (compress == "none" or (compress == "auto" and not compressible(real))):
        digest, info = digest_file(real, report), real.stat()
        packed = Packed(archive=real, files=1, bytes=info.st_size, packed_bytes=info.st_size, compress="none")
        return packed, ["raw", digest, f"{stat.S_IMODE(info.st_mode) & PERMISSIONS:o}", str(int(info.st_mtime))]
    chosen = _compression(compress)
    return pack(source, stage / "archive", chosen, report), [chosen, "-", "-", "-"]


def _size(source: Path) -> int:
    real = source.resolve()
    if not real.is_dir():
        return real.stat().st_size
    return sum(Path(top, f).lstat().st_size for top, _, files in os.walk(real) for f in files)


def _copy_outcome(node: str, sent: NodeOutcome, finished: NodeOutcome | None) -> TransferOutcome:
    if finished is None:
        return TransferOutcome(node=node, ok=False, error=why(sent), reached=reached(sent))
    if finished.rc == 0:
        return TransferOutcome(node=node, ok=True, path=finished.stdout.strip().splitlines()[-1],
                               already_in_place=SHARED_DESTINATION in finished.stderr)
    if sent.rc != 0:  # "no directory DEST here" says more than scp's message about a temporary name
        reason = why(finished) if "gpunet: no directory" in finished.stderr else why(sent)
        return TransferOutcome(node=node, ok=False, error=reason)
    return TransferOutcome(node=node, ok=False, error=why(finished))
