"""Long runs that outlive the connection: a command started on each node under tmux (a private
server, its socket in the run's directory), a transient systemd unit where tmux is absent, or a
setsid'd supervisor where neither is (the lab's namespaces have no systemd). Whatever started it,
the supervisor writes the output and the exit status into the run's directory on the node
(detach_scripts.py), so status, logs and attach read the same files after the admin side, its
SSH connections or the laptop itself went away.

`start_detached` is the one entry point for anything that wants to detach: `bench run --detach`
can start its own command line the same way on the admin or login node (`local_runner()`)."""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from collections.abc import Sequence
from typing import Literal, get_args

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import UsageError
from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.fleet.detach_scripts import ATTACH, FOLLOW, START, STATUS, STOP
from gpunet.fleet.steps import NodeLine, run_each, target_of
from gpunet.fleet.transfer import SSH_FAILED, why
from gpunet.model.base import Frozen
from gpunet.model.nodeset import fold

STATE_DIR = "~/.local/state/gpunet/runs"
VIA = ("auto", "tmux", "systemd", "setsid")
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # no ".": tmux reads it as session.window
STATE_PATH = re.compile(r"(~/|/)[A-Za-z0-9_./-]{0,200}")
State = Literal["running", "done", "stopped", "lost", "missing", "error", "unreachable"]


class RunState(Frozen):
    node: str
    state: State
    rc: int | None = None
    via: str = ""
    pid: int | None = None
    started: int | None = None  # epoch seconds, the node's clock
    ended: int | None = None
    directory: str = ""
    output: str = ""
    error: str | None = None  # why the node gave no state


class DetachedRun(Frozen):
    name: str
    states: dict[str, RunState]

    @property
    def failed(self) -> list[str]:
        """Nodes whose run did not end with exit 0 (or is not there to tell)."""
        return [n for n, s in self.states.items() if not (s.state == "done" and s.rc == 0)]

    @property
    def failed_to_start(self) -> list[str]:
        return [n for n, s in self.states.items() if s.state != "running"]

    @property
    def running(self) -> list[str]:
        return [n for n, s in self.states.items() if s.state == "running"]

    def groups(self) -> list[tuple[str, RunState]]:
        """Nodes in the same state with the same output folded: `gpu[1-8] done, exit 0`."""
        by_key: dict[tuple[str, int | None, str, str | None], list[str]] = defaultdict(list)
        for name, s in self.states.items():
            by_key[s.state, s.rc, s.output, s.error].append(name)
        order = {state: rank for rank, state in enumerate(get_args(State))}
        folded = [(fold(names), self.states[names[0]]) for names in by_key.values()]
        return sorted(folded, key=lambda g: (order[g[1].state], g[1].rc or 0, g[0]))


def check_run(name: str, state_dir: str) -> None:
    """Names that go into paths, a tmux session and a systemd unit: plain tokens only."""
    if not RUN_NAME.fullmatch(name):
        raise UsageError(f"run name {name!r}: 1-64 letters, digits, '_' or '-', starting with a letter or digit")
    if not STATE_PATH.fullmatch(state_dir) or ".." in state_dir.split("/"):
        raise UsageError(f"--state-dir {state_dir!r}: an absolute path or one under ~/, of letters, digits and ./_-")


def start_detached(runner: ClusterShellRunner, nodes: NodeSet, name: str, command: Sequence[str], *,
                   state_dir: str = STATE_DIR, via: str = "auto") -> DetachedRun:
    """Start COMMAND on every node, detached; returns once each has a running supervisor (or says
    why not). A run of the same name still running on a node is refused there."""
    check_run(name, state_dir)
    if via not in VIA:
        raise UsageError(f"--via {via!r}: one of {', '.join(VIA)}")
    if not command:
        raise UsageError("give the command to run after --")
    text = shlex.join(command)
    done = run_each(runner, {n: _script(START, state_dir, name, n, via, text) for n in nodes}, timeout=60)
    return DetachedRun(name=name, states={n: _state(n, o) for n, o in done.items()})


def run_status(runner: ClusterShellRunner, nodes: NodeSet, name: str, *, state_dir: str = STATE_DIR,
               wait: float = 0, lines: int = 5) -> DetachedRun:
    """Each node's state; with `wait`, up to that many seconds for running nodes to finish;
    `lines` of output (-1: all of it)."""
    check_run(name, state_dir)
    seconds = max(0, int(wait))
    done = run_each(runner, {n: _script(STATUS, state_dir, name, n, str(seconds), str(lines)) for n in nodes},
                    timeout=seconds + 60)
    return DetachedRun(name=name, states={n: _state(n, o) for n, o in done.items()})


def follow_output(runner: ClusterShellRunner, nodes: NodeSet, name: str, on_line: NodeLine, *,
                  state_dir: str = STATE_DIR) -> dict[str, NodeOutcome]:
    """Every node's output line by line as it is written, until each run ends."""
    check_run(name, state_dir)
    return run_each(runner, {n: _script(FOLLOW, state_dir, name, n) for n in nodes}, on_line=on_line)


def stop_run(runner: ClusterShellRunner, nodes: NodeSet, name: str, *, state_dir: str = STATE_DIR) -> DetachedRun:
    check_run(name, state_dir)
    done = run_each(runner, {n: _script(STOP, state_dir, name, n) for n in nodes}, timeout=60)
    return DetachedRun(name=name, states={n: _state(n, o) for n, o in done.items()})


def attach_argv(runner: ClusterShellRunner, node: str, name: str, *, state_dir: str = STATE_DIR) -> list[str]:
    """The interactive command line that attaches this terminal to NODE's run: its tmux session,
    else its output followed."""
    check_run(name, state_dir)
    remote = shlex.join(_script(ATTACH, state_dir, name, node))
    if runner.transport == "exec":
        return shlex.split(runner.template.replace("%h", node).replace("%c", shlex.quote(remote)))
    options = [*runner.ssh_options, "-o", "BatchMode=yes", *(["-i", runner.key] if runner.key else []),
               *(["-l", runner.user] if runner.user else [])]
    return ["ssh", "-t", *options, target_of(runner, node), remote]


def _script(script: str, state_dir: str, name: str, node: str, *more: str) -> list[str]:
    return ["sh", "-c", script, "gpunet-run", state_dir, name, node, *more]


def _state(node: str, outcome: NodeOutcome) -> RunState:
    """A node's key=value lines (then `--` and its output); no answer is `unreachable`."""
    head, _, output = outcome.stdout.partition("\n--")
    fields = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    if outcome.rc in (None, SSH_FAILED):
        return RunState(node=node, state="unreachable", error=why(outcome))
    if outcome.rc != 0 or fields.get("state") not in get_args(State):
        return RunState(node=node, state="error", error=why(outcome))
    return RunState(node=node, state=fields["state"], rc=_number(fields.get("rc")), via=fields.get("via", ""),
                    pid=_number(fields.get("pid")), started=_number(fields.get("started")),
                    ended=_number(fields.get("ended")), directory=fields.get("dir", ""),
                    output=output.removeprefix("\n"))


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and re.fullmatch(r"-?[0-9]{1,20}", text.strip()) else None
