"""The check contract: a context in, findings out; checks never raise (DESIGN.md #8)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

from gpunet.model.base import Frozen
from gpunet.model.plan import Interface, Node, Plan
from gpunet.model.state import NodeState
from gpunet.probe.peers import PeerResult

Verdict = Literal["pass", "warn", "fail", "skip"]
VERDICT_ORDER = {"fail": 0, "warn": 1, "skip": 2, "pass": 3}


class Finding(Frozen):
    """One verdict of one check about one subject (an interface, a peer, a setting)."""

    check: str  # stable ID, e.g. GN-MTU-01
    area: str
    title: str
    verdict: Verdict
    node: str
    subject: str = ""
    observed: str = ""
    expected: str = ""
    evidence: str = ""
    fix: str = ""


@dataclass
class Context:
    """What a check may look at: the node's state, and the Plan's view of this node."""

    state: NodeState
    plan: Plan | None = None
    node: Node | None = None
    peer_results: list[PeerResult] = field(default_factory=list)  # doctor --peers

    @property
    def name(self) -> str:
        return self.node.name if self.node else self.state.hostname

    def planned(self, cabled: bool | None = None) -> list[Interface]:
        """The node's interfaces the OS manages (BMC addresses are not the host's)."""
        if self.node is None:
            return []
        ifs = [i for i in self.node.interfaces if i.plane != "oob"]
        return [i for i in ifs if cabled is None or i.cabled == cabled]


class Check(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def area(self) -> str: ...
    @property
    def title(self) -> str: ...

    def __call__(self, ctx: Context) -> list[Finding]: ...


class Outcome(NamedTuple):
    verdict: Verdict
    subject: str = ""
    observed: str = ""
    expected: str = ""
    evidence: str = ""  # for skip: the reason
    fix: str = ""  # overrides the check's own fix for this outcome


@dataclass(frozen=True)
class FunctionCheck:
    """A check written as a function of the context returning outcomes; the fix (a command
    with {subject}/{expected} filled in) is the check's own."""

    id: str
    area: str
    title: str
    fix: str
    body: Callable[[Context], list[Outcome]]

    def __call__(self, ctx: Context) -> list[Finding]:
        return [self.finding(ctx, outcome) for outcome in self.body(ctx)]

    def finding(self, ctx: Context, o: Outcome) -> Finding:
        fix = o.fix or self.fix.format(subject=o.subject, expected=o.expected)
        fix = "" if o.verdict in ("pass", "skip") else fix
        return Finding(check=self.id, area=self.area, title=self.title, verdict=o.verdict, node=ctx.name,
                       subject=o.subject, observed=o.observed, expected=o.expected, evidence=o.evidence, fix=fix)


NO_GPU_HERE = Outcome("skip", evidence="no NVIDIA driver loaded here (/proc/modules, /sys/module): no GPU can run "
                                       "NCCL on this host, whatever the plan says")


def no_gpu_here(ctx: Context) -> bool:
    """The NVIDIA driver is known to be absent (neither source read: cannot tell, so False)."""
    rdma = ctx.state.rdma
    return (rdma.kernel_modules is not None and "nvidia" not in rdma.kernel_modules) or rdma.nvidia_driver is False
