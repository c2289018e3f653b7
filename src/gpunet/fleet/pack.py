"""Packing for transfers: one tar stream compressed on the fly (zstd or gzip, their own CLIs, which
every node also has), the sha256 of every file taken in the same pass; and unpacking a node's
archive (untar.py) with nothing landing outside the staging directory and every file checked against the
manifest the node sent.

A copy's archive holds `payload/<name>...` then `manifest.sha256` (sha256sum's format, so the node
checks it with `sha256sum -c`)."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

from gpunet.errors import ParseError, UsageError
from gpunet.fleet.untar import TransferRefused, extract

COMPRESSORS: dict[str, list[str]] = {"zstd": ["zstd", "-q", "-T0", "-1", "-c"], "gzip": ["gzip", "-1", "-c"],
                                     "none": []}
DECOMPRESSORS: dict[str, list[str]] = {"zstd": ["zstd", "-q", "-d", "-c"], "gzip": ["gzip", "-d", "-c"],
                                       "none": []}
PAYLOAD, MANIFEST = "payload", "manifest.sha256"
CHUNK = 1 << 20
PERMISSIONS = 0o777  # what a copy keeps of a file's mode
SUM_LINE = re.compile(r"(\\?)([0-9a-f]{64}) [ *](.+)")
Progress = Callable[[int], None]  # bytes read so far


@dataclass(frozen=True)
class Packed:
    archive: Path
    files: int
    bytes: int  # content read
    packed_bytes: int  # archive size
    compress: str


def pack(source: Path, archive: Path, compress: str, progress: Progress | None = None) -> Packed:
    """SOURCE (a file or a directory) as `payload/<name>`; UsageError when a file vanishes or
    changes while it is read (nothing is sent then)."""
    with archive.open("wb") as out:
        squeeze = subprocess.Popen(COMPRESSORS[compress], stdin=subprocess.PIPE, stdout=out) \
            if COMPRESSORS[compress] else None
        try:
            files, size = _write_tar(source, squeeze.stdin if squeeze and squeeze.stdin else out, progress)
        finally:
            if squeeze:
                _finish(squeeze, compress)
    return Packed(archive=archive, files=files, bytes=size, packed_bytes=archive.stat().st_size, compress=compress)


def _finish(squeeze: subprocess.Popen[bytes], compress: str) -> None:
    if squeeze.stdin:
        squeeze.stdin.close()
    if squeeze.wait() != 0:
        raise UsageError(f"{compress} failed while packing (exit {squeeze.returncode})")


def _write_tar(source: Path, stream: IO[bytes], progress: Progress | None) -> tuple[int, int]:
    lines: list[str] = []
    done = 0
    with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        cast(Any, tar).copybufsize = CHUNK  # 16 KiB reads by default: 64 times the calls and reports
        for path, name in _walk(source):
            info = _info(tar, path, f"{PAYLOAD}/{name}")
            if info.isreg():
                digest = _add_file(tar, info, path, _after(done, progress))
                lines.append(manifest_line(digest, name))
                done += info.size
            else:
                tar.addfile(info)
        body = "".join(lines).encode()
        entry = tarfile.TarInfo(MANIFEST)
        entry.size, entry.mode = len(body), 0o600
        tar.addfile(entry, _Bytes(body))
    return len(lines), done


def _after(base: int, progress: Progress | None) -> Progress:
    """A file's progress as the whole transfer's: `base` bytes were read before it."""
    return lambda n: progress(base + n) if progress else None


def _walk(source: Path) -> Iterator[tuple[Path, str]]:
    """(path, name in the archive), parents first, a directory's entries sorted. A symlink named
    on the command line is followed (its target is what the user means), ones inside are kept."""
    real = source.resolve() if source.is_symlink() else source
    yield real, source.name
    if real.is_dir():
        for top, dirs, files in os.walk(real):
            dirs.sort()
            for entry in [*dirs, *sorted(files)]:
                path = Path(top, entry)
                yield path, str(Path(source.name, path.relative_to(real)))


def _info(tar: tarfile.TarFile, path: Path, arcname: str) -> tarfile.TarInfo:
    try:
        info = tar.gettarinfo(str(path), arcname=arcname)
    except FileNotFoundError:
        raise UsageError(f"{path} vanished while it was being packed; nothing was sent") from None
    if not (info.isreg() or info.isdir() or info.issym()):
        raise UsageError(f"{path} is not a file, directory or symlink; gpunet copies only those")
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode &= PERMISSIONS  # never a setuid, setgid or sticky bit: root unpacks it on every node
    return info


def _opened(path: Path, when: str) -> IO[bytes]:
    """The file to send, opened; a file gone meanwhile is the user's to know (nothing was sent)."""
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise UsageError(f"{path} vanished {when}; nothing was sent") from None


def _add_file(tar: tarfile.TarFile, info: tarfile.TarInfo, path: Path, progress: Progress) -> str:
    """Add one file, hashing what tar reads; UsageError when it vanished, shrank or changed."""
    with _opened(path, "while it was being packed") as handle:
        before = os.fstat(handle.fileno())
        reader = _Hashing(handle, progress)
        try:
            tar.addfile(info, reader)
        except OSError as exc:  # tarfile reads exactly info.size bytes: a shorter file ends early
            raise UsageError(f"{path} changed while it was being packed ({exc}); nothing was sent") from None
    _unchanged(path, before)
    return reader.hash.hexdigest()


def _unchanged(path: Path, before: os.stat_result) -> None:
    try:
        after = path.lstat()
    except FileNotFoundError:
        raise UsageError(f"{path} vanished while it was being packed; nothing was sent") from None
    if (after.st_ino, after.st_size, after.st_mtime_ns) != (before.st_ino, before.st_size, before.st_mtime_ns):
        raise UsageError(f"{path} changed while it was being packed; nothing was sent (copy a finished file)")


