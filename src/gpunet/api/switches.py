"""`gpunet switch check`: the switch checks (checks/switch.py: GN-BGP-01..05, GN-SW-01..03) on the
Plan's switches, as doctor checks nodes: a lab's switches inside their namespaces (--lab), real
switches over SSH at the Plan's switch management addresses (--plan). `gpunet.reach` gets at them."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pydantic import Field

from gpunet.checks import Finding
from gpunet.checks.switch import check_switch
from gpunet.errors import CommandError, UsageError
from gpunet.lab.access import DeviceRun
from gpunet.model.base import Frozen
from gpunet.model.nodeset import NodeSetError, parse_nodeset
from gpunet.model.plan import Plan
from gpunet.reach import Reach
from gpunet.runner import CommandRunner

__all__ = ["Finding", "SwitchReport", "switch_check"]

PARALLEL = 8  # switches read at once
UNREAD = "could not read the switch"


class SwitchReport(Frozen):
    """Every finding about the switches checked; those nothing could be read from, with why."""

    source: str
    switches: tuple[str, ...]
    findings: tuple[Finding, ...]
    unreachable: dict[str, str] = Field(default_factory=dict)

    @property
    def failing(self) -> bool:
        return any(f.verdict == "fail" for f in self.findings)


def switch_check(names: str | None, *, lab: str | None = None, plan: Path | None = None, user: str | None = None,
                 key: Path | None = None) -> SwitchReport:
    """The switch checks of the switches named (a NodeSet; default every switch that can be reached)."""
    if lab and plan:
        raise UsageError("give --lab (a lab's switches) or --plan (real switches over SSH), not both")
    reach = Reach.of_lab(lab) if lab else Reach.of_nodes(plan, user, key)
    against = reach.require_plan("the plan.json (or spec) whose switches are checked, or --lab")
    runs = reach.switches(against)
    chosen = _chosen(names, against, runs)
    reach.lldp_running()  # the checks read each switch's LLDP neighbours
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        found = list(pool.map(lambda name: check_switch(against, name, _runner(runs[name])), chosen))
    unreachable = {name: findings[0].evidence for name, findings in zip(chosen, found, strict=True)
                   if findings and all(f.verdict == "skip" and f.title == UNREAD for f in findings)}
    ordered = sorted((f for findings in found for f in findings), key=_severity)
    return SwitchReport(source=reach.describe().replace("the nodes", "the switches"), switches=tuple(chosen),
                        findings=tuple(ordered), unreachable=unreachable)


def _chosen(names: str | None, plan: Plan, runs: dict[str, DeviceRun]) -> list[str]:
    if names is None:
        if not runs:
            raise UsageError("no switch of the plan has a management address to reach it at (site.switch_management)")
        return [s.name for s in plan.switches if s.name in runs]
    try:
        wanted = list(parse_nodeset(names))
    except NodeSetError as exc:
        raise UsageError(f"{names!r}: {exc}") from None
    unknown = [n for n in wanted if n not in plan.switches_by_name]
    if unknown:
        raise UsageError(f"not switches of the plan: {', '.join(unknown[:5])}")
    unreached = [n for n in wanted if n not in runs]
    if unreached:
        raise UsageError(f"no way to reach {', '.join(unreached[:5])}: no management address in the plan")
    return wanted


def _runner(device: DeviceRun) -> CommandRunner:
    """A device's run(argv, timeout) as the checks' CommandRunner (a non-zero exit: CommandError)."""
    def run(argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        del stdin
        done = device(argv, timeout)
        if check and done.returncode != 0:
            raise CommandError(" ".join(argv), done.returncode, done.stderr or done.stdout)
        return done
    return run


ORDER = {"fail": 0, "warn": 1, "skip": 2, "pass": 3}


def _severity(finding: Finding) -> tuple[int, str, str]:
    return ORDER[finding.verdict], finding.node, finding.check
