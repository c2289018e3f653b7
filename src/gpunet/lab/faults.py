"""Breaking the lab on purpose: loss (nftables numgen), link down, MTU, rate; and healing."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence

from gpunet.errors import CommandError, LabError, LabUsageError
from gpunet.lab.access import device_prefix
from gpunet.lab.frr import frr_switches, restart_frr, wait_converged
from gpunet.lab.lldpd import wait_until_heard
from gpunet.lab.miswire import expected_neighbours, miswire_fault, swap_far_ends
from gpunet.lab.netns import ip_batch, tbf_line
from gpunet.lab.state import LAB_PLAN, Fault, LabState, VethState, lab_dir, lab_lock, read_state, write_state
from gpunet.model.io import read_plan
from gpunet.render.switch.common import SWITCH_MTU
from gpunet.runner import CommandRunner, run_local

RATE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")
UNIT_MBIT = {"kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}
DELAY = re.compile(r"\d{1,6}(\.\d{1,3})?(us|ms|s)")


def find_cable(state: LabState, target: str) -> VethState:
    """A cable by either end, `device:port` as in cabling.csv (gpu001:ib0, comp-leaf001:33)."""
    matches = [v for v in state.veths if target in (v.a_end, v.b_end)]
    if not matches:
        ends = ", ".join(v.a_end for v in state.veths[:3])
        raise LabUsageError(f"no cable end {target!r} in lab {state.lab_id}; name one end as DEVICE:PORT, e.g. {ends}")
    return matches[0]


def _ends(v: VethState) -> list[tuple[str, str]]:
    return [(ns, dev) for ns, dev in ((v.a_ns, v.a_if), (v.b_ns, v.b_if)) if ns]


def _ip(ns: str) -> list[str]:
    return ["ip", "-n", ns]


def loss_script(dev: str, percent: float) -> str:
    """Drop `percent` of packets arriving on `dev` (both ends get one, so both directions lose)."""
    table = f"gnloss_{dev}"
    return (f"table netdev {table} {{\n chain ingress {{\n  type filter hook ingress device \"{dev}\" priority 0;\n"
            f"  numgen random mod 10000 < {round(percent * 100)} drop\n }}\n}}\n")


def apply_fault(lab_id: str, target: str, kind: str, value: str = "", run: CommandRunner = run_local) -> Fault:
    with lab_lock(lab_id):
        return _apply(lab_id, target, kind, value, run)


def apply_miswire(lab_id: str, first: str, second: str, run: CommandRunner = run_local) -> Fault:
    """The far ends of the cables at `first` and `second` change places (see lab/miswire.py)."""
    with lab_lock(lab_id):
        state = _state(lab_id)
        fault = miswire_fault(state, find_cable(state, first), find_cable(state, second), (first, second))
        write_state(state.model_copy(update={"faults": (*state.faults, fault)}))
        swap_far_ends(state, fault, run)
        await_lldp(state, fault, swapped=True)
        return fault


def await_lldp(state: LabState, fault: Fault, *, swapped: bool) -> None:
    """Return once LLDP shows the new wiring at both named ends (lldpd hears a moved port within
    a few seconds), so a `cabling check` right after sees the fault, not a moment in between.
    Nothing while the lab runs no lldpd: the first LLDP reader starts it and waits for this too."""
    if not state.lldp:
        return
    expected = expected_neighbours(state, fault, swapped=swapped)
    wrong = wait_until_heard(expected, lambda ns: device_prefix(state.lab_id, ns, state.namespaces[ns]))
    if wrong:
        raise LabError(f"the miswire is in place but LLDP does not show it yet: {'; '.join(wrong)}")


def _apply(lab_id: str, target: str, kind: str, value: str, run: CommandRunner) -> Fault:
    state = _state(lab_id)
    cable = find_cable(state, target)
    if any(cable.cable in (f.cable, f.other) for f in state.faults if f.kind == "miswire"):
        raise LabUsageError(f"{cable.cable} is miswired: `gpunet lab heal` it first")
    check_fault_value(kind, value)
    fault = Fault(cable=cable.cable, kind=kind, value=value)
    kept = tuple(f for f in state.faults if not (f.cable == fault.cable and f.kind == kind))
    write_state(state.model_copy(update={"faults": (*kept, fault)}))  # first: heal can undo a half-applied one
    try:
        for ns, dev in _ends(cable):
            _apply_end(ns, dev, cable, kind=kind, value=value, run=run)
    except (LabError, CommandError) as exc:
        # Not applied: undo what one end took, and `lab status` never lists a fault that is not there.
        for ns, dev in _ends(cable):
            _undo_end(ns, dev, cable, kind=kind, routes=state.routes, run=_quiet(run))
        write_state(state)
        raise LabError(f"{kind} fault on {cable.cable} not applied: {_reason(exc)}") from None
    return fault


MTU_RANGE = (68, 65535)  # IPv4's minimum; a veth's maximum


def check_fault_value(kind: str, value: str) -> None:
    """Refuse a value the kernel or tc would refuse, before anything changes."""
    if kind == "loss" and not _in_range(value, 0, 100, low_open=True):
        raise LabUsageError(f"--loss {value}: a percentage above 0 and at most 100")
    if kind == "mtu" and not (value.isdigit() and MTU_RANGE[0] <= int(value) <= MTU_RANGE[1]):
        raise LabUsageError(f"--mtu {value}: a whole number from {MTU_RANGE[0]} to {MTU_RANGE[1]}")
    if kind == "rate" and parse_rate(value) <= 0:
        raise LabUsageError(f"--rate {value}: a rate above 0 (100mbit, 1gbit)")
    if kind == "delay" and not DELAY.fullmatch(value):
        raise LabUsageError(f"--delay {value}: a time as tc writes it, e.g. 5ms, 200us, 0.1s")
    if kind not in ("loss", "down", "mtu", "rate", "delay"):  # miswire has its own entry, apply_miswire
        raise LabUsageError(f"unknown fault {kind!r}")


def _in_range(value: str, low: float, high: float, low_open: bool) -> bool:
    try:
        number = float(value)
    except ValueError:
        return False
    return (low < number if low_open else low <= number) and number <= high  # false for nan


def _quiet(run: CommandRunner) -> CommandRunner:
    """The runner, with failures ignored: undoing a fault that half-applied is best effort."""
    def quiet(argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
        del check
        return run(argv, stdin=stdin, check=False, timeout=timeout)
    return quiet


def _reason(exc: Exception) -> str:
    if isinstance(exc, CommandError):
        lines = exc.stderr.strip().splitlines()
        return lines[0][:200] if lines else f"{exc.command.split()[0]} exited {exc.returncode}"
    return str(exc)


def _apply_end(ns: str, dev: str, cable: VethState, *, kind: str, value: str, run: CommandRunner) -> None:
    if kind == "loss":
        percent = float(value)
        run(["ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", f"gnloss_{dev}"], check=False)
        run(["ip", "netns", "exec", ns, "nft", "-f", "-"], stdin=loss_script(dev, percent))
    elif kind == "down":
        run([*_ip(ns), "link", "set", dev, "down"])
    elif kind == "mtu":
        run([*_ip(ns), "link", "set", dev, "mtu", str(int(value))])
    elif kind == "rate":
        run(["tc", "-n", ns, *tbf_line(dev, parse_rate(value), cable.mtu).split()])
    elif kind == "delay":
        _delay(ns, dev, value, run)
    else:
        raise LabUsageError(f"unknown fault {kind!r}")


def _delay(ns: str, dev: str, value: str, run: CommandRunner) -> None:
    done = run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "netem", "delay", value], check=False)
    if done.returncode != 0:
        reason = "this kernel has no netem" if "unknown" in done.stderr.lower() else done.stderr.strip()
        raise LabError(f"--delay needs the netem qdisc: {reason}; loss, down, mtu and rate still work")


def parse_rate(text: str) -> float:
    """'100mbit' -> 100.0 (Mbit/s), like tc's own units."""
    match = RATE.fullmatch(text.lower())
    if not match or len(match[1]) > 12:
        raise LabUsageError(f"rate {text!r}: write it as tc does, e.g. 100mbit, 1gbit, 500kbit")
    return float(match[1]) * UNIT_MBIT[match[2]]


