"""`gpunet apply`: push the rendered configuration batch by batch, each node verified against the
Plan and confirmed over a new SSH connection, or reverted by its own guard.

One batch, all its nodes at once:
  1. settle  - each node's agent settles (and reports) what an earlier apply left, makes the stage;
  2. send    - one bundle (the agent, the plan, a manifest per node) to every node, and check it
               fits each (the node's hostname is the plan's, its tools are there);
  3. baseline- the doctor on each node, before anything changes;
  4. begin   - the agent backs up, starts its guard, writes and applies, detached from SSH;
  5. wait    - until each node says `applied` (or reverted itself);
  6. verify  - the doctor again, over a new connection: a check failing now that did not fail in
               the baseline fails the node;
  7. confirm - over a new connection; a failed node is told to revert now; a node that cannot be
               reached is reverted by its guard at the deadline, then asked again how it ended.
Steps 4-7 run for each node on its own thread, its deadline counted from its own `begin`: a node
whose SSH the change cut must not eat another's time to verify.
The rollout goes canary first, then batches, and stops once more nodes failed than the budget.
"""

from __future__ import annotations

import json
import secrets
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from ClusterShell.NodeSet import NodeSet

from gpunet.apply.manifest import node_manifest
from gpunet.apply.remote import AGENT_SOURCE, Remote, Reply, agent_argv, call, status_of
from gpunet.errors import UsageError
from gpunet.fleet import NodeOutcome
from gpunet.fleet.doctor import doctor_command, findings_of, silent
from gpunet.fleet.node_gpunet import node_gpunet
from gpunet.fleet.steps import run_each
from gpunet.fleet.transfer import TransferOutcome, copy_to
from gpunet.model.base import Frozen
from gpunet.model.plan import Plan
from gpunet.node.contract import FINAL

Outcome = Literal["applied", "reverted", "refused", "unreachable", "lost", "revert-failed", "not-started"]
CHANGED_NOTHING = ("refused", "unreachable", "not-started")
POLL_S = 0.3
POLL_CONNECT_S = 3.0  # a status poll's SSH connect timeout
CONFIRM_S = 3.0  # what a confirmation takes at most, kept free before the deadline
SILENT_AFTER = 3  # status polls missed in a row after `begin`: SSH is broken, the guard will revert
GRACE_S = 30.0  # after the deadline: how long the guard's revert may take to make the node answer again
DOCTOR_INTERVAL_S = 0.5


class NodeApply(Frozen):
    node: str
    outcome: Outcome
    configuration: str  # "new", "old", "untouched", ... as the node's own journal says
    reason: str = ""
    new_failures: tuple[str, ...] = ()  # checks failing after the change that passed before it
    ssh_after: bool | None = None  # a new SSH connection worked at the end
    previous: str = ""  # how an earlier apply on this node had ended, when it had not been seen
    seconds: float = 0.0  # here, from the batch's start
    node_seconds: float | None = None  # on the node: from `begin` to committed or reverted


class ApplyReport(Frozen):
    txids: tuple[str, ...]
    batches: tuple[str, ...]  # folded NodeSets, in order
    stopped_after: int | None  # the batch after which the rollout stopped (0 is the canary)
    nodes: tuple[NodeApply, ...]

    @property
    def failed(self) -> bool:
        return any(n.outcome != "applied" for n in self.nodes)


@dataclass(frozen=True)
class ApplyOptions:
    targets: tuple[str, ...]
    timeout_s: float = 120.0
    canary: int = 1
    batch: int = 8
    max_fail: int = 0
    # fault injection (tests, benchmarks): alter one node's rendered files; stop the agent at a step
    change: Callable[[str, dict[str, str]], dict[str, str]] | None = None
    pause_at: Mapping[str, str] = field(default_factory=dict)  # node -> step


Progress = Callable[[str, int, int], None]


def _silent(step: str, done: int, total: int) -> None:
    del step, done, total


def batches_of(nodes: Sequence[str], canary: int, batch: int) -> list[list[str]]:
    """Canary first, then batches of `batch`."""
    if canary < 0 or batch < 1:
        raise UsageError("--canary must be 0 or more and --batch 1 or more")
    first, rest = list(nodes[:canary]), list(nodes[canary:])
    return ([first] if first else []) + [rest[i:i + batch] for i in range(0, len(rest), batch)]


