"""`gpunet doctor` on many nodes: each node runs its own checklist (`doctor --json`) through the
fleet runner; the findings come back as data and fold like clush -b, one line per (check,
verdict, subject) with the nodes that share it: `GN-MTU-01 fail ib3: gpu[003,017]`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from pydantic import Field, ValidationError

from gpunet.checks import Finding
from gpunet.checks.base import VERDICT_ORDER
from gpunet.errors import ParseError
from gpunet.files.inputs import load_json
from gpunet.fleet import FleetResult, NodeOutcome
from gpunet.fleet.node_gpunet import VERSION_MARK, node_gpunet
from gpunet.model.base import Frozen
from gpunet.model.nodeset import fold


class FoldedFinding(Frozen):
    check: str
    verdict: str
    subject: str
    nodes: str  # folded NodeSet
    count: int
    observed: str  # the first node's; `variants` says how many differ
    variants: int
    expected: str
    fix: str


class FleetDoctorReport(Frozen):
    nodes: int
    findings: tuple[FoldedFinding, ...]
    unreachable: dict[str, str]  # folded nodes -> why no findings came back
    unjudged: int = 0  # how many nodes those are: the summary counts only the others as judged
    # folded nodes -> the gpunet version and the Python that judged them
    gpunet: dict[str, str] = Field(default_factory=dict)

    @property
    def failing(self) -> bool:
        """A check failed on a node that answered (exit 1, before "could not judge")."""
        return any(f.verdict == "fail" for f in self.findings)

    @property
    def failed(self) -> bool:
        return bool(self.unreachable) or self.failing


def doctor_command(gpunet: Sequence[str], remote_plan: str, peers: bool, interval: float,
                   nodes: str = "", *, skip: str = "") -> list[str]:
    """What each node runs: its own checklist against the plan, as JSON (its hostname names it);
    with peers, every node of the run listens on its flows' ports for the others' probes, and the
    `skip` peers (a NodeSet) are not probed."""
    return [*gpunet, "doctor", "--plan", remote_plan, "--json", "--interval", f"{interval:g}",
            *(["--peers", "--listen", "--listening", nodes] if peers else []),
            *(["--skip-peers", skip] if peers and skip else [])]


def fold_doctor(result: FleetResult, fix: Callable[[str], str] | None = None) -> FleetDoctorReport:
    """Findings folded across nodes; a node without findings is named with why, and one whose
    gpunet is missing or another version with the command that fixes it (`fix(nodes)`)."""
    findings: list[Finding] = []
    unreachable: dict[str, list[str]] = defaultdict(list)
    wrong: dict[str, list[str]] = defaultdict(list)
    ran: dict[str, list[str]] = defaultdict(list)
    for name, outcome in result.outcomes.items():
        found = node_gpunet(outcome)
        parsed = findings_of(outcome.stdout) if outcome.rc in (0, 1) else None
        if found is not None and not found.matches:
            wrong[_pattern(found.problem(), name)].append(name)
        elif parsed is None:
            unreachable[silent(outcome)].append(name)
        else:
            findings += [f.model_copy(update={"node": name}) for f in parsed]
            if found is not None:
                ran[_pattern(f"{found.found} ({found.python})", name)].append(name)
    unjudged = {fold(n): why for why, n in unreachable.items()}
    for problem, names in wrong.items():
        nodes = fold(names)
        unjudged[nodes] = f"{_named(problem, names)}: {fix(nodes)}" if fix else _named(problem, names)
    return FleetDoctorReport(nodes=len(result.outcomes), findings=tuple(_fold(findings)), unreachable=unjudged,
                             gpunet={fold(n): _named(text, n) for text, n in ran.items()},
                             unjudged=sum(map(len, unreachable.values())) + sum(map(len, wrong.values())))


def silent(outcome: NodeOutcome) -> str:
    """How a node's doctor ended without findings, and its last words: the launcher's version line
    aside, which says only which gpunet started (it had stood for a doctor killed under it)."""
    said = ([line.strip() for line in outcome.stderr.splitlines() if line.strip() and not line.startswith(VERSION_MARK)]
            or [line.strip() for line in outcome.stdout.splitlines() if line.strip()])
    ended = outcome.error or f"exit {outcome.rc}"
    return f"{ended}: {said[-1][-200:]}" if said else ended


def _pattern(text: str, node: str) -> str:
    """A node's own name in its paths (a lab server's tree) as <node>: one line for many nodes."""
    return text.replace(f"/{node}/", "/<node>/")


def _named(text: str, nodes: list[str]) -> str:
    """A line shared by one node only says that node's own paths again."""
    return text.replace("/<node>/", f"/{nodes[0]}/") if len(nodes) == 1 else text


def findings_of(stdout: str) -> list[Finding] | None:
    """The findings of one node's `doctor --json`, or None when its output is not that."""
    try:
        return [Finding.model_validate(f) for f in load_json(stdout, "gpunet doctor --json")["findings"]]
    except (ParseError, KeyError, TypeError, ValidationError):
        return None


def _fold(findings: list[Finding]) -> list[FoldedFinding]:
    """Folded on check, verdict, subject and what was expected: nodes whose fix differs (each its
    own address to restore) are never shown one node's fix."""
    groups: dict[tuple[str, str, str, str, str], list[Finding]] = defaultdict(list)
    for f in findings:
        groups[f.check, f.verdict, f.subject, f.expected, f.fix].append(f)
    folded = [FoldedFinding(check=c, verdict=v, subject=s, nodes=fold([f.node for f in fs]),
                            count=len(fs), observed=fs[0].observed or fs[0].evidence,
                            variants=len({f.observed for f in fs}), expected=e, fix=fix)
              for (c, v, s, e, fix), fs in groups.items()]
    return sorted(folded, key=lambda f: (VERDICT_ORDER.get(f.verdict, 9), f.check, f.subject))
