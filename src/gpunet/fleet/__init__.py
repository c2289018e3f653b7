"""Running one command on many nodes through ClusterShell: SSH to real nodes, `ip netns exec`
into lab servers, or locally; a node's failure is data (DESIGN.md #7)."""

from __future__ import annotations

import shlex
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ClusterShell.Event import EventHandler
from ClusterShell.NodeSet import NodeSet
from ClusterShell.Task import task_self
from ClusterShell.Worker.Exec import ExecWorker
from ClusterShell.Worker.Worker import Worker

from gpunet.model.base import Frozen
from gpunet.model.nodeset import fold


class NodeOutcome(Frozen):
    node: str
    rc: int | None  # None: no exit status (timed out, could not connect)
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    duration_s: float = 0.0


class FleetResult(Frozen):
    command: str
    outcomes: dict[str, NodeOutcome]

    @property
    def failed(self) -> list[str]:
        return [n for n, o in self.outcomes.items() if o.rc != 0]

    def groups(self) -> list[tuple[str, NodeOutcome]]:
        """Identical outcomes folded: [("gpu[01-07]", outcome), ("gpu08", other)], like clush -b."""
        by_key: dict[tuple[int | None, str, str, str | None], list[str]] = defaultdict(list)
        for name, o in self.outcomes.items():
            by_key[o.rc, o.stdout, o.stderr, o.error].append(name)
        folded = [(fold(names), self.outcomes[names[0]]) for names in by_key.values()]
        return sorted(folded, key=lambda g: (g[1].rc != 0, g[0]))


@dataclass
class _Timing(EventHandler):  # type: ignore[misc]
    """Per-node end times, so each outcome carries its own duration."""

    start: float = field(default_factory=time.monotonic)
    ends: dict[str, float] = field(default_factory=dict)

    def ev_hup(self, worker: Worker, node: str, rc: int) -> None:
        del worker, rc
        self.ends[str(node)] = time.monotonic() - self.start


@dataclass(frozen=True)
class ClusterShellRunner:
    """`transport` "ssh" reaches nodes by name (or `addresses`); "exec" runs `template` locally,
    %h standing for the node (the lab: ip netns exec per server)."""

    transport: str = "ssh"
    template: str = "%c"
    user: str | None = None
    key: str | None = None
    ssh_options: tuple[str, ...] = ()
    connect_timeout: float = 10
    command_timeout: float = 600
    fanout: int = 64
    addresses: dict[str, str] = field(default_factory=dict)  # node -> address to connect to

    def run(self, command: Sequence[str], nodes: NodeSet) -> FleetResult:
        cmd = shlex.join(command)
        task, timing = task_self(), _Timing()
        task.set_info("fanout", self.fanout)
        targets = {self.addresses.get(n, n): n for n in nodes}
        if self.transport == "exec":
            task.schedule(ExecWorker(nodes=NodeSet.fromlist(targets), handler=timing, stderr=True,
                                     timeout=self.command_timeout, command=self.exec_command(cmd)))
        else:
            self.configure_ssh(task)
            task.shell(cmd, nodes=NodeSet.fromlist(targets), handler=timing, stderr=True, timeout=self.command_timeout)
        task.run()
        return FleetResult(command=cmd, outcomes=_collect(task, targets, timing))

    def exec_command(self, command: str) -> str:
        """The template with the command in place of %c; any other % in the command doubled, as
        ClusterShell reads %h, %n and %% in an exec worker's command (`date +%s` would fail)."""
        return self.template.replace("%c", shlex.quote(command).replace("%", "%%"))

    def configure_ssh(self, task: object) -> None:
        """The task's ssh and scp options: batch mode, this runner's key, user and timeouts."""
        options = [*self.ssh_options, "-o", "BatchMode=yes"]
        if self.key:
            options += ["-i", self.key, "-o", "IdentitiesOnly=yes"]
        if self.user:
            task.set_info("ssh_user", self.user)  # type: ignore[attr-defined]
        task.set_info("ssh_options", shlex.join(options))  # type: ignore[attr-defined]
        task.set_info("connect_timeout", self.connect_timeout)  # type: ignore[attr-defined]


def _collect(task: object, targets: dict[str, str], timing: _Timing) -> dict[str, NodeOutcome]:
    out: dict[str, str] = {}
    err: dict[str, str] = {}
    rcs: dict[str, int] = {}
    for buf, keys in task.iter_buffers():  # type: ignore[attr-defined]
        out.update({str(k): bytes(buf).decode(errors="replace") for k in keys})
    for buf, keys in task.iter_errors():  # type: ignore[attr-defined]
        err.update({str(k): bytes(buf).decode(errors="replace") for k in keys})
    for rc, keys in task.iter_retcodes():  # type: ignore[attr-defined]
        rcs.update({str(k): rc for k in keys})
    timed_out = {str(k) for k in task.iter_keys_timeout()}  # type: ignore[attr-defined]
    return {
        name: NodeOutcome(node=name, rc=None if target in timed_out else rcs.get(target),
                          stdout=out.get(target, ""), stderr=err.get(target, ""),
                          error="timed out" if target in timed_out else None if target in rcs else "no exit status",
                          duration_s=round(timing.ends.get(target, 0.0), 3))
        for target, name in targets.items()
    }


def lab_runner(lab_id: str, uts_dir: str, timeout: float = 600) -> ClusterShellRunner:
    """The lab's servers through the same ClusterShell path: ip netns exec into each (%h is
    the server, %c the command)."""
    template = f"nsenter --uts={uts_dir}/gn{lab_id}-%h ip netns exec gn{lab_id}-%h sh -c %c"
    return ClusterShellRunner(transport="exec", template=template, command_timeout=timeout)


def local_runner(timeout: float = 600) -> ClusterShellRunner:
    return ClusterShellRunner(transport="exec", template="sh -c %c", command_timeout=timeout)
