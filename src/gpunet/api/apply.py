"""`gpunet apply`: the rendered configuration pushed with a backup, verification against the Plan,
a confirmation over a new SSH connection and an automatic revert by a guard on each node."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet.apply import ApplyOptions, ApplyReport, NodeDryRun, Remote, apply_rollout, dry_run, rollback, status
from gpunet.apply.keys import install_key_on, read_public_key
from gpunet.apply.manifest import DEFAULT_TARGETS, TARGETS, Where
from gpunet.apply.remote import Reply, key_only
from gpunet.errors import UsageError
from gpunet.model.plan import Plan
from gpunet.reach import Reach
from gpunet.spec.plan import plan_of

__all__ = ["DEFAULT_TARGETS", "TARGETS", "ApplyOptions", "ApplyReport", "NodeDryRun", "Reply", "Target", "dry_run",
           "install_key", "reach", "rollback", "run", "status", "targets_of"]

Progress = Callable[[str, int, int], None]
Target = str


def reach(*, lab: str | None, plan: Path | None, user: str | None = None, key: Path | None = None,
          fanout: int = 64, connect_timeout: float = 10) -> tuple[Plan, Remote, Reach]:
    """The plan to apply, how to reach its nodes (the Remote the agent is called through, the Reach
    that names them): a lab's servers over real SSH with the lab's plan (lab addresses), or real
    nodes at their management addresses."""
    if lab:
        reached = Reach.of_lab(lab, "ssh", fanout=fanout, connect_timeout=connect_timeout)
        servers, pids = reached.apply_paths()
        remote = Remote.for_lab(reached.runner(), Where(lab_root=str(servers), sshd_pid_dir=str(pids)),
                                tuple(reached.cli_words()))
    elif plan is not None:
        reached = Reach.of_nodes(plan, user, key, fanout=fanout, connect_timeout=connect_timeout)
        remote = Remote(runner=key_only(reached.runner()), where=Where(), reach_words=tuple(reached.cli_words()))
    else:
        raise UsageError("give --plan (the plan.json to apply) or --lab")
    return reached.require_plan(), remote, reached


def targets_of(chosen: Sequence[str]) -> tuple[str, ...]:
    """The render targets to apply: those chosen, or the default four when none."""
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        raise UsageError(f"--target {', '.join(unknown)}: apply knows {', '.join(TARGETS)}")
    return tuple(chosen) or DEFAULT_TARGETS


def run(plan: Plan, nodes: NodeSet, remote: Remote, options: ApplyOptions,
        progress: Progress | None = None) -> ApplyReport:
    """Back up, write, apply, verify with the doctor, confirm over a new SSH connection; revert otherwise."""
    if progress is None:
        return apply_rollout(plan, nodes, remote, options)
    return apply_rollout(plan, nodes, remote, options, progress=progress)


def install_key(nodes: str, pubkey: Path, *, plan: Path | None, user: str | None,
                before_each: Callable[[str], None] | None = None) -> list[str]:
    """The admin's public key put on every node that still takes a password (ssh-copy-id's job);
    the nodes where it could not be installed."""
    key_line = read_public_key(pubkey.expanduser())
    loaded = plan_of(plan) if plan else None
    addresses = {n.name: n.management_ip for n in loaded.nodes if n.management_ip} if loaded else {}
    failed = []
    for node in Reach.of_nodes(plan, user).nodes(nodes):
        if before_each:
            before_each(node)
        if not install_key_on(addresses.get(node, node), key_line, user):
            failed.append(node)
    return failed