def apply_rollout(plan: Plan, nodes: NodeSet, remote: Remote, options: ApplyOptions,
                  progress: Progress = _silent) -> ApplyReport:
    names = list(nodes)
    unknown = [n for n in names if plan.node(n) is None]
    if unknown:
        raise UsageError(f"{NodeSet.fromlist(unknown)}: not in the plan")
    if not 0 < options.timeout_s <= 3600:
        raise UsageError(f"--timeout {options.timeout_s}: above 0 and at most 3600 seconds")
    plan_batches = batches_of(names, options.canary, options.batch)
    done: list[NodeApply] = []
    txids: list[str] = []
    stopped: int | None = None
    for index, batch in enumerate(plan_batches):
        progress(f"batch {index + 1}/{len(plan_batches)}: {NodeSet.fromlist(batch)}", len(done), len(names))
        txid = secrets.token_hex(6)
        txids.append(txid)
        done += BatchRun(plan, batch, remote, options, txid).run()
        failures = sum(n.outcome != "applied" for n in done)
        if failures > options.max_fail and index + 1 < len(plan_batches):
            stopped = index
            done += [NodeApply(node=n, outcome="not-started", configuration="untouched",
                               reason=f"the rollout stopped: {failures} node(s) failed, budget {options.max_fail}")
                     for b in plan_batches[index + 1:] for n in b]
            break
    progress("done", len(names), len(names))
    return ApplyReport(txids=tuple(txids), batches=tuple(str(NodeSet.fromlist(b)) for b in plan_batches),
                       stopped_after=stopped, nodes=tuple(done))


