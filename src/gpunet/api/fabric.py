"""What the fabric itself reports, against the Plan: `gpunet cabling check` (every cable from LLDP
or ibnetdiscover) and `gpunet localize` (the cable to replace, from probing or port counters).
Each takes exactly one source; `gpunet.reach` gets at it."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from gpunet.errors import ParseError, UsageError
from gpunet.fabric import collect
from gpunet.fabric.cabling import CablingReport, check_cabling
from gpunet.fabric.counters import parse_ibqueryerrors
from gpunet.fabric.ibnetdiscover import IbTopology, parse_ibnetdiscover
from gpunet.fabric.observed import Observation, from_ibnetdiscover, from_lldp
from gpunet.files.inputs import read_text
from gpunet.localize.probing import ProbeSettings, shipped_agent
from gpunet.localize.report import LocalizeReport
from gpunet.localize.run import (
    SWITCH_COUNTERS,
    ProbeSite,
    SwitchSample,
    localize_counters,
    localize_infiniband,
    localize_probing,
    localize_prometheus,
    localize_switches,
    routed_planes,
)
from gpunet.model.hops import switch_hop_addresses
from gpunet.model.plan import Plan
from gpunet.model.spec import EDGE_PLANES
from gpunet.reach import Reach
from gpunet.spec.plan import plan_of

__all__ = ["CablingReport", "CablingSource", "LocalizeReport", "LocalizeSource", "ProbeSettings", "cabling_check",
           "localize"]

LLDP_SKIPPED = {"oob"}  # a BMC's port is not the host's: host lldpd never sees it
MAX_FILE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class CablingSource:
    """Where the fabric's own report comes from: exactly one of these."""

    lab: str | None = None
    nodes: str | None = None  # a NodeSet reached over SSH at the management addresses of --plan
    lldp_dir: Path | None = None
    ibnetdiscover: Path | None = None
    ibsim: str | None = None
    ib_here: bool = False

    def chosen(self) -> str:
        given = [name for name, value in vars(self).items() if value not in (None, False)]
        if len(given) != 1:
            raise UsageError("give exactly one source: --lab, NODES (with --plan), --lldp-dir, --ibnetdiscover, "
                             f"--ibsim or --ib-here (got {', '.join(given) or 'none'})")
        return given[0]


def cabling_check(source: CablingSource, plan: Path | None, planes: list[str], *, user: str | None = None,
                  key: Path | None = None) -> CablingReport:
    """Each planned cable: ok, missing, miswired, swapped, wrong speed or width; links nobody planned."""
    kind = source.chosen()
    with _saved_topology(source, kind, plan) as saved:  # a large saved file is parsed while the plan is read
        reached = _reach(source, plan, user, key)
        against = reached.plan() if kind in ("lab", "ibsim") else (plan_of(plan) if plan else None)
        if against is None:
            raise UsageError("--plan: the plan.json (or spec) the cables are checked against")
        observation = _observe(source, kind, against, reached, saved)
    chosen = _planes(against, planes, infiniband=observation.source == "ibnetdiscover")
    return check_cabling(against, observation, chosen)


def _saved_topology(source: CablingSource, kind: str, plan: Path | None
                    ) -> AbstractContextManager[Callable[[], IbTopology] | None]:
    if kind == "ibnetdiscover" and plan is not None and source.ibnetdiscover is not None:
        return collect.ib_file_reader(source.ibnetdiscover)
    return nullcontext()


def _reach(source: CablingSource, plan: Path | None, user: str | None, key: Path | None) -> Reach:
    if source.lab:
        return Reach.of_lab(source.lab)
    if source.ibsim:
        return Reach.of_ibsim(source.ibsim)
    return Reach.of_nodes(plan, user, key)


def _observe(source: CablingSource, kind: str, plan: Plan, reached: Reach,
             saved: Callable[[], IbTopology] | None) -> Observation:
    if kind == "lab":
        reached.lldp_running()
        tables, notes = collect.lldp_from_devices(reached.devices())
    elif kind == "nodes":
        tables, notes = collect.lldp_from_fleet(reached.runner(), reached.nodes(source.nodes or ""))
    elif kind == "lldp_dir":
        tables, notes = collect.lldp_from_dir(source.lldp_dir or Path()), []
    else:
        return _observe_infiniband(source, kind, plan, reached, saved)
    observation = from_lldp(plan, tables)
    observation.notes[:0] = notes
    return observation


