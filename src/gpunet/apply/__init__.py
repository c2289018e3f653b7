"""`gpunet apply`: the rendered configuration pushed to nodes with a backup, verification against
the Plan, a confirmation over a new SSH connection, and an automatic revert by a guard on the node
that does not depend on the SSH session (see rollout.py, and gpunet.node for the agent)."""

from __future__ import annotations

import difflib
from typing import Any

from ClusterShell.NodeSet import NodeSet
from pydantic import ValidationError

from gpunet.apply.answers import FilesAnswer, problem
from gpunet.apply.manifest import node_manifest
from gpunet.apply.remote import Remote, Reply, agent_argv, call, status_of
from gpunet.apply.rollout import ApplyOptions, ApplyReport, apply_rollout
from gpunet.errors import UsageError
from gpunet.model.base import Frozen
from gpunet.model.plan import Plan
from gpunet.node.contract import ROOT_MARK

__all__ = ["ApplyOptions", "ApplyReport", "NodeDryRun", "Remote", "apply_rollout", "dry_run", "rollback", "status"]


def status(remote: Remote, nodes: NodeSet) -> dict[str, Reply]:
    """How each node's last apply ended (settling one nobody looks after any more)."""
    return status_of(remote, list(nodes))


def rollback(remote: Remote, nodes: NodeSet) -> dict[str, Reply]:
    """Revert the transaction each node is waiting to have confirmed (a committed one stays)."""
    current = status_of(remote, list(nodes))
    pending = {n: r.data["txid"] for n, r in current.items()
               if r.ok and r.data.get("state") == "applied" and r.data.get("txid")}
    done = call(remote, {n: agent_argv(remote, "abort", txid, "--reason", "rolled back by the admin")
                         for n, txid in pending.items()})
    return {n: done.get(n, r) for n, r in current.items()}


class FileChange(Frozen):
    path: str
    diff: str  # unified diff; "" when unchanged


class NodeDryRun(Frozen):
    node: str
    error: str = ""
    files: tuple[FileChange, ...] = ()
    sysctl: tuple[str, ...] = ()  # "key: old -> new"
    runtime: tuple[str, ...] = ()  # the commands apply would run, per target


def dry_run(plan: Plan, nodes: NodeSet, remote: Remote, targets: tuple[str, ...]) -> list[NodeDryRun]:
    """Each node's files as they are against the rendered ones, the sysctl values that would change
    and the commands the apply would run. Reads only."""
    manifests = {}
    for n in nodes:
        node = plan.node(n)
        if node is None:
            raise UsageError(f"{n}: not in the plan")
        manifests[n] = node_manifest(plan, node, targets, remote.where, txid="dryrun00", token="", timeout_s=1)
    argv = {n: agent_argv(remote, "files", *[a for k in _sysctl_wanted(m) for a in ("--sysctl", k)],
                          *[f["path"] for f in m["files"]]) for n, m in manifests.items()}
    replies = call(remote, argv)
    return [_node_dry_run(n, manifests[n], replies[n]) for n in nodes]


def _sysctl_wanted(manifest: dict[str, Any]) -> dict[str, str]:
    return {k: v for t in manifest["targets"] for k, v in t.get("sysctl_values", {}).items()}


def _node_dry_run(node: str, manifest: dict[str, Any], reply: Reply) -> NodeDryRun:
    if not reply.ok:
        return NodeDryRun(node=node, error=reply.error)
    try:
        answer = FilesAnswer.model_validate(reply.data)
    except ValidationError as exc:
        return NodeDryRun(node=node, error=f"the node's answer is not the agent's ({problem(exc)})")
    current, values = answer.files, answer.sysctl
    files = tuple(FileChange(path=f["path"], diff=_diff(f["path"], current.get(f["path"]), f["content"]))
                  for f in manifest["files"])
    wanted = _sysctl_wanted(manifest)
    sysctl = tuple(f"{k}: {values.get(k)} -> {v}" for k, v in wanted.items() if _norm(values.get(k)) != _norm(v))
    runtime = tuple(f"{t['name']}: {_words(a)}" for t in manifest["targets"] for a in t["check"] + t["apply"])
    return NodeDryRun(node=node, files=files, sysctl=sysctl, runtime=runtime)


def _diff(path: str, old: str | None, new: str) -> str:
    before = [] if old is None else old.splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, new.splitlines(keepends=True),
                                        "/dev/null" if old is None else f"a/{path}", f"b/{path}"))


def _norm(value: str | None) -> str:
    return " ".join((value or "").split())


def _words(action: dict[str, Any]) -> str:
    if "run" in action:
        return " ".join(str(w).replace(ROOT_MARK, "/") for w in action["run"])
    if "ip_state" in action:
        return "set links, addresses, routes and policy rules with ip (the lab's netplan)"
    return str(action)
