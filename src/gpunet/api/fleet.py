"""`gpunet fleet`: one command on many nodes, files to and from them, packet captures, and runs
that outlive the connection. Nodes are reached as `gpunet.reach` says: a lab's servers over real
SSH with the lab's key, or real nodes at the Plan's management addresses."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet import __version__
from gpunet.errors import UsageError
from gpunet.fleet import ClusterShellRunner, FleetResult, local_runner
from gpunet.fleet.capture import capture as run_capture
from gpunet.fleet.capture import capture_plan
from gpunet.fleet.detach import STATE_DIR, VIA, DetachedRun, attach_argv, check_run, follow_output, run_status, stop_run
from gpunet.fleet.gather import gather_from
from gpunet.fleet.install import InstallResult, install_to
from gpunet.fleet.node_gpunet import DEFAULT_PREFIX
from gpunet.fleet.runs import detach_here, load_record, start_recorded
from gpunet.fleet.steps import NodeLine
from gpunet.fleet.transfer import COMPRESS_CHOICES, Phase, TransferResult, copy_to, remote_path
from gpunet.fleet.wheels import WHEELHOUSE, collect
from gpunet.reach import Reach

__all__ = ["COMPRESS_CHOICES", "DEFAULT_PREFIX", "STATE_DIR", "VIA", "WHEELHOUSE", "Capture", "DetachedRun",
           "FleetResult", "InstallResult", "NodeSet", "Reach", "RunAccess", "TransferResult", "access_started",
           "attach", "capture", "capture_seconds", "copy", "detach_here", "follow", "gather", "install", "reach",
           "resolve_run", "run", "start_detached", "status", "stop"]


def reach(nodes: str, *, lab: str | None = None, plan: Path | None = None, user: str | None = None,
          key: Path | None = None, fanout: int = 64, connect_timeout: float = 10, timeout: float = 600
          ) -> tuple[NodeSet, Reach]:
    """The nodes a NodeSet names and how to reach them: a lab's servers over SSH with the lab's key
    (the real path), or nodes at the management addresses of --plan (bad input: exit 2)."""
    how = (Reach.of_lab(lab, "ssh", fanout=fanout, connect_timeout=connect_timeout, timeout=timeout) if lab else
           Reach.of_nodes(plan, user, key, fanout=fanout, connect_timeout=connect_timeout, timeout=timeout))
    return how.nodes(nodes), how


def run(reached: Reach, nodes: NodeSet, command: Sequence[str]) -> FleetResult:
    """COMMAND on every node; each node's outcome is data, identical outcomes fold."""
    return reached.runner().run(command, nodes)


def start_detached(reached: Reach, nodes: NodeSet, name: str, command: Sequence[str], *, via: str,
                   state_dir: str | None) -> tuple[DetachedRun, str]:
    """Start COMMAND detached on each node (tmux, a systemd unit or setsid) and remember how the
    nodes were reached, so `fleet status NAME` needs only the name; the run and its state dir."""
    where = state_dir or STATE_DIR
    transport = {"ssh_lab": reached.lab if reached.kind == "lab" else None,
                 "plan": str(reached.plan_path.resolve()) if reached.plan_path else None, "user": reached.user,
                 "key": str(reached.key.resolve()) if reached.key else None}
    started = start_recorded(reached.runner(), nodes, name, command, transport=transport, state_dir=where, via=via)
    return started, where


@dataclass(frozen=True)
class RunAccess:
    """A detached run found again: its nodes, the runner that reaches them, where its state lives."""

    nodes: NodeSet
    runner: ClusterShellRunner
    state_dir: str


def resolve_run(name: str, nodes: str | None, *, lab: str | None, plan: Path | None, user: str | None,
                key: Path | None, fanout: int, state_dir: str | None) -> RunAccess:
    """Nodes, runner and state directory of run NAME: the options given, else the run's record."""
    check_run(name, state_dir or STATE_DIR)
    record = load_record(name)
    if nodes is None and record is None:
        raise UsageError(f"no record of run {name!r} on this machine: name the nodes and how to reach them")
    if record and record.local and not (nodes or lab or plan):
        return RunAccess(NodeSet(record.nodes), local_runner(), state_dir or record.state_dir)
    transport: str = "ssh"
    if record and not (lab or plan):
        lab, transport = (record.ssh_lab, "ssh") if record.ssh_lab else (record.lab, "exec")
        plan = Path(record.plan) if record.plan else None
        user, key = user or record.user, key or (Path(record.key) if record.key else None)
    how = (Reach.of_lab(lab, transport, fanout=fanout) if lab  # type: ignore[arg-type]
           else Reach.of_nodes(plan, user, key, fanout=fanout))
    wanted = how.nodes(nodes or (record.nodes if record else ""))
    return RunAccess(wanted, how.runner(), state_dir or (record.state_dir if record else STATE_DIR))


