"""Every file and answer gpunet reads from outside is read here, one way (README "Untrusted input").

* **Files**: a regular file only. It is opened without waiting (`O_NONBLOCK`: a FIFO would block
  the open until someone writes) and checked on the descriptor that is read, so a rename in
  between changes nothing; /dev/zero, a FIFO, a socket or a directory is refused before a byte is
  read. At most `limit` bytes: a size over it is refused from `fstat`, and `limit + 1` bytes are
  read at most, since a file may grow, or report no size (procfs), while it is read.
* **Answers** (an HTTP body, a node's reply) are read the same way from their stream.
* **Text** is UTF-8 without NUL bytes: a NUL says it is no tool's text output.
* **Numbers** are at most MAX_NUMBER_CHARS characters before Python converts them: `int()` of a
  4 300-digit string raises ValueError (CVE-2020-10735's limit) wherever it happens, and a
  longer parse costs quadratic time below it.
* **JSON** nesting is at most MAX_DEPTH levels (deeper raises RecursionError in the decoder);
  NaN and Infinity are not JSON and are refused.

Refusals of files are UsageError (bad input, exit 2), named by the file; of text and JSON,
ParseError(tool, line), as every parser raises."""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import IO, Any

from gpunet.errors import ParseError, UsageError

MAX_NUMBER_CHARS = 64  # a 64-bit counter is 20 digits, a float in full 24 characters
MAX_DEPTH = 64  # every format gpunet reads nests fewer than 12 levels
CHUNK = 1 << 20
DIGITS = re.compile(rf"-?[0-9]{{1,{MAX_NUMBER_CHARS}}}")  # ASCII only: "²".isdigit() is true, int("²") fails
KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFDIR: "a directory", stat.S_IFSOCK: "a socket", stat.S_IFLNK: "a symlink"}


