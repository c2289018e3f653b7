"""`fleet gather`: each node packs and checksums what was named (or offers a single
incompressible file as it is), the admin host fetches it with ClusterShell's reverse copy into a
staging directory, unpacks it there (nothing outside it), checks every file against the node's
list and renames it into place; the node's temporary archive is removed."""

from __future__ import annotations

import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import ParseError, UsageError
from gpunet.files.write import output_root
from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.fleet.pack import COMPRESSORS, accept_raw, parse_manifest, unpack
from gpunet.fleet.scripts import GATHER_PACK, REMOVE
from gpunet.fleet.steps import copy_each, fetched, multiplexed, run_each
from gpunet.fleet.transfer import (
    COMPRESS_CHOICES,
    Phase,
    Placer,
    TransferOutcome,
    TransferResult,
    reached,
    remote_path,
    tick,
    why,
)
from gpunet.fleet.untar import TransferRefused
from gpunet.model.base import Frozen


class _Remote(Frozen):
    archive: str
    compress: str
    top: str
    manifest: dict[str, str]


def gather_from(runner: ClusterShellRunner, nodes: NodeSet, source: str, out: Path, *, compress: str = "auto",
                progress: Phase | None = None, timeout: float | None = None, mkdir: bool = False) -> TransferResult:
    """SOURCE from every node to OUT/<node>/<name>; OUT must exist unless `mkdir`."""
    source = remote_path(source, "source")
    name = PurePosixPath(source).name
    if not name:
        raise UsageError(f"source {source!r}: name a file or directory, not /")
    if not mkdir and not out.is_dir():
        what = "is not a directory" if out.exists() or out.is_symlink() else "does not exist"
        raise UsageError(f"nothing fetched: {out} {what} here (create it, or pass --mkdir)")
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
                      timeout=timeout, on_done=tick(progress, "prepare", total))
    remotes, outcomes = _read_packed(packed)
    stage = out / f".gpunet-gather-{secrets.token_hex(4)}"
    stage.mkdir(mode=0o700)
    try:
        for node in remotes:
            (stage / node).mkdir(mode=0o700)
        got = copy_each(runner, {n: (r.archive, str(stage / n)) for n, r in remotes.items()}, reverse=True,
                        timeout=timeout, on_done=tick(progress, "fetch", len(remotes)))
        checking = tick(progress, "check", len(remotes))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            checked = {n: pool.submit(_accept, n, remotes[n], got[n], stage=stage, placer=place, done=checking)
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
    # a node whose packing failed has no archive, but its capture would stay
    doomed |= {n: [path] for n, path in sources.items() if n not in remotes}
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
            failed[node] = TransferOutcome(node=node, ok=False, error=str(exc), reached=reached(outcome))
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


def _accept(node: str, remote: _Remote, got: NodeOutcome, *, stage: Path, placer: Placer,
            done: Callable[[str, bool], None]) -> TransferOutcome:
    try:
        archive = fetched(stage / node)
        if got.rc != 0 or archive is None:
            # a tree-mode copy gpunet refused to unpack says why on stderr, its exit status 0
            raise TransferRefused(why(got) if got.rc != 0 or got.stderr.strip() else "the archive did not arrive")
        wire = archive.stat().st_size
        unpacked, size = accept_raw(archive, stage / node / "x", remote.top, remote.manifest) \
            if remote.compress == "raw" else unpack(archive, stage / node / "x", remote.compress, remote.top,
                                                    remote.manifest)
        outcome = TransferOutcome(node=node, ok=True, path=placer(node, unpacked), bytes=size, packed_bytes=wire)
    except (TransferRefused, OSError) as exc:
        outcome = TransferOutcome(node=node, ok=False, error=str(exc))
    done(node, outcome.ok)
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
