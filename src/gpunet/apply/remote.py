"""Talking to the agent on many nodes: each call a fresh SSH connection through the fleet runner
(never a shared master, so a call that works proves a new login works), each reply one JSON line."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from gpunet.apply.answers import AgentAnswer, problem
from gpunet.apply.manifest import Where
from gpunet.errors import ParseError
from gpunet.files.inputs import load_json
from gpunet.fleet import ClusterShellRunner, NodeOutcome
from gpunet.fleet.node_gpunet import DEFAULT_PREFIX, FALLBACK_PYTHON, install_command, launch_argv
from gpunet.fleet.steps import run_each
from gpunet.fleet.transfer import why
from gpunet.node.bundle import agent_script

AGENT_SOURCE = agent_script()  # the gpunet.node package as one script
# Every apply connection logs in by key or not at all: a node reached proves the admin's key works
# there, so a keys-only sshd cannot lock the admin out of it.
KEY_ONLY = ("-o", "PreferredAuthentications=publickey", "-o", "PasswordAuthentication=no",
            "-o", "KbdInteractiveAuthentication=no", "-o", "ControlMaster=no", "-o", "ControlPath=none",
            "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3")
REAL_STAGE = "/var/lib/gpunet/apply/incoming"


@dataclass(frozen=True)
class Remote:
    """How to reach the nodes and run the agent and the doctor there."""

    runner: ClusterShellRunner
    where: Where = field(default_factory=Where)
    python: tuple[str, ...] = (FALLBACK_PYTHON,)
    stage: str = REAL_STAGE
    reach_words: tuple[str, ...] = ()  # the options that reach these nodes again (for a fix to paste)

    @classmethod
    def for_lab(cls, runner: ClusterShellRunner, where: Where, reach_words: tuple[str, ...] = ()) -> Remote:
        """A lab's servers share this machine's files: its Python runs there too (gpunet from a
        venv in the server's own tree when `fleet install` put one there)."""
        return cls(runner=key_only(runner), where=where, python=(sys.executable,), reach_words=reach_words)

    def stage_of(self, node: str) -> str:
        """Where a node's bundle lands: in a lab, under the server's own tree, as on a real node (the
        servers share this machine's files, and one stage for all would have every server unpack
        the same bundle into the same place at once: concurrent renames, one of them failing)."""
        return f"{self.where.lab_root}/{node}{self.stage}" if self.where.lab_root else self.stage

    def gpunet(self, node: str) -> list[str]:
        """gpunet on a node: `fleet install`'s venv first, else the node's Python; version checked."""
        root = f"{self.where.lab_root}/{node}" if self.where.lab_root else ""
        return launch_argv(root + DEFAULT_PREFIX, self.python[0])

    def install_fix(self, nodes: str) -> str:
        return install_command(nodes, self.reach_words)

    @property
    def location(self) -> list[str]:
        return ["--lab-root", self.where.lab_root] if self.where.lab_root else ["--root", "/"]


def key_only(runner: ClusterShellRunner) -> ClusterShellRunner:
    return replace(runner, ssh_options=(*runner.ssh_options, *KEY_ONLY))


@dataclass(frozen=True)
class Reply:
    """The agent's answer on one node: its JSON, or why none came (`reached`: SSH worked)."""

    node: str
    data: dict[str, Any]
    error: str = ""
    refused: bool = False
    reached: bool = True

    @property
    def ok(self) -> bool:
        return not self.error


def agent_argv(remote: Remote, command: str, *args: str) -> list[str]:
    """The agent's source travels in the command line: nothing of it need be on the node first."""
    return [*remote.python, "-c", AGENT_SOURCE, command, *remote.location, *args]


def call(remote: Remote, commands: Mapping[str, Sequence[str]], timeout: float = 60) -> dict[str, Reply]:
    """Each node its own agent argv, all at once; a Reply per node."""
    if not commands:
        return {}
    outcomes = run_each(remote.runner, commands, timeout=timeout)
    return {node: reply_of(node, outcome) for node, outcome in outcomes.items()}


def reply_of(node: str, outcome: NodeOutcome) -> Reply:
    data = _json_line(outcome.stdout)
    if outcome.rc in (0, 1, 2) and data is not None:
        try:
            answer = AgentAnswer.model_validate(data)
        except ValidationError as exc:
            return Reply(node, {}, error=f"the node's answer is not the agent's ({problem(exc)})")
        return Reply(node, data, error=answer.error or "", refused=answer.refused)
    reached = outcome.rc not in (None, 255)
    return Reply(node, {}, error=f"{'no answer' if reached else 'unreachable'}: {why(outcome)}", reached=reached)


def _json_line(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            loaded = load_json(line, "gpunet apply agent")
        except ParseError:
            continue
        return loaded if isinstance(loaded, dict) else None
    return None


def status_of(remote: Remote, nodes: Sequence[str], timeout: float = 30) -> dict[str, Reply]:
    return call(remote, {n: agent_argv(remote, "status") for n in nodes}, timeout=timeout)