def _observe_infiniband(source: CablingSource, kind: str, plan: Plan, reached: Reach,
                        saved: Callable[[], IbTopology] | None) -> Observation:
    if kind == "ibnetdiscover":
        return from_ibnetdiscover(plan, saved() if saved else collect.ib_from_file(source.ibnetdiscover or Path()))
    done = reached.infiniband_tool(["ibnetdiscover"], timeout=600)
    if done.returncode != 0:
        raise UsageError(f"ibnetdiscover on {reached.describe()} exited {done.returncode}: {done.stderr[:200]}")
    observation = from_ibnetdiscover(plan, parse_ibnetdiscover(done.stdout))
    cap = reached.infiniband_speed_cap()
    if cap:
        observation.speed_cap = cap
        observation.notes.append(f"simulated by ibsim: speeds above {cap} are shown as {cap}")
    return observation


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


PROMETHEUS_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,127}")


@dataclass(frozen=True)
class LocalizeSource:
    """Where the evidence comes from: exactly one of a lab (probing), a simulator's or a saved
    ibqueryerrors (InfiniBand counters), a Prometheus server (snmp_exporter's IF-MIB counters), the
    switches themselves over SSH (their port counters)."""

    lab: str | None = None
    ibsim: str | None = None
    ibqueryerrors: Path | None = None
    prometheus: str | None = None
    switches: bool = False
    probe: bool = False  # a real fabric probed from the Plan's nodes over SSH
    switch_label: str = "instance"  # the Prometheus label that names a switch (--switch-label)
    user: str | None = None  # --switches, --probe: the SSH user and key
    key: Path | None = None

    def chosen(self) -> str:
        """The source named; `--lab ID --switches` is the lab's switches over SSH (at their lab
        management addresses, with the lab's key), as --switches reaches a real fabric's."""
        sources = ("lab", "ibsim", "ibqueryerrors", "prometheus", "switches", "probe")
        given = [f"--{name}" for name in sources if getattr(self, name) not in (None, False)]
        if given == ["--lab", "--switches"]:
            return "--lab --switches"
        if len(given) != 1:
            raise UsageError("give exactly one of --lab, --ibsim, --ibqueryerrors, --prometheus, --switches, --probe "
                             f"(or --lab with --switches; got {', '.join(given) or 'none'})")
        return given[0]


def localize(source: LocalizeSource, *, plan: Path | None = None, planes: list[str] | None = None,
             before: Path | None = None, window: float = 0.0,
             settings: ProbeSettings | None = None) -> LocalizeReport:
    """Ranked suspect cables, each with its evidence, a confidence and the fix."""
    kind = source.chosen()
    if kind in ("--ibqueryerrors", "--prometheus", "--switches", "--probe") and plan is None:
        raise UsageError(f"{kind} needs --plan: the plan.json (or spec) the ports are named from")
    if not PROMETHEUS_LABEL.fullmatch(source.switch_label):
        raise UsageError(f"--switch-label {source.switch_label[:40]!r}: a Prometheus label name "
                         "([a-zA-Z_][a-zA-Z0-9_]*)")
    earlier = _read_ibqueryerrors(before) if before else None
    if source.lab is not None:
        return _localize_lab(source.lab, kind, planes or [], window, settings)
    if source.ibsim is not None:
        reached = Reach.of_ibsim(source.ibsim)
        return localize_infiniband(reached.require_plan(), lambda: _ibqueryerrors(reached), earlier, window,
                                   source=reached.describe())
    assert plan is not None
    return _localize_planned(source, plan, planes or [], (window, earlier), settings)


def _localize_planned(source: LocalizeSource, plan: Path, planes: list[str], window_earlier: tuple[float, str | None],
                      settings: ProbeSettings | None) -> LocalizeReport:
    """The sources read against a plan: a real fabric probed, its switches or Prometheus, or saved
    ibqueryerrors."""
    window, earlier = window_earlier
    if source.probe:
        return localize_nodes(Reach.of_nodes(plan, source.user, source.key), planes, settings)
    if source.switches:
        return _localize_switches(Reach.of_nodes(plan, source.user, source.key), planes, window)
    if source.prometheus is not None:
        try:
            return localize_prometheus(plan_of(plan), source.prometheus, window, label=source.switch_label)
        except ParseError as exc:
            raise UsageError(f"--prometheus {source.prometheus}: {exc}") from None
    assert source.ibqueryerrors is not None
    return localize_counters(plan_of(plan), _read_ibqueryerrors(source.ibqueryerrors), earlier)