def mib(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"


def open_regular(path: Path, what: str) -> int:
    """A descriptor of PATH, a regular file; UsageError naming PATH and WHAT it should have been."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind != stat.S_IFREG:
        os.close(fd)
        raise UsageError(f"{path}: not a regular file ({KINDS.get(kind, 'another kind')}); gpunet reads a {what} "
                         "only from a regular file")
    return fd


def check_regular(path: Path, what: str) -> None:
    """PATH is a regular file (a database handed to SQLite, which would block on a FIFO)."""
    os.close(open_regular(path, what))


def read_bytes(path: Path, limit: int, what: str) -> bytes:
    """At most `limit` bytes of a regular file; UsageError when it is not one or holds more."""
    fd = open_regular(path, what)
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UsageError(f"{path}: {size} bytes is over gpunet's limit of {mib(limit)} for a {what}")
        over = f"{path}: over gpunet's limit of {mib(limit)} for a {what}"
        try:
            # one read of the size fstat gave (one buffer, not chunks joined: a 100 MB plan costs 100 MB),
            # then on in chunks only if the file grew meanwhile, or has no size (procfs)
            data = handle.read(size + 1) if size else b""
            if len(data) > limit:
                raise UsageError(over)
            return data + _bounded(handle, limit - len(data), over) if len(data) > size or not size else data
        except OSError as exc:
            raise UsageError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None


def read_stream(stream: IO[bytes], limit: int, source: str) -> bytes:
    """An answer read from its stream, at most `limit` bytes; UsageError naming SOURCE otherwise."""
    return _bounded(stream, limit, f"{source}: the answer is over gpunet's limit of {mib(limit)}")


def _bounded(stream: IO[bytes], limit: int, over: str) -> bytes:
    """limit + 1 bytes at most, read in chunks (a file that grows, or says it is empty, is caught)."""
    data = bytearray()
    while len(data) <= limit:
        chunk = stream.read(min(CHUNK, limit + 1 - len(data)))
        if not chunk:
            return bytes(data)
        data += chunk
    raise UsageError(over)


def read_text(path: Path, limit: int, what: str) -> str:
    """A regular file's text (UTF-8, no NUL), at most `limit` bytes; UsageError otherwise."""
    try:
        return text_of(read_bytes(path, limit, what), what)
    except ParseError as exc:
        raise UsageError(f"{path}: line {exc.line}: {str(exc).split(': ', 2)[-1]}") from None


def text_of(data: bytes, tool: str, *, strict: bool = False) -> str:
    """Bytes as text: UTF-8 (undecodable bytes shown as U+FFFD, as a terminal would, unless
    `strict`: a document must be UTF-8) and no NUL byte, which no text holds."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise ParseError(tool, data.count(b"\n", 0, nul) + 1, f"a NUL byte at offset {nul}: not a {tool} text")
    try:
        return data.decode(errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise ParseError(tool, data.count(b"\n", 0, exc.start) + 1,
                         f"not UTF-8 text: byte {data[exc.start]:#04x} cannot be decoded") from None


def integer(text: str, tool: str, line: int = 1) -> int:
    """An integer of at most MAX_NUMBER_CHARS ASCII digits, or ParseError (never ValueError)."""
    if DIGITS.fullmatch(text.strip()) is None:
        raise ParseError(tool, line, f"not an integer of at most {MAX_NUMBER_CHARS} digits: {text.strip()[:40]!r}")
    return int(text)


def load_json(text: str | bytes, tool: str) -> Any:
    """A JSON document with numbers of at most MAX_NUMBER_CHARS characters and at most MAX_DEPTH
    levels of nesting; ParseError(tool, line) for anything else."""
    try:
        data = json.loads(text, parse_int=lambda s: _number(s, int, tool),
                          parse_float=lambda s: _number(s, float, tool), parse_constant=lambda s: _constant(s, tool))
    except json.JSONDecodeError as exc:
        raise ParseError(tool, exc.lineno, f"not JSON: {exc.msg}") from None
    except RecursionError:
        raise ParseError(tool, 1, f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except UnicodeDecodeError as exc:
        raise ParseError(tool, 1, f"not UTF-8 text at byte {exc.start}") from None
    _check_depth(data, tool)
    return data


def _number(text: str, kind: type[int] | type[float], tool: str) -> int | float:
    if len(text) > MAX_NUMBER_CHARS:
        raise ParseError(tool, 1, f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    number = kind(text)
    if not math.isfinite(number):  # 1e400 is inf: no count, and int() of it raises OverflowError
        raise ParseError(tool, 1, f"a number out of range: {text}")
    return number


def _constant(text: str, tool: str) -> Any:
    raise ParseError(tool, 1, f"{text} is not a JSON value")


def _check_depth(data: Any, tool: str) -> None:
    """Walked without recursion: the decoder bounds nesting only at Python's recursion limit."""
    level: list[Any] = [data]
    for _ in range(MAX_DEPTH + 1):
        level = [child for item in level if isinstance(item, dict | list)
                 for child in (item.values() if isinstance(item, dict) else item)]
        if not level:
            return
    raise ParseError(tool, 1, f"JSON nested deeper than {MAX_DEPTH} levels")


def check_private(directory: Path, what: str) -> None:
    """OpenSSH's StrictModes for a directory gpunet keeps state in and trusts: it and every parent,
    on its physical path, owned by this user or root and writable by no one else (a root-owned
    sticky directory such as /tmp excepted as a parent: no one else can rename what is in it).
    UsageError naming the first that is not."""
    physical = directory.resolve()
    me = os.geteuid()
    for place in (physical, *physical.parents):
        info = os.lstat(place)
        if info.st_uid not in (me, 0):
            raise UsageError(f"{place} belongs to uid {info.st_uid}: gpunet keeps no {what} there")
        sticky_parent = place != physical and info.st_uid == 0 and info.st_mode & stat.S_ISVTX
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_parent:
            raise UsageError(f"{place} is writable by others: gpunet keeps no {what} there")
