"""The typed results a report is drawn from, beside the ones other commands already define
(CablingReport, LocalizeReport, FleetDoctorReport): one node's `doctor --json`, switch checks,
simulated job times, the parts of `compare --json` the page shows, and a bench run as read."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from gpunet.bench.store import Measurement, RunInfo
from gpunet.checks.base import Finding, Verdict
from gpunet.fleet.doctor import FleetDoctorReport
from gpunet.model.base import Frozen
from gpunet.model.types import Hostname


class DoctorNode(Frozen):
    """What `gpunet doctor --json` prints for one node."""

    node: str
    failed: bool
    findings: tuple[Finding, ...]
    probe_problems: tuple[str, ...] = ()


class DoctorResults(Frozen):
    """Every doctor file given: single nodes and folded fleets."""

    nodes: tuple[DoctorNode, ...] = ()
    fleets: tuple[FleetDoctorReport, ...] = ()


class SwitchFinding(Frozen):
    """A switch check's finding: doctor's finding shape with the switch it is about (the switch
    checks are being built; this is the shape they are asked to print)."""

    check: str
    area: str = ""
    title: str = ""
    verdict: Verdict
    switch: Hostname
    subject: str = ""  # a port ("swp33", "33", "Ethernet33") or a setting
    observed: str = ""
    expected: str = ""
    evidence: str = ""
    fix: str = ""


class SwitchResults(Frozen):
    findings: tuple[SwitchFinding, ...]


class SimJob(Frozen):
    """One job's collective time as the simulator predicts it, and as measured where it ran (the
    simulator is being built; its output is adapted to this)."""

    name: str = Field(max_length=120)
    nodes: str = Field(max_length=4096)  # a NodeSet of the plan's nodes
    collective: str = Field("", max_length=64)
    bytes: int | None = Field(None, ge=0)
    simulated_s: float = Field(ge=0)
    measured_s: float | None = Field(None, ge=0)


class SimResults(Frozen):
    site: str
    plan_hash: str | None = None  # the plan simulated, when the simulator records it
    jobs: tuple[SimJob, ...]


class CompareRow(Frozen):
    model_config = ConfigDict(frozen=True, extra="ignore")

    section: str
    metric: str
    values: tuple[str, ...]
    differs: bool


class CompareDesign(Frozen):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    site: str
    nodes: int


class CompareView(Frozen):
    """The part of `gpunet compare --json` a page shows (its computed figures are left out)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    designs: tuple[CompareDesign, ...]
    rows: tuple[CompareRow, ...]
    currency: str | None = None
    placeholder: bool = False


class HeatCell(Frozen):
    """One drawn cell of a bench matrix: a pair of nodes, or a block of pairs on a large run."""

    row: int
    column: int
    status: str  # ok | low | failed | inconclusive
    percent: float | None  # the worst pair's % of expected; None without an expectation


class BenchResult(Frozen):
    run: RunInfo
    counts: dict[str, int]  # measurements per status
    names: tuple[str, ...]  # the matrix's rows and columns: nodes, or blocks of nodes on a large run
    block: int = 1  # nodes per row and column
    cells: tuple[HeatCell, ...]
    worst: tuple[Measurement, ...]  # the not-ok measurements first, each with its reason
    plan_matches: bool  # the run recorded this plan's hash