def access_started(reached: Reach, started: DetachedRun, state_dir: str) -> RunAccess:
    """The nodes where a run just started, to follow it."""
    return RunAccess(NodeSet.fromlist(started.running), reached.runner(), state_dir)


def status(access: RunAccess, name: str, *, wait: float = 0, lines: int = 5) -> DetachedRun:
    return run_status(access.runner, access.nodes, name, state_dir=access.state_dir, wait=wait, lines=lines)


def follow(access: RunAccess, name: str, on_line: NodeLine) -> None:
    """Stream each node's output line by line until the run ends (on_line(node, line))."""
    follow_output(access.runner, access.nodes, name, on_line, state_dir=access.state_dir)


def stop(access: RunAccess, name: str) -> DetachedRun:
    return stop_run(access.runner, access.nodes, name, state_dir=access.state_dir)


def attach(access: RunAccess, name: str) -> list[str]:
    """The argv that puts this terminal on the run's only node (its tmux session, else its output)."""
    if len(access.nodes) != 1:
        raise UsageError(f"run {name} is on {access.nodes}: name one node to attach to")
    return attach_argv(access.runner, str(access.nodes), name, state_dir=access.state_dir)


def copy(reached: Reach, nodes: NodeSet, source: Path, dest: str, *, compress: str, timeout: float,
         progress: Phase | None = None, mkdir: bool = False) -> TransferResult:
    """SOURCE to DEST on every node, packed once, checked with sha256 there, renamed into place.
    DEST is checked on every node first: missing anywhere refuses the copy (nothing sent), or
    with `mkdir` it is created."""
    return copy_to(reached.runner(), nodes, source, dest, compress=compress, progress=progress, timeout=timeout,
                   missing_dest="create" if mkdir else "refuse")


def gather(reached: Reach, nodes: NodeSet, source: str, out: Path, *, compress: str, timeout: float,
           progress: Phase | None = None, mkdir: bool = False) -> TransferResult:
    """SOURCE from every node into OUT/<node>/, checked here, never half-written; OUT must exist
    unless `mkdir`."""
    return gather_from(reached.runner(), nodes, source, out, compress=compress, progress=progress, timeout=timeout,
                       mkdir=mkdir)


@dataclass(frozen=True)
class Capture:
    """What to capture: interfaces or a plane, a filter, and its bounds."""

    iface: Sequence[str] = ()
    plane: str | None = None
    between: str | None = None
    bpf: str = ""
    count: int | None = None
    duration: float | None = None
    snaplen: int = 0
    limit: float = 600


def capture_seconds(reached: Reach, nodes: NodeSet, wanted: Capture) -> tuple[dict[str, list[str]], str, float]:
    """The interfaces per node, the filter and the bound in seconds (refused when unbounded)."""
    return capture_plan(nodes, reached.plan(), iface=list(wanted.iface), plane=wanted.plane, between=wanted.between,
                        bpf=wanted.bpf, count=wanted.count, duration=wanted.duration, limit=wanted.limit)


def capture(reached: Reach, interfaces: dict[str, list[str]], out: Path, *, expression: str, seconds: float,
            wanted: Capture) -> TransferResult:
    """tcpdump on each node's interfaces, bounded; the pcaps come back through gather."""
    return run_capture(reached.runner(), interfaces, out, count=wanted.count, seconds=seconds, bpf=expression,
                       snaplen=wanted.snaplen)


def install(reached: Reach, nodes: NodeSet, *, wheelhouse: Path, prefix: str = DEFAULT_PREFIX,
            timeout: float = 600) -> InstallResult:
    """This gpunet into PREFIX/venv on every node, from wheels only: its own (from the wheelhouse, or
    built from its source tree) and its dependencies' from WHEELHOUSE; no index is reached, here or
    there. A dependency missing from the wheelhouse is named with the command that fetches it (exit
    3, nothing sent); per-node failures (no venv module, pip refusing) are data."""
    prefix = remote_path(prefix, "--prefix")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpunet-install-") as work:
        wheels = collect(wheelhouse.expanduser(), Path(work) / "wheels")
        outcomes = install_to(reached.runner(), {n: reached.node_path(n, prefix) for n in nodes},
                              Path(work) / "wheels", reached.node_python(), timeout=timeout)
    return InstallResult(version=__version__, prefix=prefix, wheels=tuple(sorted(p.name for p in wheels)),
                         seconds=round(time.monotonic() - start, 3), outcomes=outcomes)
