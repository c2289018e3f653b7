"""Extract a ttar archive (the plain-text tar of prometheus/procfs and node_exporter test fixtures)
into a directory: what their `ttar -x` script does, in Python, so the stored archives stay the
upstream bytes and need no bash to unpack.

Format: `Directory: p`, `Path: p` + `Lines: n` + n lines of content, `SymlinkTo: target` after a
`Path:`, `Mode: m`, and `# ...` separators. In content, a line ending in `EOF` has no newline,
`NULLBYTE` is a NUL byte, and a backslash before either keeps it literal."""

from __future__ import annotations

import os
import re
from pathlib import Path

EOF_MARK = re.compile(rb"(?<!\\)EOF$")
NULL_MARK = re.compile(rb"(?<!\\)NULLBYTE")


def extract_ttar(archive: Path, dest: Path) -> None:
    """Bytes, not text: content may hold a CR or bytes that are not UTF-8."""
    lines = archive.read_bytes().split(b"\n")
    index, path = 0, dest
    while index < len(lines):
        line, index = lines[index].decode(errors="replace"), index + 1
        keyword, _, value = line.partition(": ")
        if keyword in {"Path", "Directory"}:
            path = _inside(dest, value)
            if keyword == "Directory":
                path.mkdir(parents=True, exist_ok=True)
        elif keyword == "Lines":
            _write(path, lines[index:index + int(value)])
            index += int(value)
        elif keyword in {"SymlinkTo", "Mode"}:
            _link_or_mode(path, keyword, value)
        elif line and not line.startswith("#"):
            raise ValueError(f"ttar line {index}: unknown keyword in {line!r}")


def _link_or_mode(path: Path, keyword: str, value: str) -> None:
    if keyword == "SymlinkTo":
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(value, path)
    elif not path.is_symlink():  # a link's mode is its target's
        path.chmod(int(value, 8))


def _inside(dest: Path, relative: str) -> Path:
    path = dest / relative
    if ".." in Path(relative).parts or Path(relative).is_absolute():
        raise ValueError(f"ttar path {relative!r} leaves the destination")
    return path


def _write(path: Path, content: list[bytes]) -> None:
    parts = []
    for raw in content:
        ends = EOF_MARK.search(raw) is None
        data = EOF_MARK.sub(b"", raw).replace(b"\\EOF", b"EOF")
        parts.append(NULL_MARK.sub(b"\0", data).replace(b"\\NULLBYTE", b"NULLBYTE") + (b"\n" if ends else b""))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(parts))
