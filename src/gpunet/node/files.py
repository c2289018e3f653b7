"""The files a transaction replaces: written atomically, backed up first, restored on revert, and
never outside the node's root."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from gpunet.node.contract import SAFE_PATH, FileEntry, FileRecord


class Refused(Exception):
    """Bad input: nothing was changed (exit 2)."""


def write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write beside, fsync, rename over: a reader sees the old file or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.gpunet-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def under(root: Path, relative: str) -> Path:
    """A manifest path inside the node's root, never outside it."""
    if not SAFE_PATH.match(relative) or ".." in relative.split("/"):
        raise Refused(f"refusing file path {relative!r}: not a plain relative path")
    return root / relative


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def backup_files(root: Path, tx: Path, files: list[FileEntry]) -> list[FileRecord]:
    """Copy every file the transaction will replace; record the ones that did not exist."""
    records = []
    for f in files:
        target = under(root, f["path"])
        record: FileRecord = {"path": f["path"], "new_sha256": sha256(f["content"].encode())}
        if target.is_file():
            data = target.read_bytes()
            saved = tx / "backup" / "files" / f["path"]
            write_atomic(saved, data, 0o600)
            record.update({"existed": True, "old_sha256": sha256(data), "mode": target.stat().st_mode & 0o7777})
        else:
            record["existed"] = False
        records.append(record)
    return records


def restore_files(root: Path, tx: Path, records: list[dict[str, Any]]) -> None:
    for r in records:
        target = under(root, r["path"])
        if r["existed"]:
            write_atomic(target, (tx / "backup" / "files" / r["path"]).read_bytes(), r["mode"])
        else:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
