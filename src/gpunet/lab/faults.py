"""Breaking the lab on purpose: loss (nftables numgen), link down, MTU, rate; and healing."""

from __future__ import annotations

import re

from gpunet.errors import LabError, LabUsageError
from gpunet.lab.netns import ip_batch, tbf_line
from gpunet.lab.state import Fault, LabState, VethState, labs_lock, read_state, write_state
from gpunet.runner import CommandRunner, run_local

RATE = re.compile(r"^(\d+(?:\.\d+)?)(kbit|mbit|gbit)$")
UNIT_MBIT = {"kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}


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
    with labs_lock():
        return _apply(lab_id, target, kind, value, run)


def _apply(lab_id: str, target: str, kind: str, value: str, run: CommandRunner) -> Fault:
    state = _state(lab_id)
    cable = find_cable(state, target)
    fault = Fault(cable=cable.cable, kind=kind, value=value)
    kept = tuple(f for f in state.faults if not (f.cable == fault.cable and f.kind == kind))
    write_state(state.model_copy(update={"faults": (*kept, fault)}))  # first: heal can undo a half-applied one
    try:
        for ns, dev in _ends(cable):
            _apply_end(ns, dev, cable, kind=kind, value=value, run=run)
    except LabUsageError:
        write_state(state)  # nothing was applied: a bad value is caught before the first command
        raise
    return fault


def _apply_end(ns: str, dev: str, cable: VethState, *, kind: str, value: str, run: CommandRunner) -> None:
    if kind == "loss":
        percent = float(value)
        if not 0 < percent <= 100:
            raise LabUsageError("--loss takes a percentage in (0, 100]")
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
    match = RATE.match(text.strip().lower())
    if not match:
        raise LabUsageError(f"rate {text!r}: write it as tc does, e.g. 100mbit, 1gbit, 500kbit")
    return float(match[1]) * UNIT_MBIT[match[2]]


def heal(lab_id: str, target: str | None = None, run: CommandRunner = run_local) -> list[Fault]:
    """Undo every fault, or those on one cable; returns what was healed."""
    with labs_lock():
        return _heal(lab_id, target, run)


def _heal(lab_id: str, target: str | None, run: CommandRunner) -> list[Fault]:
    state = _state(lab_id)
    chosen = find_cable(state, target).cable if target else None
    healed = [f for f in state.faults if chosen is None or f.cable == chosen]
    by_cable = {v.cable: v for v in state.veths}
    for fault in healed:
        for ns, dev in _ends(by_cable[fault.cable]):
            _undo_end(ns, dev, by_cable[fault.cable], kind=fault.kind, routes=state.routes, run=run)
    if any(f.kind == "mtu" for f in healed):
        _forget_path_mtus(state, run)
    write_state(state.model_copy(update={"faults": tuple(f for f in state.faults if f not in healed)}))
    return healed


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
        raise LabError(f"no lab {lab_id!r} is up; `gpunet lab up` builds one")
    return state
