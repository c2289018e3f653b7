"""Switch checks: one switch's routing, ports and neighbours read from the switch itself and
judged against the Plan, as doctor judges a node. Each finding names the switch, the planned
cable and the fix; what could not be read is a skip with the reason, never a pass.

GN-BGP-01..05  sessions and ECMP (checks/switch_bgp.py)
GN-SW-01       MTU 9216 on every cabled port (what gpunet renders: above every host MTU)
GN-SW-02       every cabled port administratively and operationally up
GN-SW-03       LLDP: the neighbour on each port is the Plan's far end of its cable

`check_switch(plan, name, run)` runs four commands through the runner it is handed (in the lab:
inside the switch's namespace; over SSH: on the switch's management address): vtysh's `show bgp
summary json` and `show ip route json`, `ip -j link show`, `lldpcli -f json show neighbors`.
Ports are named as a Linux switch names them (swp<N>: Cumulus Linux, FRR on Linux, the lab)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpunet.checks.base import Finding
from gpunet.checks.switch_bgp import judge_bgp, judge_ecmp
from gpunet.checks.switch_common import finding, linux_port, port_number
from gpunet.errors import ProbeError, UsageError
from gpunet.model.plan import Plan, Switch
from gpunet.model.switching import SwitchPort, speaks_bgp, switch_ports
from gpunet.probe.frr import BgpSummary, Route, parse_bgp_summary_json, parse_frr_route_json
from gpunet.probe.lldp import LldpNeighbor, parse_lldpcli_json
from gpunet.probe.switchports import PortState, parse_ip_link_json
from gpunet.runner import CommandRunner

SWITCH_MTU = 9216
COMMANDS = {
    "bgp": ["vtysh", "-c", "show bgp summary json"],
    "routes": ["vtysh", "-c", "show ip route json"],
    "links": ["ip", "-j", "link", "show"],
    "lldp": ["lldpcli", "-f", "json", "show", "neighbors"],
}
T = TypeVar("T")


@dataclass
class SwitchState:
    """What was read from a switch; None where a command failed or its output was not understood
    (`unread` says which and why)."""

    bgp: BgpSummary | None = None
    routes: tuple[Route, ...] | None = None
    ports: tuple[PortState, ...] | None = None
    lldp: tuple[LldpNeighbor, ...] | None = None
    unread: dict[str, str] = field(default_factory=dict)


def read_switch(run: CommandRunner) -> SwitchState:
    state = SwitchState()
    state.bgp = _read(run, "bgp", parse_bgp_summary_json, state)
    state.routes = _read(run, "routes", parse_frr_route_json, state)
    state.ports = _read(run, "links", parse_ip_link_json, state)
    state.lldp = _read(run, "lldp", parse_lldpcli_json, state)
    return state


def _read(run: CommandRunner, what: str, parse: Callable[[str], T], state: SwitchState) -> T | None:
    try:
        return parse(run(COMMANDS[what], timeout=30).stdout)
    except ProbeError as exc:  # CommandError or ParseError: cannot judge from it
        state.unread[what] = f"{' '.join(COMMANDS[what])}: {exc}"
        return None


def check_switch(plan: Plan, switch_name: str, run: CommandRunner) -> list[Finding]:
    """Every switch check of one switch of the Plan; UsageError for a name the Plan has no switch by."""
    switch = plan.switches_by_name.get(switch_name)
    if switch is None:
        raise UsageError(f"{switch_name!r} is not a switch of the plan")
    return judge_switch(plan, switch, read_switch(run))


def judge_switch(plan: Plan, switch: Switch, state: SwitchState) -> list[Finding]:
    """Pure: the findings for what was read."""
    routed = speaks_bgp(plan, switch)
    found: list[Finding] = []
    judges: list[tuple[str, Any, Callable[[Any], Iterator[Finding]], str, bool]] = [
        ("bgp", state.bgp, lambda s: judge_bgp(plan, switch, s), "GN-BGP-01", routed),
        ("routes", state.routes, lambda r: judge_ecmp(plan, switch, r), "GN-BGP-05", routed),
        ("links", state.ports, lambda p: judge_ports(plan, switch, p), "GN-SW-01", True),
        ("lldp", state.lldp, lambda n: judge_lldp(plan, switch, n), "GN-SW-03", True),
    ]
    for what, value, judge, check, wanted in judges:
        if not wanted:
            continue
        if value is None:
            found.append(finding(check, switch, "skip", title="could not read the switch", subject=switch.name,
                                 evidence=state.unread.get(what, f"{what} not read")))
        else:
            found += judge(value)
    return found


def _subject(port: SwitchPort) -> str:
    cable = port.cable
    return f"{linux_port(port.port)} (cable {cable.a.device}:{cable.a.port} {cable.b.device}:{cable.b.port})"


def judge_ports(plan: Plan, switch: Switch, states: tuple[PortState, ...]) -> Iterator[Finding]:
    by_port = {n: s for s in states if (n := port_number(s.alias) or port_number(s.name)) is not None}
    for port in switch_ports(plan, switch):
        state = by_port.get(port.number)
        name = linux_port(port.port)
        if state is None:
            yield finding("GN-SW-02", switch, "fail", title="cabled port up", subject=_subject(port),
                          observed="no such port", expected="up", evidence="ip -j link show",
                          fix=f"check the port breakout or name of {name} on {switch.name}")
            continue
        yield finding("GN-SW-01", switch, "pass" if state.mtu == SWITCH_MTU else "fail", title="port MTU",
                      subject=_subject(port), observed=str(state.mtu), expected=str(SWITCH_MTU),
                      evidence=f"ip -j link show: {state.name} mtu {state.mtu}",
                      fix=f"set MTU {SWITCH_MTU} on {name} (nv set interface {name} link mtu {SWITCH_MTU}; SONiC: "
                          f"config interface mtu <port> {SWITCH_MTU})")
        yield _port_up(switch, port, state)


def _port_up(switch: Switch, port: SwitchPort, state: PortState) -> Finding:
    """Fabric ports admin and link up; host ports admin up (a node powered off drops its link)."""
    up = state.admin_up and (state.oper_up or port.kind == "host")
    return finding("GN-SW-02", switch, "pass" if up else "fail", title="cabled port up", subject=_subject(port),
                   observed=f"admin {'up' if state.admin_up else 'down'}, link {'up' if state.oper_up else 'down'}",
                   expected="admin up, link up", evidence=f"ip -j link show: {state.name}",
                   fix=f"bring {linux_port(port.port)} up on {switch.name}; if it stays down, check the cable and "
                       "its optics")


def judge_lldp(plan: Plan, switch: Switch, neighbours: tuple[LldpNeighbor, ...]) -> Iterator[Finding]:
    """Fabric ports only: a node's NIC is the node's own LLDP (cabling check reads those)."""
    heard: dict[int, list[LldpNeighbor]] = {}
    for n in neighbours:
        if (number := port_number(n.local_port)) is not None:
            heard.setdefault(number, []).append(n)
    for port in (p for p in switch_ports(plan, switch) if p.kind == "fabric"):
        names = [f"{n.system_name}:{_far_port(n)}" for n in heard.get(port.number, [])]
        yield finding("GN-SW-03", switch, "pass" if names == [port.far_end] else "fail",
                      title="LLDP neighbour per port", subject=_subject(port),
                      observed=", ".join(names) or "no neighbour heard", expected=port.far_end,
                      evidence=f"lldpcli show neighbors: {linux_port(port.port)}",
                      fix=f"{linux_port(port.port)} should reach {port.far_end}: re-seat or move the cable (gpunet "
                          "cabling check names the swap), or start lldpd on the far end")


def _far_port(neighbour: LldpNeighbor) -> str:
    number = next((port_number(n) for n in neighbour.port_names if port_number(n) is not None), None)
    return str(number) if number is not None else (neighbour.port_names[0] if neighbour.port_names else "?")
