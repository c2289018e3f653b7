"""A Plan's InfiniBand plane as an ibsim topology (ibnetdiscover's format, which ibsim reads):
each HCA a one-port CA described "<host> <hca>", each switch with its radix described by its
planned name, every planned cable with its width and speed from both ends.

ibsim 0.10 (Debian 12) knows speeds up to HDR: a faster plane is simulated at HDR and judged at
HDR (Observation.speed_cap), said in the notes. Its default limits, 2048 nodes and 256 switches,
bound the fabric; a larger plan is sliced, keeping the fat tree regular (lab/slice.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpunet.errors import LabUsageError
from gpunet.fabric.cabling import IB_LANES, IB_SPEED_BY_GBPS, IB_SPEED_RANK, ends
from gpunet.fabric.observed import End
from gpunet.lab.slice import even_slice, units_per_pod
from gpunet.model.plan import Link, Plan

SIM_SPEED_CAP = "HDR"  # the fastest speed ibsim 0.10 parses
MAX_NODES = 2048  # ibsim's defaults (MAXNETNODES, MAXNETSWITCHS)
MAX_SWITCHES = 256
Rate = tuple[int, str]  # (lanes, speed name): (4, "HDR")


@dataclass(frozen=True)
class SimFabric:
    plan: Plan  # the plan the simulator holds (sliced when the whole one does not fit)
    plane: str
    notes: tuple[str, ...]

    @property
    def links(self) -> list[Link]:
        return [link for link in self.plan.links if link.plane == self.plane]


def infiniband_plane(plan: Plan, wanted: str | None = None) -> str:
    planes = [p.name for p in plan.planes if p.technology == "infiniband"]
    if wanted is not None and wanted not in planes:
        raise LabUsageError(f"plane {wanted!r} is not an InfiniBand plane of the plan ({', '.join(planes) or 'none'})")
    if not planes:
        raise LabUsageError("the plan has no InfiniBand plane: ibsim simulates InfiniBand fabrics only")
    return wanted or planes[0]


def sim_fabric(plan: Plan, plane: str | None = None) -> SimFabric:
    """The plane's fabric as the simulator can hold it, with what was left out said."""
    chosen = infiniband_plane(plan, plane)
    size = _size(plan, chosen)
    notes = []
    speed = IB_SPEED_BY_GBPS.get(next(p.speed_gbps for p in plan.planes if p.name == chosen), SIM_SPEED_CAP)
    if IB_SPEED_RANK.get(speed, 0) > IB_SPEED_RANK[SIM_SPEED_CAP]:
        notes.append(f"ibsim 0.10 knows speeds up to {SIM_SPEED_CAP}: the plane's {speed} links are simulated and "
                     f"judged at {SIM_SPEED_CAP}")
    if size[0] <= MAX_NODES and size[1] <= MAX_SWITCHES:
        return SimFabric(plan, chosen, tuple(notes))
    kept = _fitting_slice(plan, chosen)
    notes.append(f"the {chosen} plane has {size[0]} InfiniBand nodes and {size[1]} switches, over ibsim's limits of "
                 f"{MAX_NODES} and {MAX_SWITCHES}: simulated is a slice of {servers_on(kept, chosen)} servers "
                 f"({_size(kept, chosen)[0]} nodes), the same leaf groups in the first and the last pod")
    return SimFabric(kept, chosen, tuple(notes))


def servers_on(plan: Plan, plane: str) -> int:
    return sum(1 for n in plan.nodes if any(i.plane == plane and i.cabled for i in n.interfaces))


def _size(plan: Plan, plane: str) -> tuple[int, int]:
    """(CA and switch nodes, switches) of the plane."""
    switches = sum(1 for s in plan.switches if s.plane == plane)
    hcas = sum(1 for n in plan.nodes for i in n.interfaces if i.plane == plane and i.cabled)
    return hcas + switches, switches


