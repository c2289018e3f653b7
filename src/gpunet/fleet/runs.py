"""What the admin side remembers of a detached run: its nodes and how they were reached, so
`fleet status NAME` (logs, attach, stop) needs nothing else after the laptop woke up. One small
JSON file per run under $XDG_STATE_HOME/gpunet/runs (~/.local/state/gpunet/runs), replaced whole."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ClusterShell.NodeSet import NodeSet
from pydantic import ValidationError

from gpunet.errors import UsageError
from gpunet.files.inputs import check_private, read_bytes
from gpunet.fleet import ClusterShellRunner, local_runner
from gpunet.fleet.detach import STATE_DIR, DetachedRun, start_detached
from gpunet.model.base import Frozen

TRANSPORT = ("lab", "ssh_lab", "plan", "user", "key")
HERE = "localhost"  # the node name a run on this machine has
MAX_RECORD_BYTES = 1 << 20


class RunRecord(Frozen):
    name: str
    nodes: str  # folded NodeSet
    lab: str | None = None
    ssh_lab: str | None = None
    plan: str | None = None  # absolute path
    user: str | None = None
    key: str | None = None
    local: bool = False  # on this machine (local_runner), not over SSH
    state_dir: str
    command: str
    started: float  # epoch seconds, this machine's clock


def records_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpunet" / "runs"


def save_record(record: RunRecord) -> Path:
    directory = records_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    check_private(directory, "run records")  # a record says how to reach nodes: another user's would steer us
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
    check_private(path.parent, "run records")
    try:
        return RunRecord.model_validate_json(read_bytes(path, MAX_RECORD_BYTES, "run record"))
    except (ValueError, ValidationError) as exc:
        raise UsageError(f"{path} is unreadable ({str(exc).splitlines()[0]}); remove it and name --nodes") from None


def start_recorded(runner: ClusterShellRunner, nodes: NodeSet, name: str, command: Sequence[str], *,
                   transport: Mapping[str, str | None], local: bool = False, state_dir: str = STATE_DIR,
                   via: str = "auto") -> DetachedRun:
    """`start_detached`, remembered here: `gpunet fleet status NAME` then needs only the name.
    `transport` holds fleet's options (lab, ssh_lab, plan, user, key) as the run was reached."""
    run = start_detached(runner, nodes, name, command, state_dir=state_dir, via=via)
    record = RunRecord(name=name, nodes=str(nodes), local=local, state_dir=state_dir, command=shlex.join(command),
                       started=time.time(), **{k: transport.get(k) for k in TRANSPORT})
    save_record(record)
    return run


def detach_here(name: str, command: Sequence[str], *, state_dir: str = STATE_DIR, via: str = "auto") -> DetachedRun:
    """COMMAND detached on this machine (a long `bench run` on the admin or login node): under
    tmux or setsid, its output and exit status kept, `gpunet fleet status|logs|attach NAME` work."""
    return start_recorded(local_runner(), NodeSet(HERE), name, command, transport={}, local=True,
                          state_dir=state_dir, via=via)
