"""`cabling check` as one call: pick the source, read the fabric, compare with the plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import UsageError
from gpunet.fabric import collect
from gpunet.fabric.cabling import CablingReport, check_cabling
from gpunet.fabric.ibnetdiscover import parse_ibnetdiscover
from gpunet.fabric.ibsim import SIM_SPEED_CAP
from gpunet.fabric.observed import Observation, from_ibnetdiscover, from_lldp
from gpunet.fleet import ClusterShellRunner
from gpunet.lab.build import LAB_PLAN
from gpunet.lab.ibsim import run_tool, sim_plan
from gpunet.lab.state import lab_dir, read_state
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan

LLDP_SKIPPED = {"oob"}  # a BMC's port is not the host's: host lldpd never sees it


@dataclass(frozen=True)
class Source:
    """Where the fabric's own report comes from: exactly one of these."""

    lab: str | None = None
    nodes: str | None = None  # a NodeSet reached by the fleet runner (SSH)
    lldp_dir: Path | None = None
    ibnetdiscover: Path | None = None
    ibsim: str | None = None
    ib_here: bool = False

    def chosen(self) -> str:
        given = [name for name, value in vars(self).items() if value not in (None, False)]
        if len(given) != 1:
            raise UsageError("give exactly one source: --lab, --nodes, --lldp-dir, --ibnetdiscover, --ibsim or "
                             f"--ib-here (got {', '.join(given) or 'none'})")
        return given[0]


def cabling_check(source: Source, plan: Plan | None, planes: list[str], runner: ClusterShellRunner | None = None
                  ) -> CablingReport:
    kind = source.chosen()
    plan = _plan_for(source, plan)
    observation = _observe(source, kind, plan, runner)
    chosen = _planes(plan, planes, infiniband=observation.source == "ibnetdiscover")
    return check_cabling(plan, observation, chosen)


def _plan_for(source: Source, plan: Plan | None) -> Plan:
    """A lab's or simulator's own plan (sliced, in lab names); else the one given."""
    if source.lab:
        if read_state(source.lab) is None:
            raise UsageError(f"no lab {source.lab!r}; `gpunet lab up` builds one")
        return read_plan(lab_dir(source.lab) / LAB_PLAN)
    if source.ibsim:
        return sim_plan(source.ibsim)
    if plan is None:
        raise UsageError("--plan: the plan.json (or spec) the cables are checked against")
    return plan


def _observe(source: Source, kind: str, plan: Plan, runner: ClusterShellRunner | None) -> Observation:
    if kind == "lab":
        state = read_state(source.lab or "")
        assert state is not None
        tables, notes = collect.lldp_from_lab(state)
    elif kind == "nodes":
        if runner is None:
            raise UsageError("--nodes needs a way to reach them")
        tables, notes = collect.lldp_from_fleet(runner, NodeSet(source.nodes))
    elif kind == "lldp_dir":
        tables, notes = collect.lldp_from_dir(source.lldp_dir or Path()), []
    else:
        return _observe_infiniband(source, kind, plan)
    observation = from_lldp(plan, tables)
    observation.notes[:0] = notes
    return observation


def _observe_infiniband(source: Source, kind: str, plan: Plan) -> Observation:
    if kind == "ibsim":
        done = run_tool(source.ibsim or "", ["ibnetdiscover"])
        if done.returncode != 0:
            raise UsageError(f"ibnetdiscover in ibsim {source.ibsim} exited {done.returncode}: {done.stderr[:200]}")
        observation = from_ibnetdiscover(plan, parse_ibnetdiscover(done.stdout))
        observation.speed_cap = SIM_SPEED_CAP
        observation.notes.append(f"simulated by ibsim: speeds above {SIM_SPEED_CAP} are shown as {SIM_SPEED_CAP}")
        return observation
    topology = collect.ib_from_file(source.ibnetdiscover) if source.ibnetdiscover else collect.ib_here()
    return from_ibnetdiscover(plan, topology)


def _planes(plan: Plan, wanted: list[str], *, infiniband: bool) -> list[str]:
    """The planes asked for, or every plane this kind of source can see."""
    names: dict[str, str] = {p.name: p.technology for p in plan.planes}
    unknown = [w for w in wanted if w not in names]
    if unknown:
        raise UsageError(f"no plane {', '.join(unknown)} in the plan ({', '.join(names)})")
    if wanted:
        return wanted
    chosen = [name for name, tech in names.items()
              if (tech == "infiniband") == infiniband and (infiniband or name not in LLDP_SKIPPED)]
    if not chosen:
        raise UsageError(f"the plan has no {'InfiniBand' if infiniband else 'Ethernet or RoCE'} plane for this source")
    return chosen
