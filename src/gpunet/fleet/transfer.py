"""`fleet copy` and `fleet gather`: files to and from many nodes through ClusterShell's copy.

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
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Literal

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import ParseError, UsageError
from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.fleet.pack import (
    COMPRESSORS,
    Packed,
    TransferRefused,
    accept_raw,
    compressible,
    digest_file,
    pack,
    parse_manifest,
    unpack,
)
from gpunet.fleet.scripts import COPY_FINISH, GATHER_PACK, REMOVE
from gpunet.fleet.steps import copy_each, fetched, multiplexed, run_each, target_of
from gpunet.model.base import Frozen
from gpunet.model.nodeset import fold
from gpunet.render.write import output_root

Phase = Callable[[str, int, int], None]  # phase ("pack" in bytes, else nodes), done, total
Placer = Callable[[str, Path], str]  # node, unpacked path -> where it now is
COMPRESS_CHOICES = ("auto", *COMPRESSORS)
SSH_FAILED = 255  # ssh's and scp's status when the node was not reached


class TransferOutcome(Frozen):
    node: str
    ok: bool
    path: str = ""  # where the copy now is: on the node (copy) or here (gather; one a line)
    error: str | None = None
    packets: dict[str, int] | None = None  # a capture's packets per interface
    bytes: int = 0  # gathered: what this node's files hold, and what came over the wire
    packed_bytes: int = 0


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
        by_key: dict[tuple[bool, str | None], list[str]] = defaultdict(list)
        for name, outcome in self.outcomes.items():
            by_key[outcome.ok, outcome.error].append(name)
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


def _tick(progress: Phase | None, phase: str, total: int) -> Callable[[str, bool], None]:
    done = [0]

    def step(node: str, ok: bool) -> None:
        del node, ok
        done[0] += 1
        if progress:
            progress(phase, done[0], total)

    return step


def copy_to(runner: ClusterShellRunner, nodes: NodeSet, source: Path, dest: str, *, compress: str = "auto",
            progress: Phase | None = None, timeout: float | None = None) -> TransferResult:
    """SOURCE (a file or directory here) to DEST/<name> on every node."""
    dest = remote_path(dest, "destination")
    if not source.exists():
        raise UsageError(f"{source}: no such file or directory here")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpunet-copy-") as stage, multiplexed(runner) as shared:
        packed, finish = _prepare(source, Path(stage), compress, progress)
        run_id = secrets.token_hex(4)
        remote = {n: posixpath.join(dest, f".gpunet-copy-{run_id}-{n}") for n in nodes}
        sent = copy_each(shared, {n: (str(packed.archive), remote[n]) for n in nodes}, timeout=timeout,
                         on_done=_tick(progress, "send", len(nodes)))
        reached = [n for n in nodes if sent[n].rc not in (None, SSH_FAILED)]  # a dead node is not tried twice
        finished = run_each(shared, {n: ["sh", "-c", COPY_FINISH, "gpunet-copy", remote[n], dest, source.name,
                                         *finish] for n in reached},
                            timeout=timeout, on_done=_tick(progress, "check", len(reached)))
    outcomes = {n: _copy_outcome(n, sent[n], finished.get(n)) for n in nodes}
    return TransferResult(operation="copy", source=str(source), dest=dest, files=packed.files, bytes=packed.bytes,
                          packed_bytes=packed.packed_bytes, compress=packed.compress,
                          seconds=round(time.monotonic() - start, 3), outcomes=outcomes)


def _prepare(source: Path, stage: Path, compress: str, progress: Phase | None) -> tuple[Packed, list[str]]:
    """What to send and the finishing step's last arguments: a single file that would not compress
    goes as itself (its sha256, mode and mtime travel beside it), anything else as one archive."""
    total, real = _size(source), source.resolve()
    report = (lambda n: progress("pack", n, total)) if progress else None
    if real.is_file() and (compress == "none" or (compress == "auto" and not compressible(real))):
        digest, info = digest_file(real, report), real.stat()
        packed = Packed(archive=real, files=1, bytes=info.st_size, packed_bytes=info.st_size, compress="none")
        return packed, ["raw", digest, f"{stat.S_IMODE(info.st_mode):o}", str(int(info.st_mtime))]
    chosen = _compression(compress)
    return pack(source, stage / "archive", chosen, report), [chosen, "-", "-", "-"]


def _size(source: Path) -> int:
    real = source.resolve()
    if not real.is_dir():
        return real.stat().st_size
    return sum(Path(top, f).lstat().st_size for top, _, files in os.walk(real) for f in files)


def _copy_outcome(node: str, sent: NodeOutcome, finished: NodeOutcome | None) -> TransferOutcome:
    if finished is None:
        return TransferOutcome(node=node, ok=False, error=why(sent))
    if finished.rc == 0:
        return TransferOutcome(node=node, ok=True, path=finished.stdout.strip().splitlines()[-1])
    if sent.rc != 0:  # "no directory DEST here" says more than scp's message about a temporary name
        reason = why(finished) if "gpunet: no directory" in finished.stderr else why(sent)
        return TransferOutcome(node=node, ok=False, error=reason)
    return TransferOutcome(node=node, ok=False, error=why(finished))


class _Remote(Frozen):
    archive: str
    compress: str
    top: str
    manifest: dict[str, str]


def gather_from(runner: ClusterShellRunner, nodes: NodeSet, source: str, out: Path, *, compress: str = "auto",
                progress: Phase | None = None, timeout: float | None = None) -> TransferResult:
    """SOURCE from every node to OUT/<node>/<name>."""
    source = remote_path(source, "source")
    name = PurePosixPath(source).name
    if not name:
        raise UsageError(f"source {source!r}: name a file or directory, not /")
    output_root(out)
    with multiplexed(runner) as shared:
        result = gather_each(shared, {n: source for n in nodes}, out, compress=compress, progress=progress,
                             timeout=timeout, place=lambda node, unpacked: place(unpacked, out, node, name))
    return result.model_copy(update={"source": source})


def gather_each(runner: ClusterShellRunner, sources: Mapping[str, str], out: Path, *, place: Placer,
                compress: str = "auto", progress: Phase | None = None, timeout: float | None = None,
                remove_source: bool = False) -> TransferResult:
    """Each node's own SOURCE, unpacked and checked here, then handed to `place`; with
    `remove_source`, SOURCE is removed from the node afterwards (a capture's directory)."""
    if compress not in COMPRESS_CHOICES:
        raise UsageError(f"--compress {compress!r}: one of {', '.join(COMPRESS_CHOICES)}")
    start, total = time.monotonic(), len(sources)
    packed = run_each(runner, {n: ["sh", "-c", GATHER_PACK, "gpunet-gather", s, compress] for n, s in sources.items()},
                      timeout=timeout, on_done=_tick(progress, "prepare", total))
    remotes, outcomes = _read_packed(packed)
    stage = out / f".gpunet-gather-{secrets.token_hex(4)}"
    stage.mkdir(mode=0o700)
    try:
        for node in remotes:
            (stage / node).mkdir(mode=0o700)
        got = copy_each(runner, {n: (r.archive, str(stage / n)) for n, r in remotes.items()}, reverse=True,
                        timeout=timeout, on_done=_tick(progress, "fetch", len(remotes)))
        tick = _tick(progress, "check", len(remotes))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            checked = {n: pool.submit(_accept, runner, n, remotes[n], got[n], stage=stage, placer=place, tick=tick)
                       for n in remotes}
        outcomes.update({n: future.result() for n, future in checked.items()})
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        _clean(runner, remotes, sources if remove_source else {})
    good = [o for o in outcomes.values() if o.ok]
    return TransferResult(operation="gather", source="", dest=str(out),
                          files=sum(len(remotes[o.node].manifest) for o in good), bytes=sum(o.bytes for o in good),
                          packed_bytes=sum(o.packed_bytes for o in good),
                          compress=",".join(sorted({r.compress for r in remotes.values()})) or compress,
                          seconds=round(time.monotonic() - start, 3), outcomes=outcomes)


def _clean(runner: ClusterShellRunner, remotes: Mapping[str, _Remote], sources: Mapping[str, str]) -> None:
    """The nodes' archives (a raw file is the node's own: it stays) and, for a capture, its files."""
    doomed = {n: [*([r.archive] if r.compress != "raw" else []), *([sources[n]] if n in sources else [])]
              for n, r in remotes.items()}
    if any(doomed.values()):
        run_each(runner, {n: ["sh", "-c", REMOVE, "gpunet-clean", *paths] for n, paths in doomed.items() if paths},
                 timeout=60)


def _read_packed(packed: Mapping[str, NodeOutcome]) -> tuple[dict[str, _Remote], dict[str, TransferOutcome]]:
    remotes: dict[str, _Remote] = {}
    failed: dict[str, TransferOutcome] = {}
    for node, outcome in packed.items():
        try:
            remotes[node] = _parse_packed(outcome) if outcome.rc == 0 else _raise(why(outcome))
        except (TransferRefused, ParseError) as exc:
            failed[node] = TransferOutcome(node=node, ok=False, error=str(exc))
    return remotes, failed


def _raise(reason: str) -> _Remote:
    raise TransferRefused(reason)


def _parse_packed(outcome: NodeOutcome) -> _Remote:
    """The node's header lines (archive=, compress=, top=) and its manifest."""
    lines = outcome.stdout.splitlines()
    head = dict(line.split("=", 1) for line in lines[:3] if "=" in line)
    if set(head) != {"archive", "compress", "top"} or head["compress"] not in (*COMPRESSORS, "raw"):
        raise TransferRefused(f"unexpected answer: {outcome.stdout[:120]!r}")
    if not head["archive"].startswith("/") or "/" in head["top"] or head["top"] in ("", ".", ".."):
        raise TransferRefused(f"unexpected archive or name: {head['archive']!r} {head['top']!r}")
    manifest = {name.removeprefix("./"): digest for name, digest in parse_manifest("\n".join(lines[3:])).items()}
    return _Remote(archive=head["archive"], compress=head["compress"], top=head["top"], manifest=manifest)


def _accept(runner: ClusterShellRunner, node: str, remote: _Remote, got: NodeOutcome, *, stage: Path,
            placer: Placer, tick: Callable[[str, bool], None]) -> TransferOutcome:
    try:
        archive = fetched(stage / node, remote.archive, target_of(runner, node))
        if got.rc != 0 or archive is None:
            raise TransferRefused(why(got) if got.rc != 0 else "the archive did not arrive")
        wire = archive.stat().st_size
        unpacked, size = accept_raw(archive, stage / node / "x", remote.top, remote.manifest) \
            if remote.compress == "raw" else unpack(archive, stage / node / "x", remote.compress, remote.top,
                                                    remote.manifest)
        outcome = TransferOutcome(node=node, ok=True, path=placer(node, unpacked), bytes=size, packed_bytes=wire)
    except (TransferRefused, OSError) as exc:
        outcome = TransferOutcome(node=node, ok=False, error=str(exc))
    tick(node, outcome.ok)
    return outcome


def place(unpacked: Path, out: Path, node: str, name: str) -> str:
    """unpacked -> OUT/<node>/<name> by rename; a directory there is moved aside first. Never
    through a symlink: OUT/<node> must be a real directory."""
    home = out / node
    if home.is_symlink():
        raise TransferRefused(f"{home} is a symlink; gpunet does not write through one")
    home.mkdir(exist_ok=True)
    final = home / name
    return str(replace(unpacked, final))


def replace(new: Path, final: Path) -> Path:
    """Rename `new` to `final`: atomic for a file; a directory on either side is swapped (the old
    one moved aside, then removed)."""
    if new.is_dir() or (final.is_dir() and not final.is_symlink()):
        aside = final.with_name(f".{final.name}.gpunet-old-{secrets.token_hex(4)}")
        if final.exists() or final.is_symlink():
            final.rename(aside)
        new.rename(final)
        if aside.is_dir() and not aside.is_symlink():
            shutil.rmtree(aside, ignore_errors=True)
        else:
            aside.unlink(missing_ok=True)
        return final
    new.replace(final)
    return final