class BatchRun:
    """One batch's transaction on all its nodes at once."""

    def __init__(self, plan: Plan, nodes: list[str], remote: Remote, options: ApplyOptions, txid: str) -> None:
        self.plan, self.nodes, self.remote, self.options, self.txid = plan, nodes, remote, options, txid
        self.token = secrets.token_hex(16)
        self.start = time.monotonic()
        self.results: dict[str, NodeApply] = {}
        self.previous: dict[str, str] = {}
        self.new_failures: dict[str, tuple[str, ...]] = {}
        self.doctor_problems: dict[str, str] = {}  # why a node's doctor gave no findings

    def bundle_of(self, node: str) -> str:
        return f"{self.remote.stage_of(node)}/bundle-{self.txid}"

    def run(self) -> list[NodeApply]:
        live = self._settle(self.nodes)
        live = self._check(self._send(live))
        baseline = self._doctor(live, baseline=True)
        live = [n for n in live if n in baseline]
        if live:  # each node on its own from here: one whose SSH hangs must not eat another's time
            with ThreadPoolExecutor(max_workers=min(len(live), self.remote.runner.fanout)) as pool:
                list(pool.map(lambda n: self._transact(n, baseline[n]), live))
        return [self.results[n] for n in self.nodes]

    def _end(self, node: str, outcome: Outcome, configuration: str, reason: str = "", **more: Any) -> None:
        self.results[node] = NodeApply(node=node, outcome=outcome, configuration=configuration, reason=reason,
                                       previous=self.previous.get(node, ""),
                                       seconds=round(time.monotonic() - self.start, 2), **more)

    def _unreached(self, node: str, reply: Reply, step: str) -> None:
        if reply.refused:
            self._end(node, "refused", "untouched", reply.error)
        elif reply.reached:
            self._end(node, "refused", "untouched", f"{step}: {reply.error}")
        else:
            self._end(node, "unreachable", "untouched", f"{step}: {key_hint(reply.error)}")

    def _settle(self, nodes: list[str]) -> list[str]:
        """Each node settles what an earlier apply left and makes the stage; a node is reached."""
        replies = call(self.remote, {n: agent_argv(self.remote, "status", "--stage", self.remote.stage_of(n))
                                     for n in nodes}, timeout=30)
        live = []
        for n in nodes:
            reply = replies[n]
            if not reply.ok:
                self._unreached(n, reply, "before the change")
                continue
            self.previous[n] = previous_note(reply.data)
            if reply.data.get("state") == "applied":
                self._end(n, "refused", "new, awaiting confirmation",
                          f"transaction {reply.data.get('txid')} awaits confirmation: wait for it, or `gpunet apply "
                          f"rollback`")
            else:
                live.append(n)
        return live

    def _send(self, nodes: list[str]) -> list[str]:
        if not nodes:
            return []
        with tempfile.TemporaryDirectory(prefix="gpunet-apply-") as tmp:
            bundle = Path(tmp) / f"bundle-{self.txid}"
            (bundle / "manifests").mkdir(parents=True)
            (bundle / "agent.py").write_text(AGENT_SOURCE)
            (bundle / "plan.json").write_text(self.plan.model_dump_json(indent=1))
            for n in nodes:
                node = self.plan.node(n)
                assert node is not None  # checked against the plan before any batch
                manifest = node_manifest(self.plan, node, self.options.targets, self.remote.where, txid=self.txid,
                                         token=self.token, timeout_s=self.options.timeout_s,
                                         change=self._change_of(n), pause_at=self.options.pause_at.get(n))
                (bundle / "manifests" / f"{n}.json").write_text(json.dumps(manifest))
            outcomes = self._copy(bundle, nodes)
        for n in nodes:
            if not outcomes[n].ok:
                self._end(n, "unreachable", "untouched", f"sending the bundle: {outcomes[n].error}")
        return [n for n in nodes if outcomes[n].ok]

    def _copy(self, bundle: Path, nodes: list[str]) -> dict[str, TransferOutcome]:
        """The bundle to every node's stage, one copy for the nodes that share a stage path (every
        real node; each lab server has its own)."""
        by_stage: dict[str, list[str]] = defaultdict(list)
        for n in nodes:
            by_stage[self.remote.stage_of(n)].append(n)
        outcomes: dict[str, TransferOutcome] = {}
        for stage, group in by_stage.items():
            outcomes |= copy_to(self.remote.runner, NodeSet.fromlist(group), bundle, stage, compress="gzip").outcomes
        return outcomes

    def _bundle_agent(self, node: str, command: str) -> list[str]:
        """The bundle's own copy of the agent (begin installs it beside the journal, for the guard)."""
        bundle = self.bundle_of(node)
        return [*self.remote.python, f"{bundle}/agent.py", command, *self.remote.location, "--bundle", bundle]

    def _check(self, nodes: list[str]) -> list[str]:
        """The bundle fits each node (its hostname is the plan's node, its tools are there)."""
        replies = call(self.remote, {n: self._bundle_agent(n, "check") for n in nodes}, timeout=60)
        for n, reply in replies.items():
            if not reply.ok:
                self._unreached(n, reply, "checking the bundle")
        return [n for n in nodes if replies[n].ok]

    def _change_of(self, node: str) -> Callable[[dict[str, str]], dict[str, str]] | None:
        change = self.options.change
        return None if change is None else partial(change, node)

    def _doctor(self, nodes: list[str], *, baseline: bool = False,
                timeout: float = 120) -> dict[str, dict[str, str]]:
        """Failing checks per node (`check subject`); a node the doctor cannot run on is left out (and,
        for the baseline, ends here untouched)."""
        if not nodes:
            return {}
        # the batch's own nodes are not probed: each is judged on itself, and one a bad change cut
        # off would hold every other node's doctor for its probes' timeouts
        skip = str(NodeSet.fromlist(self.nodes))
        commands = {n: doctor_command(self.remote.gpunet(n), f"{self.bundle_of(n)}/plan.json", True, DOCTOR_INTERVAL_S,
                                      skip=skip) for n in nodes}
        outcomes = run_each(self.remote.runner, commands, timeout=timeout)
        failing: dict[str, dict[str, str]] = {}
        for n, outcome in outcomes.items():
            findings = findings_of(outcome.stdout) if outcome.rc in (0, 1) else None
            if findings is None:
                self.doctor_problems[n] = self._doctor_problem(n, outcome, timeout)
                if baseline:
                    self._end(n, "unreachable" if outcome.rc in (None, 255) else "refused", "untouched",
                              f"doctor before the change: {self.doctor_problems[n]}")
                continue
            failing[n] = {f"{f.check} {f.subject}".strip(): f.observed for f in findings if f.verdict == "fail"}
        return failing

    def _doctor_problem(self, node: str, outcome: NodeOutcome, timeout: float) -> str:
        """Why a node's doctor gave no findings: a gpunet missing or of another version is said with
        the command that installs this one there; one that ran out of time says how long it had."""
        found = node_gpunet(outcome)
        if found is not None and not found.matches:
            return f"{found.problem()}: {self.remote.install_fix(node)}"
        if outcome.rc is None and "timed out" in (outcome.error or ""):
            return f"the doctor did not end within {timeout:.1f} s (a longer --timeout leaves it more)"
        return f"the doctor gave no findings ({silent(outcome)})"

    def _transact(self, node: str, baseline: Collection[str]) -> None:
        """Begin, then wait for `applied`, verify, confirm or abort; the deadline counts from when
        `begin` was sent, so it never ends after the node's own (a begin whose answer the change
        cut off returns late)."""
        deadline = time.monotonic() + self.options.timeout_s
        reply = call(self.remote, {node: self._bundle_agent(node, "begin")}, timeout=60)[node]
        if not reply.ok and reply.data:
            self._unreached(node, reply, "begin")
            return
        # started, or its answer was lost (the change may cut the very session that started it):
        # the node's journal says which, after the deadline if need be
        self._watch(node, baseline, deadline)
        if node not in self.results:
            self._after_deadline(node, deadline)

    def _watch(self, node: str, baseline: Collection[str], deadline: float) -> None:
        """Until the deadline: once the node says `applied` it is verified and confirmed (or told
        to revert) at once; one that reverted itself ends here; one that stops answering is left
        to its guard (asked again after the deadline)."""
        quick = replace(self.remote, runner=replace(self.remote.runner, connect_timeout=POLL_CONNECT_S))
        misses = 0
        while time.monotonic() < deadline and misses < SILENT_AFTER:
            reply = status_of(quick, [node], timeout=10)[node]
            state = reply.data.get("state") if reply.ok and reply.data.get("txid") == self.txid else None
            if state in FINAL:
                self._end_from(node, reply)
                return
            if state == "applied":
                # the doctor must end before the deadline, with time left to confirm
                if self._verify(node, baseline, max(2.0, deadline - time.monotonic() - CONFIRM_S)):
                    self._confirm(node)
                else:
                    self._abort(node)
                return
            misses = 0 if reply.ok else misses + 1
            time.sleep(POLL_S)

    def _verify(self, node: str, baseline: Collection[str], timeout: float) -> bool:
        """The doctor again, over a new connection: what fails now and did not before."""
        after = self._doctor([node], timeout=timeout).get(node)
        if after is None:
            self.new_failures[node] = (self.doctor_problems.get(node, "the doctor gave no findings"),)
            return False
        new = sorted(f for f in after.keys() - set(baseline) if not _about_batch_peer(f, self.nodes))
        # what the doctor saw goes with each check, so a reverted node says why
        self.new_failures[node] = tuple(f"{f} ({after[f]})" if after[f] else f for f in new)
        return not new

    def _confirm(self, node: str) -> None:
        reply = call(self.remote, {node: agent_argv(self.remote, "confirm", self.txid, self.token)})[node]
        if reply.ok and reply.data.get("state") == "committed":
            self._end(node, "applied", "new", "verified and confirmed", ssh_after=True)

    def _abort(self, node: str) -> None:
        reason = "verification failed: " + ", ".join(self.new_failures.get(node, ()))
        reply = call(self.remote, {node: agent_argv(self.remote, "abort", self.txid, "--reason", reason[:300])})[node]
        if reply.ok:
            self._end_from(node, reply)

    def _after_deadline(self, node: str, deadline: float) -> None:
        """A node not heard from: its guard reverts at the deadline; ask until it answers."""
        time.sleep(max(0.0, deadline - time.monotonic()) + 0.5)
        give_up = time.monotonic() + GRACE_S
        while time.monotonic() < give_up:
            reply = status_of(self.remote, [node], timeout=10)[node]
            if reply.ok and reply.data.get("txid") != self.txid:
                self._end(node, "unreachable", "untouched", "`begin` never reached the node", ssh_after=True)
                return
            if reply.ok and reply.data.get("state") in FINAL:
                self._end_from(node, reply)
                return
            time.sleep(POLL_S * 3)
        self._end(node, "lost", "unknown", f"no new SSH connection within {GRACE_S:g} s after the deadline",
                  ssh_after=False)

    def _end_from(self, node: str, reply: Reply) -> None:
        state = reply.data.get("state")
        outcome: Outcome = "applied" if state == "committed" else "revert-failed" if state == "revert-failed" \
            else "reverted"
        reason = reply.data.get("reason") or ""
        if reply.data.get("revert_errors"):
            reason += f" (revert errors: {'; '.join(reply.data['revert_errors'])})"
        started, finished = reply.data.get("started"), reply.data.get("finished_at")
        took = round(finished - started, 2) if isinstance(started, float) and isinstance(finished, float) else None
        self._end(node, outcome, str(reply.data.get("configuration", "")), reason,
                  new_failures=self.new_failures.get(node, ()), ssh_after=True, node_seconds=took)


def _about_batch_peer(failing: str, batch: list[str]) -> bool:
    """A failing check about a peer changing in this same batch (`GN-PEER-01 gpu7 management ...`):
    judged on that peer's own node, not as this node's failure."""
    words = failing.split(" ")
    return len(words) > 1 and words[1] in batch


def previous_note(status: dict[str, Any]) -> str:
    """How the node's last apply ended, as the next run reports it."""
    if not status.get("txid"):
        return ""
    note = f"last apply {status['txid']}: {status.get('state')}, {status.get('configuration')} configuration"
    if status.get("reason"):
        note += f" ({status['reason']})"
    return note


def key_hint(error: str) -> str:
    if "Permission denied" in error:
        return (f"{error}: the admin's key does not log in here, so a keys-only sshd would lock you out; "
                "`gpunet apply install-key` puts it there first")
    return error