def heal(lab_id: str, target: str | None = None, run: CommandRunner = run_local) -> list[Fault]:
    """Undo every fault, or those on one cable; returns what was healed."""
    with lab_lock(lab_id):
        return _heal(lab_id, target, run)


def _heal(lab_id: str, target: str | None, run: CommandRunner) -> list[Fault]:
    state = _state(lab_id)
    chosen = find_cable(state, target).cable if target else None
    healed = [f for f in state.faults if chosen is None or chosen in (f.cable, f.other)]
    by_cable = {v.cable: v for v in state.veths}
    for fault in healed:
        cable = by_cable.get(fault.cable)
        if cable is None or (fault.other and fault.other not in by_cable):  # on no cable of this lab: dropped
            continue
        if fault.kind == "miswire":
            swap_far_ends(state, fault, run)  # twice is the plan's wiring again
            await_lldp(state, fault, swapped=False)
            continue
        for ns, dev in _ends(cable):
            _undo_end(ns, dev, _as_built(state, ns, cable), kind=fault.kind, routes=state.routes, run=run)
    if any(f.kind == "mtu" for f in healed):
        _forget_path_mtus(state, run)
    write_state(state.model_copy(update={"faults": tuple(f for f in state.faults if f not in healed)}))
    if state.routing == "frr" and any(f.kind in ("down", "miswire") for f in healed):
        restart_frr(lab_dir(state.lab_id), _flapped_switches(state, healed, by_cable))
        _reconverged(state)
    return healed


