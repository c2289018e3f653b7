"""What the admin side remembers of a detached run: its nodes and how they were reached, so
`fleet status NAME` (logs, attach, stop) needs nothing else after the laptop woke up. One small
JSON file per run under $XDG_STATE_HOME/gpunet/runs (~/.local/state/gpunet/runs), replaced whole."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import ValidationError

from gpunet.errors import UsageError
from gpunet.model.base import Frozen


class RunRecord(Frozen):
    name: str
    nodes: str  # folded NodeSet
    lab: str | None = None
    ssh_lab: str | None = None
    plan: str | None = None  # absolute path
    user: str | None = None
    key: str | None = None
    state_dir: str
    command: str
    started: float  # epoch seconds, this machine's clock


def records_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpunet" / "runs"


def save_record(record: RunRecord) -> Path:
    directory = records_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{record.name}.json"
    tmp = directory / f".{record.name}.json.tmp"
    tmp.write_text(record.model_dump_json(indent=1))
    tmp.replace(path)
    return path


def load_record(name: str) -> RunRecord | None:
    """The record of run NAME (checked like any input), None when this machine has none."""
    path = records_dir() / f"{name}.json"
    if not path.is_file():
        return None
    try:
        return RunRecord.model_validate_json(path.read_text())
    except (OSError, ValueError, ValidationError) as exc:
        raise UsageError(f"{path} is unreadable ({str(exc).splitlines()[0]}); remove it and name --nodes") from None


def new_record(name: str, nodes: str, state_dir: str, command: str, **transport: str | None) -> RunRecord:
    return RunRecord(name=name, nodes=nodes, state_dir=state_dir, command=command, started=time.time(), **transport)
