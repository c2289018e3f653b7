"""A simulated InfiniBand fabric's state file and its faults as ibsim console commands."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import StringConstraints

from gpunet.errors import LabError, LabUsageError
from gpunet.fabric.cabling import ends
from gpunet.fabric.observed import End
from gpunet.lab.ibsim_topology import Rate, node_id
from gpunet.lab.state import STATE_FILE, CableEnd, check_id, labs_root, write_state_file
from gpunet.model.base import Frozen
from gpunet.model.plan import Link, Plan

COUNTER = re.compile(r"^(Port[A-Za-z]{1,40})\.([A-Za-z]{1,40})=(\d{1,19})$")  # PortCounters.SymbolErrorCounter=100
RATE = re.compile(r"^([124])x(SDR|DDR|QDR|FDR|EDR|HDR)$")  # what ibsim 0.10 can set on a cable
Routing = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,20}(,[a-z0-9_]{1,20}){0,4}$")]
SimNode = Annotated[str, StringConstraints(pattern=r"^[HS]-[A-Za-z0-9_.-]{1,60}$")]
Note = Annotated[str, StringConstraints(pattern=r"^[ -~]{1,400}$")]


class IbFault(Frozen):
    """unplug END; swap END OTHER (their cables' far ends change places); move END OTHER (END's
    cable goes into the free port OTHER); counter END Attr.Field=N; rate END 2xHDR."""

    kind: Literal["unplug", "swap", "move", "counter", "rate"]
    end: CableEnd
    other: CableEnd | None = None
    value: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9.=]{0,80}$")] = ""


class IbsimState(Frozen):
    sim_id: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]{1,4}$")]
    plane: str
    routing: Routing
    sm_node: SimNode
    servers: int
    notes: tuple[Note, ...] = ()
    ibsim_pid: int | None = None
    opensm_pid: int | None = None
    faults: tuple[IbFault, ...] = ()

    def env(self, attach: str | None = None, cache: Path | None = None) -> dict[str, str]:
        """ibsim-run's environment: this simulator's socket, the CA to attach at, opensm's cache."""
        found = {"IBSIM_SOCKNAME": f"gpunet-ib-{self.sim_id}"}
        if attach:
            found["SIM_HOST"] = attach
        if cache:
            found["OSM_CACHE_DIR"] = str(cache)
        return found

    def attach_point(self) -> str:
        """The SM's CA, unless a fault took its cable away: tools then attach at no node."""
        touched = {f.end for f in self.faults if f.kind in ("unplug", "move", "swap")}
        return self.sm_node if not any(self.sm_node.startswith(f"H-{e.split(':')[0]}-") for e in touched) else ""

    def rate_overrides(self, plan: Plan) -> dict[frozenset[End], Rate]:
        found = {}
        for fault in self.faults:
            if fault.kind == "rate":
                match = RATE.fullmatch(fault.value)
                assert match is not None  # checked when the fault was made
                found[frozenset(ends(cable_at(plan, fault.end)))] = (int(match[1]), match[2])
        return found


def sim_dir(sim_id: str) -> Path:
    check_id(sim_id)
    return labs_root() / "ibsim" / sim_id


def read_sim(sim_id: str) -> IbsimState | None:
    path = sim_dir(sim_id) / STATE_FILE
    if not path.exists():
        return None
    try:
        return IbsimState.model_validate_json(path.read_text())
    except (OSError, ValueError) as exc:
        raise LabError(f"{path} is unreadable ({str(exc).splitlines()[0]}); stop its ibsim and opensm by hand and "
                       "remove the directory") from None


def write_sim(state: IbsimState) -> None:
    write_state_file(sim_dir(state.sim_id), state)


def cable_at(plan: Plan, end: str) -> Link:
    device, _, port = end.rpartition(":")
    found = next((link for link in plan.links if (device, port) in ((link.a.device, link.a.port),
                                                                     (link.b.device, link.b.port))), None)
    if found is None:
        raise LabUsageError(f"{end!r} is no cable end of the simulated plan; name it DEVICE:PORT as in cabling.csv")
    return found


def _far(plan: Plan, end: str) -> End:
    return next(e for e in ends(cable_at(plan, end)) if str(e) != end)


def _port(plan: Plan, end: End | str) -> str:
    device, _, port = str(end).rpartition(":")
    found, number = node_id(plan, device, port)
    return f'"{found}"[{number}]'


def console_lines(plan: Plan, fault: IbFault) -> list[str]:
    """The ibsim console commands of a fault; LabUsageError for an end or value the plan lacks."""
    cable_at(plan, fault.end)
    near = _port(plan, fault.end)
    if fault.kind == "unplug":
        return [f"Unlink {near}"]
    if fault.kind == "counter":
        if not COUNTER.fullmatch(fault.value):
            raise LabUsageError(f"counter {fault.value!r}: write Attribute.Field=N, e.g. "
                                "PortCounters.SymbolErrorCounter=100")
        return [f"PerformanceSet {near} {fault.value}"]
    if fault.kind == "rate":
        if not RATE.fullmatch(fault.value):
            raise LabUsageError(f"rate {fault.value!r}: lanes and speed as ibnetdiscover shows them, 1x-4x and SDR-HDR "
                                "(ibsim 0.10 has no NDR), e.g. 2xHDR")
        return []
    if fault.other is None:
        raise LabUsageError(f"{fault.kind} needs a second end")
    if fault.kind == "move":
        return [f"Unlink {near}", f"Link {near} {_port(plan, _target(plan, fault.other))}"]
    other = _port(plan, fault.other)
    return [f"Unlink {near}", f"Unlink {other}", f"Link {near} {_port(plan, _far(plan, fault.other))}",
            f"Link {other} {_port(plan, _far(plan, fault.end))}"]


def _target(plan: Plan, target: str) -> End:
    """A port to plug into: any switch port up to the radix, or a planned HCA port."""
    device, _, port = target.rpartition(":")
    radix = next((s.radix for s in plan.switches if s.name == device), None)
    if radix is not None and port.isdigit() and 1 <= int(port) <= radix:
        return End(device, port)
    cable_at(plan, target)
    return End(device, port)