class _Hashing:
    """A file object that hashes what is read from it and reports progress."""

    def __init__(self, handle: IO[bytes], progress: Progress) -> None:
        self.handle, self.progress, self.hash, self.read_bytes = handle, progress, hashlib.sha256(), 0

    def read(self, size: int = -1) -> bytes:
        data = self.handle.read(size)
        self.hash.update(data)
        self.read_bytes += len(data)
        self.progress(self.read_bytes)
        return data


class _Bytes:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self.data) if size < 0 else self.at + size
        chunk, self.at = self.data[self.at:end], min(end, len(self.data))
        return chunk


def manifest_line(digest: str, name: str) -> str:
    """sha256sum's line: a name holding a backslash is escaped and the line starts with one."""
    if any(c in name for c in "\n\r"):
        raise UsageError(f"{name!r}: a file name with a line break cannot be checked by sha256sum; rename it")
    if "\\" in name:
        return f"\\{digest}  {name.replace(chr(92), chr(92) * 2)}\n"
    return f"{digest}  {name}\n"


def parse_manifest(text: str) -> dict[str, str]:
    """sha256sum output -> {name: hex digest}; ParseError on a line that is not one."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = SUM_LINE.fullmatch(line)
        if not match:
            raise ParseError("sha256sum", number, f"not a checksum line: {line[:80]!r}")
        escaped, digest, name = match.groups()
        found[_unescape(name) if escaped else name] = digest
    return found


def _unescape(name: str) -> str:
    out, chars = [], iter(name)
    for char in chars:
        if char == "\\":
            nxt = next(chars, "")
            out.append({"n": "\n", "r": "\r", "\\": "\\"}.get(nxt, "\\" + nxt))
        else:
            out.append(char)
    return "".join(out)


def compressible(path: Path) -> bool:
    """Whether the first 4 MiB shrink by a tenth at zlib's fastest level (a checkpoint or an
    archive does not: it then travels as itself, without a tar and a second copy on disk)."""
    with path.open("rb") as handle:
        sample = handle.read(4 << 20)
    return len(zlib.compress(sample, 1)) * 10 <= len(sample) * 9


def digest_file(path: Path, progress: Progress | None = None) -> str:
    """sha256 of a file to be sent as itself; UsageError when it vanishes or changes meanwhile."""
    with _opened(path, "before it was read") as handle:
        before = os.fstat(handle.fileno())
        reader = _Hashing(handle, progress or (lambda n: None))
        while reader.read(CHUNK):
            pass
    _unchanged(path, before)
    return reader.hash.hexdigest()


def accept_raw(fetched: Path, into: Path, top: str, manifest: dict[str, str]) -> tuple[Path, int]:
    """A file that came as itself, checked against the node's sha256 as into/top."""
    into.mkdir(mode=0o700)
    fetched.rename(into / top)
    return into / top, verify(into, top, manifest)


TRAILING_LIMIT = 1 << 20  # bytes after the end marker: tar's record padding is under 10 KiB


def unpack(archive: Path, into: Path, compress: str, top: str, manifest: dict[str, str]) -> tuple[Path, int]:
    """Extract a node's archive into `into` (every member under `top`, regular files and
    directories only: untar.py) and check each file against the manifest; returns into/top and
    the bytes its files hold. TransferRefused if not."""
    into.mkdir(mode=0o700)
    source = subprocess.Popen([*DECOMPRESSORS[compress], str(archive)], stdout=subprocess.PIPE) \
        if DECOMPRESSORS[compress] else None
    try:
        with (source.stdout if source and source.stdout else archive.open("rb")) as stream:
            extract(stream, into, top)
            _drain(stream)
    except BaseException:
        if source:
            source.wait()  # reaped; its exit (SIGPIPE, once the reader stopped) is not the reason
        raise
    if source and source.wait() != 0:
        raise TransferRefused(f"{compress} could not decompress the archive (exit {source.returncode})")
    return into / top, verify(into, top, manifest)


def _drain(stream: IO[bytes]) -> None:
    """Read what follows the archive's end marker (tar pads to whole 10 KiB records): a reader that
    closes first makes the decompressor die of SIGPIPE mid-write, a failure that is no failure.
    More than a record's padding is refused, not read on without end."""
    trailing = stream.read(TRAILING_LIMIT + 1)
    if len(trailing) > TRAILING_LIMIT or trailing.strip(b"\0"):
        raise TransferRefused("the archive is followed by data that is not tar padding")


def verify(into: Path, top: str, manifest: dict[str, str]) -> int:
    """Every regular file under into/top is in the manifest with its digest, and every manifest
    entry is there; returns the bytes they hold."""
    found = {str(p.relative_to(into)): p for p in _files(into / top)}
    missing = sorted(set(manifest) - set(found))
    extra = sorted(set(found) - set(manifest))
    if missing or extra:
        raise TransferRefused(f"files differ from the node's manifest: missing {missing[:3]}, unlisted {extra[:3]}")
    for name, path in found.items():
        if file_digest(path) != manifest[name]:
            raise TransferRefused(f"checksum mismatch: {name}")
    return sum(path.stat().st_size for path in found.values())


def _files(root: Path) -> Iterator[Path]:
    if stat.S_ISREG(root.lstat().st_mode):
        yield root
        return
    for top, _dirs, files in os.walk(root):
        for name in files:
            if stat.S_ISREG(Path(top, name).lstat().st_mode):
                yield Path(top, name)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
