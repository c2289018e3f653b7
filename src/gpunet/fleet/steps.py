"""Per-node steps through ClusterShell: each node its own command, copy or reverse copy, all in one
task so the fan-out (and, with a topology.conf, the tree through gateways) is ClusterShell's.

Each node gets its own worker because staging names carry the node: the lab's servers share one
filesystem, so one name for all nodes would collide there."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from ClusterShell.Event import EventHandler
from ClusterShell.Task import Task, task_self
from ClusterShell.Worker.Exec import ExecWorker
from ClusterShell.Worker.Worker import Worker

from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.fleet.tree_copy import tree_rcopy

NodeDone = Callable[[str, bool], None]  # node, ok: one call as each node's step ends
NodeLine = Callable[[str, str], None]  # node, a line of its output, as it arrives


@dataclass
class _Ends(EventHandler):  # type: ignore[misc]
    """Per-target end times, reported as they happen (a progress bar moves per node)."""

    names: Mapping[str, str]  # connect target -> node
    on_done: NodeDone | None
    on_line: NodeLine | None = None
    start: float = field(default_factory=time.monotonic)
    ends: dict[str, float] = field(default_factory=dict)

    def ev_hup(self, worker: Worker, node: str, rc: int) -> None:
        del worker
        self.ends[str(node)] = time.monotonic() - self.start
        if self.on_done:
            self.on_done(self.names.get(str(node), str(node)), rc == 0)

    def ev_read(self, worker: Worker, node: str, sname: str, msg: bytes) -> None:
        del worker
        if self.on_line and sname == "stdout":
            self.on_line(self.names.get(str(node), str(node)), bytes(msg).decode(errors="replace"))


@contextmanager
def multiplexed(runner: ClusterShellRunner) -> Iterator[ClusterShellRunner]:
    """The runner with one SSH connection per node shared by every step of an operation (a copy
    is three steps: a handshake each costs more than a small file); the masters are closed at
    the end and, if this process dies first, exit on their own after a minute idle."""
    if runner.transport == "exec" or any(os.path.exists(p) for p in Task.TOPOLOGY_CONFIGS):
        yield runner  # a gateway of the tree mode would not find this machine's sockets
        return
    with tempfile.TemporaryDirectory(prefix="gpunet-cm-") as sockets:
        path = f"{sockets}/%C"
        options = ("-o", "ControlMaster=auto", "-o", f"ControlPath={path}", "-o", "ControlPersist=60")
        try:
            yield replace(runner, ssh_options=(*runner.ssh_options, *options))
        finally:
            closing = [subprocess.Popen(["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "gpunet-mux"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       for socket in Path(sockets).iterdir()]
            for process in closing:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:  # a master that does not answer: ours to end, by PID
                    process.kill()
                    process.wait()


def run_each(runner: ClusterShellRunner, commands: Mapping[str, Sequence[str]], *,
             timeout: float | None = None, on_done: NodeDone | None = None,
             on_line: NodeLine | None = None) -> dict[str, NodeOutcome]:
    """Each node its own argv (run by the node's shell, `shlex.join`ed)."""
    return _run(runner, {node: ("shell", shlex.join(argv), "") for node, argv in commands.items()},
                timeout=timeout, on_done=on_done, on_line=on_line)


def copy_each(runner: ClusterShellRunner, copies: Mapping[str, tuple[str, str]], *, reverse: bool = False,
              timeout: float | None = None, on_done: NodeDone | None = None) -> dict[str, NodeOutcome]:
    """ClusterShell's copy (scp, or tar through gateways in tree mode): node -> (source, dest).
    Forward: a local file to a remote file path. Reverse: a remote file into a local directory,
    which then holds it as `basename` or `basename.<target>` (see `fetched`)."""
    kind = "rcopy" if reverse else "copy"
    return _run(runner, {node: (kind, src, dst) for node, (src, dst) in copies.items()},
                timeout=timeout, on_done=on_done)


def fetched(directory: Path) -> Path | None:
    """The file a reverse copy left in a node's own directory (scp and the tree mode name it
    `<basename>.<node>` after different names of the node): the one file there."""
    files = [p for p in directory.iterdir() if p.is_file() and not p.is_symlink()]
    return files[0] if len(files) == 1 else None


def target_of(runner: ClusterShellRunner, node: str) -> str:
    return runner.addresses.get(node, node)


def _run(runner: ClusterShellRunner, steps: Mapping[str, tuple[str, str, str]], *, timeout: float | None,
         on_done: NodeDone | None, on_line: NodeLine | None = None) -> dict[str, NodeOutcome]:
    task = task_self()
    task.set_info("fanout", runner.fanout)
    if runner.transport != "exec":
        runner.configure_ssh(task)
    targets = {target_of(runner, node): node for node in steps}
    ends = _Ends(names=targets, on_done=on_done, on_line=on_line)
    limit = timeout if timeout and timeout > 0 else None
    workers = {node: _schedule(task, runner, target_of(runner, node), step, ends=ends, timeout=limit)
               for node, step in steps.items()}
    task.run()
    return {node: _outcome(worker, node, target_of(runner, node), ends) for node, worker in workers.items()}


def _schedule(task: Task, runner: ClusterShellRunner, target: str, step: tuple[str, str, str], *, ends: _Ends,
              timeout: float | None) -> Worker:
    kind, first, second = step
    if runner.transport == "exec":  # the lab's servers share this filesystem: a copy is a local cp
        command = runner.exec_command(first) if kind == "shell" else shlex.join(
            ["cp", "--", first, second] if kind == "copy" else ["cp", "--", first, f"{second}/"]).replace("%", "%%")
        worker = ExecWorker(nodes=target, handler=ends, stderr=True, timeout=timeout, command=command)
        task.schedule(worker)
        return worker
    if kind == "shell":
        return task.shell(first, nodes=target, handler=ends, stderr=True, timeout=timeout)
    if kind == "rcopy":  # through gateways, the node's own tar: unpacked by gpunet, not ClusterShell
        checked = tree_rcopy(task, first, second, target, handler=ends, timeout=timeout)
        if checked is not None:
            return checked
    return task.copy(first, second, nodes=target, handler=ends, stderr=True, timeout=timeout,
                     reverse=kind == "rcopy")


def _outcome(worker: Worker, node: str, target: str, ends: _Ends) -> NodeOutcome:
    timed_out = target in {str(k) for k in worker.iter_keys_timeout()}
    try:
        rc: int | None = None if timed_out else int(worker.node_retcode(target))
    except KeyError:
        rc = None
    out = bytes(worker.node_buffer(target) or b"").decode(errors="replace")
    err = bytes(worker.node_error(target) or b"").decode(errors="replace")
    error = "timed out" if timed_out else None if rc is not None else "no exit status"
    return NodeOutcome(node=node, rc=rc, stdout=out, stderr=err, error=error,
                       duration_s=round(ends.ends.get(target, 0.0), 3))
