"""Writing rendered text to disk: atomic per file, and only when the content changed."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_if_changed(path: Path, text: str, mode: int = 0o644) -> bool:
    """Atomically replace `path` with `text`; False (and no write) when it already holds it."""
    data = text.encode()
    try:
        if path.read_bytes() == data and path.stat().st_mode & 0o777 == mode:
            return False
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def write_files(directory: Path, files: dict[str, str], mode: Callable[[str], int] = lambda _: 0o644) -> list[str]:
    """Write every file under `directory`; returns the names that changed."""
    return [name for name, text in files.items() if write_if_changed(directory / name, text, mode(name))]