PROBED_NOTE = ("probed over SSH from the plan's nodes at their management addresses (gpunet's probe agent goes "
               "with each command: python3 on the nodes is enough); switch port counters are not read while "
               "probing: `localize --switches` reads them")


def localize_nodes(reached: Reach, planes: list[str], settings: ProbeSettings | None) -> LocalizeReport:
    """A real fabric probed as the lab is: every equal-cost path of its routed Ethernet and RoCE
    planes, from the Plan's nodes over SSH, each hop named through the Plan's switch addresses (a
    /31 names the cable, a loopback the switch). InfiniBand hops answer no IP probe: its counters
    tell (--ibqueryerrors)."""
    plan = reached.require_plan()
    infiniband = {p.name for p in plan.planes if p.technology == "infiniband"}
    if set(planes) & infiniband:
        raise UsageError(f"--plane {', '.join(sorted(set(planes) & infiniband))}: InfiniBand switches answer no IP "
                         "probe; read its port counters (--ibqueryerrors with --plan)")
    judged = [p for p in routed_planes(plan, planes) if p not in infiniband]
    if not judged:
        raise UsageError("no routed Ethernet or RoCE plane with more than one tier of switches to probe in the plan")
    addresses = {n.name: n.management_ip or n.name for n in plan.nodes}
    hop_ports, hop_devices = switch_hop_addresses(plan)
    site = ProbeSite(plan=plan, on_node=shipped_agent(lambda node, argv: reached.ssh_argv(addresses[node], argv)),
                     hop_ports=hop_ports, hop_devices=hop_devices, switch_counters=list, notes=(PROBED_NOTE,))
    return localize_probing(site, judged, settings)


def _localize_lab(lab: str, kind: str, planes: list[str], window: float,
                  settings: ProbeSettings | None) -> LocalizeReport:
    """A lab: every equal-cost path probed, or (--switches) its switches' counters over SSH."""
    if kind == "--lab --switches":
        return _localize_switches(Reach.of_lab(lab, "ssh"), planes, window)
    reached = Reach.of_lab(lab)
    hop_ports, hop_devices = reached.hop_addresses()
    site = ProbeSite(plan=reached.require_plan(), on_node=reached.node_argv, hop_ports=hop_ports,
                     hop_devices=hop_devices, switch_counters=reached.switch_counters, notes=reached.notes())
    return localize_probing(site, planes, settings)


def _localize_switches(reached: Reach, planes: list[str], window: float) -> LocalizeReport:
    """The data planes' switches (or the planes asked), their counters read over SSH twice."""
    plan = reached.require_plan()
    unknown = sorted(set(planes) - {p.name for p in plan.planes})
    if unknown:
        raise UsageError(f"no plane {', '.join(unknown)} in the plan ({', '.join(p.name for p in plan.planes)})")
    wanted = planes or [p.name for p in plan.planes if p.name not in EDGE_PLANES]
    chosen = [s.name for s in plan.switches if s.plane in wanted and s.management]
    if not chosen:
        raise UsageError(f"no switch of the plane(s) {', '.join(wanted)} has a management address in the plan "
                         "(site.switch_management)")

    def sample() -> SwitchSample:
        done = reached.on_switches(SWITCH_COUNTERS, chosen)
        return SwitchSample(outputs={n: o.stdout for n, o in done.outcomes.items() if o.rc == 0},
                            failed={n: o.error or o.stderr.strip()[-120:] or f"exit {o.rc}"
                                    for n, o in done.outcomes.items() if o.rc != 0})

    return localize_switches(plan, sample, window, len(chosen))


def _ibqueryerrors(reached: Reach) -> str:
    done = reached.infiniband_tool(["ibqueryerrors"], timeout=300)
    if "## Summary" not in done.stdout:  # it exits 1 when it found errors: the summary says it finished
        raise UsageError(f"ibqueryerrors on {reached.describe()} exited {done.returncode}: "
                         f"{done.stderr.strip()[:200]}")
    return done.stdout


def _read_ibqueryerrors(path: Path) -> str:
    """A saved output (bounded, a regular file), parsed once here so a bad one is bad input named
    by file and line."""
    text = read_text(path, MAX_FILE_BYTES, "saved ibqueryerrors output")
    try:
        parse_ibqueryerrors(text)
    except ParseError as exc:
        raise UsageError(f"{path}: line {exc.line}: {str(exc).split(': ', 2)[-1]}") from None
    return text