def _fitting_slice(plan: Plan, plane: str) -> Plan:
    """The most leaf groups per pod that fit, the same number in the first and the last pod:
    a regular slice opensm's ftree routing accepts when the whole fabric is regular."""
    for units in range(units_per_pod(plan), 0, -1):
        sliced = even_slice(plan, units)
        nodes, switches = _size(sliced, plane)
        if nodes <= MAX_NODES and switches <= MAX_SWITCHES:
            return sliced
    raise LabUsageError(f"no slice of the {plane} plane fits ibsim's {MAX_NODES} nodes and {MAX_SWITCHES} switches")


def node_id(plan: Plan, device: str, port: str) -> tuple[str, int]:
    """The simulator's node id and port of a plan end: ("H-gpu001-mlx5_0", 1), ("S-leaf1", 33)."""
    found, number, _ = sim_port(plan, device, port)
    return found, number


def sim_port(plan: Plan, device: str, port: str) -> tuple[str, int, str]:
    """(node id, port, node description) of a plan end."""
    node = plan.node(device)
    if node is None:
        return f"S-{device}", int(port), device
    hca = next((i.hca for i in node.interfaces if i.name == port), None)
    if hca is None:
        raise LabUsageError(f"{device}:{port} is no HCA port of the plan")
    return f"H-{device}-{hca}", 1, f"{device} {hca}"


def render_topology(fabric: SimFabric, rates: Mapping[frozenset[End], Rate] | None = None) -> str:
    """The topology file; `rates` overrides a cable's (lanes, speed), e.g. (2, "HDR") for a cable
    with two lanes down. Both ends of a cable carry the same rate, as ibsim needs."""
    writer = _Writer(fabric, dict(rates or {}))
    plan = fabric.plan
    records = [writer.switch(s.name, s.radix) for s in plan.switches if s.plane == fabric.plane]
    records += [writer.ca(n.name, i.name, i.hca or "") for n in plan.nodes for i in n.interfaces
                if i.plane == fabric.plane and i.cabled]
    return "# gpunet: the plan's InfiniBand fabric for ibsim\n\n" + "\n".join(records)


class _Writer:
    def __init__(self, fabric: SimFabric, rates: dict[frozenset[End], Rate]) -> None:
        self.plan, self.rates = fabric.plan, rates
        self.default = (IB_LANES, _sim_speed(fabric.plan, fabric.plane))
        self.ports: dict[str, list[tuple[str, Link]]] = {}
        for link in fabric.links:
            for end in (link.a, link.b):
                self.ports.setdefault(end.device, []).append((end.port, link))

    def switch(self, name: str, radix: int) -> str:
        lines = [f'Switch\t{radix} "S-{name}"\t\t# "{name}" base port 0 lid 0 lmc 0']
        for port, link in sorted(self.ports.get(name, []), key=lambda p: int(p[0])):
            far_id, far_port, far_description = self._far(link, name, port)
            lines.append(f'[{port}]\t"{far_id}"[{far_port}]\t\t# "{far_description}" lid 0 {self._rate(link)}')
        return "\n".join(lines) + "\n"

    def ca(self, node: str, interface: str, hca: str) -> str:
        lines = [f'Ca\t1 "H-{node}-{hca}"\t\t# "{node} {hca}"']
        for port, link in self.ports.get(node, []):
            if port == interface:
                far_id, far_port, far_description = self._far(link, node, port)
                lines.append(f'[1]\t"{far_id}"[{far_port}]\t\t# lid 0 lmc 0 "{far_description}" lid 0 '
                             f"{self._rate(link)}")
        return "\n".join(lines) + "\n"

    def _rate(self, link: Link) -> str:
        lanes, speed = self.rates.get(frozenset(ends(link)), self.default)
        return f"{lanes}x{speed}"

    def _far(self, link: Link, device: str, port: str) -> tuple[str, int, str]:
        far = link.b if (link.a.device, link.a.port) == (device, port) else link.a
        return sim_port(self.plan, far.device, far.port)


def _sim_speed(plan: Plan, plane: str) -> str:
    planned = IB_SPEED_BY_GBPS.get(next(p.speed_gbps for p in plan.planes if p.name == plane), SIM_SPEED_CAP)
    return planned if IB_SPEED_RANK.get(planned, 99) <= IB_SPEED_RANK[SIM_SPEED_CAP] else SIM_SPEED_CAP
