"""The Plan built for real in network namespaces (`gpunet lab`), and its InfiniBand fabric in the
simulator (`gpunet ibsim`): up, status, faults, heal, down."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from gpunet.errors import UsageError
from gpunet.lab import access, build, faults, ibsim
from gpunet.lab.ibsim import RoutingUsed
from gpunet.lab.ibsim_state import IbFault, IbsimState, read_sim
from gpunet.lab.ready import DEFAULT_DEADLINE_S, Readiness
from gpunet.lab.sshconfig import SSH_CONFIG, lab_ssh_config
from gpunet.lab.state import Fault, LabState, Routing, lab_dir
from gpunet.spec.plan import plan_of

__all__ = ["DEFAULT_DEADLINE_S", "Fault", "IbsimState", "LabState", "Readiness", "Routing", "RoutingUsed", "exec_argv",
           "fault", "heal", "ibsim_down", "ibsim_fault", "ibsim_heal", "ibsim_status", "ibsim_tool", "ibsim_up",
           "lab_down", "lab_up", "routing_used", "ssh_config", "status"]

Progress = Callable[[str, int, int], None]


def lab_up(source: Path | None, lab: str, *, max_nodes: int, scale: float, progress: Progress | None = None,
           ready_timeout_s: float = DEFAULT_DEADLINE_S, routing: Routing | None = None,
           lldp: bool = False) -> LabState:
    """Build (or find, if already up) the lab of a plan.json or spec; idempotent. Returns once the
    lab is ready to be judged (its `readiness` says how long that took, BGP convergence included
    where switches run FRR); LabError (exit 3) naming what is not ready when `ready_timeout_s`
    passes first. `routing` None: FRR where it is installed, else static routes. `lldp`: lldpd in
    every namespace now (else the first `cabling check --lab` or `switch check --lab` starts it)."""
    plan = plan_of(source)
    if progress is None:
        return build.lab_up(plan, lab, max_nodes=max_nodes, scale=scale, ready_timeout_s=ready_timeout_s,
                            routing=routing, lldp=lldp)
    return build.lab_up(plan, lab, max_nodes=max_nodes, scale=scale, progress=progress,
                        ready_timeout_s=ready_timeout_s, routing=routing, lldp=lldp)


def status(lab: str | None = None) -> list[LabState]:
    """Every lab that is up, or the one named (refused when it is not up)."""
    states = build.lab_status(lab)
    if lab is not None and not states:
        raise UsageError(f"no lab {lab!r}; `gpunet lab up` builds one")
    return states


def exec_argv(lab: str, node: str, command: Sequence[str]) -> list[str]:
    """argv that runs `command` inside a lab server (its network, hostname and /etc/hosts)."""
    return access.node_argv(lab, node, command)


def ssh_config(lab: str, bastion: str | None, out: Path | None) -> Path:
    """Write the admin ssh_config for the lab's servers; where it went."""
    text = lab_ssh_config(lab, bastion)
    path = out or lab_dir(lab) / SSH_CONFIG
    path.write_text(text)
    return path


FAULTS = ("loss", "down", "mtu", "rate", "delay", "miswire")


def fault(lab: str, target: str, chosen: dict[str, str | None]) -> Fault:
    """Exactly one fault on one cable (or, with miswire, two cables' far ends swapped)."""
    given = {kind: value for kind, value in chosen.items() if value is not None}
    if len(given) != 1 or set(given) - set(FAULTS):
        raise UsageError(f"give exactly one of {', '.join('--' + k for k in FAULTS)} (got "
                         f"{', '.join('--' + k for k in given) or 'none'})")
    (kind, value), = given.items()
    if kind == "miswire":
        return faults.apply_miswire(lab, target, value)
    return faults.apply_fault(lab, target, kind, "" if kind == "down" else value)


def heal(lab: str, target: str | None = None) -> list[Fault]:
    return faults.heal(lab, target)


def lab_down(lab: str) -> list[str]:
    """Remove everything the lab made (also after a crash); the namespaces removed."""
    return build.lab_down(lab)


def ibsim_up(source: Path | None, sim: str, *, plane: str | None, routing: str) -> IbsimState:
    return ibsim.ibsim_up(plan_of(source), sim, plane=plane, routing=routing)


def ibsim_status(sim: str) -> IbsimState:
    state = read_sim(sim)
    if state is None:
        raise UsageError(f"no ibsim {sim!r}; `gpunet ibsim up` starts one")
    return state


IB_FAULTS = ("unplug", "swap", "move", "counter", "rate")


def ibsim_fault(sim: str, end: str, chosen: dict[str, str | None]) -> IbsimState:
    given = {kind: value for kind, value in chosen.items() if value is not None}
    if len(given) != 1 or set(given) - set(IB_FAULTS):
        raise UsageError(f"give exactly one of {', '.join('--' + k for k in IB_FAULTS)} (got "
                         f"{', '.join('--' + k for k in given) or 'none'})")
    (kind, value), = given.items()
    other = value if kind in ("swap", "move") else None
    made = IbFault(kind=kind, end=end, other=other, value=value if kind in ("counter", "rate") else "")
    return ibsim.apply_fault(sim, made)


def ibsim_heal(sim: str) -> IbsimState:
    return ibsim.heal(sim)


def ibsim_tool(sim: str, command: Sequence[str], attach: str | None) -> subprocess.CompletedProcess[str]:
    """An infiniband-diags command against the simulated fabric."""
    return ibsim.run_tool(sim, command, attach=attach)


def ibsim_down(sim: str) -> bool:
    return ibsim.ibsim_down(sim)


def routing_used(state: IbsimState) -> RoutingUsed:
    """The routing engine opensm's last sweep used, of the -R list it was given (and why ftree was
    refused, if it was); str() of it is the one line `ibsim status` prints."""
    return ibsim.routing_report(state)