def _flapped_switches(state: LabState, healed: list[Fault], by_cable: Mapping[str, VethState]) -> set[str]:
    """The routers to restart (lab/frr.py restart_frr): both ends of a cable between two switches
    that went down (the next hop it carried is one of an ECMP group), every router end of a
    miswired one. A server's port back up needs none: its leaf's host route is a single next hop,
    which zebra puts back."""
    def routers(name: str) -> list[str]:
        return [ns for ns, _ in _ends(by_cable[name]) if state.namespaces.get(ns) == "router"]
    flapped = set()
    for fault in healed:
        for name in (fault.cable, fault.other):
            ends = routers(name) if name is not None and name in by_cable else []
            if fault.kind == "miswire" or (fault.kind == "down" and len(ends) == 2):
                flapped.update(ends)
    return flapped


def _reconverged(state: LabState) -> None:
    """Healed means routed again: a cable back up has its BGP sessions re-established and its routes
    back in every FRR switch (static routes were put back above, at once)."""
    directory = lab_dir(state.lab_id)
    wait_converged(read_plan(directory / LAB_PLAN), frr_switches(directory, state.lab_id), directory)


def _as_built(state: LabState, ns: str, cable: VethState) -> VethState:
    """The cable end as `lab up` made it: a switch's port at the switch MTU, a server's at its plane's."""
    if state.namespaces.get(ns) in ("router", "bridge"):
        return cable.model_copy(update={"mtu": SWITCH_MTU})
    return cable


def _forget_path_mtus(state: LabState, run: CommandRunner) -> None:
    """Servers cached the fault's smaller path MTU (for 10 minutes); healed means healed now."""
    for ns in state.servers.values():
        run(["ip", "-n", ns, "route", "flush", "cache"], check=False)


def _undo_end(
    ns: str, dev: str, cable: VethState, *, kind: str, routes: dict[str, tuple[str, ...]], run: CommandRunner
) -> None:
    if kind == "loss":
        run(["ip", "netns", "exec", ns, "nft", "delete", "table", "netdev", f"gnloss_{dev}"], check=False)
    elif kind == "down":
        run([*_ip(ns), "link", "set", dev, "up"])
        via_dev = re.compile(rf" dev {re.escape(dev)}(\s|$)")
        lines = [r.replace("route add ", "route replace ", 1) for r in routes.get(ns, ()) if via_dev.search(r)]
        ip_batch(run, lines, ns)
    elif kind == "mtu":
        run([*_ip(ns), "link", "set", dev, "mtu", str(cable.mtu)])
    elif kind in ("rate", "delay"):
        if cable.mbit > 0:
            run(["tc", "-n", ns, *tbf_line(dev, cable.mbit, cable.mtu).split()])
        else:
            run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)


def _state(lab_id: str) -> LabState:
    state = read_state(lab_id)
    if state is None or state.status != "up":
        raise LabUsageError(f"no lab {lab_id!r} is up; `gpunet lab up` builds one")
    return state
