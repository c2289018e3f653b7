"""lldpd in a lab's servers and switches: started by `lab up --lldp`, or else by the first command
that reads LLDP there (`cabling check --lab`, `switch check --lab`), which then waits until every
cable end has heard its neighbour, as `lab up --lldp` does before it returns. A lab nobody reads
LLDP from never pays for it: a daemon per namespace and the second until their first frames cross
were half of an 8-server `lab up` (issue 31)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor

from gpunet.errors import LabError, LabUsageError
from gpunet.lab.access import device_prefix
from gpunet.lab.faults import await_lldp
from gpunet.lab.lldpd import TX_INTERVAL_S, lldpd_available, silent_ports, start_lldpd, wait_for_sockets
from gpunet.lab.management import MANAGEMENT_PORTS
from gpunet.lab.ready import DEFAULT_DEADLINE_S, PARALLEL, lldp_condition, wait_ready
from gpunet.lab.state import ETC_NETNS, LabState, VethState, check_id, lab_dir, lab_lock, read_state, write_state

LLDP_RUNNING = (f"lldpd in every server and switch (LLDP every {TX_INTERVAL_S} s): `gpunet cabling check --lab "
                "ID` reads it")
LLDP_ON_DEMAND = ("lldpd starts in every server and switch with the first `gpunet cabling check --lab ID` or "
                  "`switch check --lab ID` (which waits until every cable end has heard its neighbour), or with "
                  "`lab up --lldp`")
NO_LLDPD = "no LLDP: lldpd is not installed (Debian package lldpd), so `cabling check --lab` has nothing to read"


def lldp_note(running: bool) -> str:
    if not lldpd_available():
        return NO_LLDPD
    return LLDP_RUNNING if running else LLDP_ON_DEMAND


def start_lab_lldpd(lab_id: str, namespaces: Mapping[str, str]) -> None:
    """lldpd in every namespace (name -> kind), a switch's management ports left out; returns once
    each has opened its control socket."""
    log = lab_dir(lab_id) / "lldpd.log"
    device = f"gn{lab_id}-"
    for ns, kind in namespaces.items():
        skip = MANAGEMENT_PORTS if kind != "server" else ()
        start_lldpd(ETC_NETNS / ns, ns.removeprefix(device), device_prefix(lab_id, ns, kind), log, skip=skip)
    late = wait_for_sockets([ETC_NETNS / ns for ns in namespaces])
    if late:
        raise LabError(f"lldpd did not start in {', '.join(p.name for p in late[:3])}; see {log}")


def cabled_ports(veths: Collection[VethState], leave_out: Collection[str] = ()) -> dict[str, set[str]]:
    """Every cable end in a lab namespace whose far end is one too (the host's side runs no
    lldpd), but the cables named in `leave_out`."""
    ports: dict[str, set[str]] = defaultdict(set)
    for v in veths:
        if v.a_ns and v.cable not in leave_out:
            ports[v.a_ns].add(v.a_if)
            ports[v.b_ns].add(v.b_if)
    return dict(ports)


def silent_in(lab_id: str, namespaces: Mapping[str, str], pool: ThreadPoolExecutor
              ) -> Callable[[Mapping[str, set[str]]], list[str]]:
    """The ports (namespace -> interfaces) that have heard no neighbour yet, asked of each device's lldpd."""
    return lambda ports: silent_ports(ports, lambda ns: device_prefix(lab_id, ns, namespaces[ns]), pool)


def ensure_lldp(lab_id: str, deadline_s: float = DEFAULT_DEADLINE_S) -> LabState:
    """lldpd running in every namespace of the lab, started now if it is not, and every cable end
    having heard its neighbour (a miswired one: its new neighbour) before this returns; the lab's
    state says so from then on. Nothing where lldpd is not installed (its note says so)."""
    check_id(lab_id)
    with lab_lock(lab_id):
        state = read_state(lab_id)
        if state is None or state.status != "up":
            raise LabUsageError(f"no lab {lab_id!r} is up; `gpunet lab up` builds one")
        return lldp_started(state, deadline_s)


def lldp_started(state: LabState, deadline_s: float) -> LabState:
    """`ensure_lldp` for a lab whose lock the caller holds."""
    if state.lldp or not lldpd_available():
        return state
    lab_id = state.lab_id
    start_lab_lldpd(lab_id, state.namespaces)
    miswires = [f for f in state.faults if f.kind == "miswire"]
    # moved ends are awaited below; a cable down, or dropping frames, is not heard: cabling says so
    unheard = {c for f in state.faults if f.kind in ("miswire", "down", "loss") for c in (f.cable, f.other) if c}
    with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
        heard = lldp_condition(cabled_ports(state.veths, unheard), silent_in(lab_id, state.namespaces, pool))
        wait_ready([heard], deadline_s)
    state = state.model_copy(update={"lldp": True, "notes": _noted(state.notes, lldp_note(True))})
    for fault in miswires:  # the moved ends: heard by their new neighbours
        await_lldp(state, fault, swapped=True)
    write_state(state)
    return state


def _noted(notes: tuple[str, ...], note: str) -> tuple[str, ...]:
    return tuple(note if n in (LLDP_ON_DEMAND, LLDP_RUNNING) else n for n in notes)

