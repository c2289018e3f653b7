"""When a lab is ready to be judged, and waiting until it is.

`lab up` creates everything in a second or two, but a check run right then could still see a lab
that is settling: an address in duplicate-address detection, an sshd not yet listening, an lldpd
that has not heard its neighbour, a path whose first packets are still resolving neighbours. Each
condition here looks at the lab as it is (one observation: what is not ready yet, named) and
`wait_ready` polls them until all hold or a deadline passes; a condition that held is not looked
at again. The observations (`Looks`) are made from this process's own threads in each namespace
(lab/inside.py: /proc/thread-self/net and an ICMP socket, no process per look) and parsed by small
pure functions, so the waiting logic and the parsing are tested with fake observations; the lab
tests run them for real."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import Field

from gpunet.errors import LabError
from gpunet.lab import inside
from gpunet.model.base import Frozen
from gpunet.model.plan import Interface, Node, Plan

ConditionName = Literal["addresses", "sshd", "lldp", "bgp", "routes"]
POLL_S = 0.25  # between looks at what is still pending
DEFAULT_DEADLINE_S = 60.0  # lldpd's first frames on a loaded 2-core host take seconds, not minutes
PARALLEL = 8  # observation commands at once: bounded, whatever the lab's size
SSH_PORT = "22"
SHOWN = 3  # pending items named per condition in an error


class ConditionTiming(Frozen):
    """When one condition held, counted from the end of the build, and how many things it looked at."""

    ready_s: float = Field(ge=0, allow_inf_nan=False)
    checked: int = Field(ge=0)


class Readiness(Frozen):
    """How long a lab took: building it, then waiting until every condition held."""

    built_s: float = Field(ge=0, allow_inf_nan=False)
    ready_s: float = Field(ge=0, allow_inf_nan=False)
    conditions: dict[ConditionName, ConditionTiming]


@dataclass(frozen=True)
class Condition:
    """One thing a judged lab needs. `pending` looks once and names what is not ready yet ([] once it
    holds); `checked` is how many things it looks at (namespaces, servers, ports, pings); it is not
    looked at before the conditions it `needs` hold (pings wait for BGP: each unanswered one would
    cost its timeout, every round, while the routes are still coming)."""

    name: ConditionName
    checked: int
    pending: Callable[[], list[str]]
    needs: tuple[ConditionName, ...] = ()


class LabNotReady(LabError):
    """The deadline passed with conditions still pending; `pending` names them, per condition."""

    def __init__(self, message: str, pending: Mapping[str, Sequence[str]]) -> None:
        super().__init__(message)
        self.pending = dict(pending)


def wait_ready(conditions: Sequence[Condition], deadline_s: float, *, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> dict[ConditionName, ConditionTiming]:
    """Poll every pending condition until all hold; each one's time is when it was first seen
    holding. Always looks once, even with no time left (a lab that is ready is never refused)."""
    started = clock()
    timings: dict[ConditionName, ConditionTiming] = {}
    waiting = list(conditions)
    pending: dict[str, list[str]] = {}
    while waiting:
        pending = _look(waiting)
        now = clock() - started
        timings |= {c.name: ConditionTiming(ready_s=round(now, 3), checked=c.checked)
                    for c in waiting if not pending[c.name]}
        waiting = [c for c in waiting if pending[c.name]]
        if waiting and now >= deadline_s:
            raise LabNotReady(f"not ready after {deadline_s:g} s: {describe_pending(waiting, pending)}",
                              {c.name: pending[c.name] for c in waiting})
        if waiting:
            sleep(POLL_S)
    return {c.name: timings[c.name] for c in conditions}


def _look(waiting: Sequence[Condition]) -> dict[str, list[str]]:
    """One look at each waiting condition, in order: one whose needs held earlier in the same round
    is looked at in it (the pings go out as soon as BGP is seen converged, not a poll later)."""
    pending: dict[str, list[str]] = {}
    still = {w.name for w in waiting}
    for condition in waiting:
        # a need looked at this round holds if nothing of it is pending; one not looked at, if it held before
        unmet = [need for need in condition.needs if pending.get(need, need in still)]
        pending[condition.name] = [f"waiting for {', '.join(unmet)}"] if unmet else condition.pending()
    return pending


def describe_pending(waiting: Sequence[Condition], pending: Mapping[str, Sequence[str]]) -> str:
    """"lldp: 2 of 48 silent (gnab-gpu1:ib0, gnab-gpu2:ib0); routes: ..." for an error message."""
    parts = []
    for condition in waiting:
        named = pending[condition.name]
        more = f", {len(named) - SHOWN} more" if len(named) > SHOWN else ""
        parts.append(f"{condition.name}: {len(named)} of {condition.checked} not ready "
                     f"({', '.join(named[:SHOWN])}{more})")
    return "; ".join(parts)


# --- sshd: listening on the management address ------------------------------------------------------

def sshd_listens(sockets: set[tuple[str, int]], address: str) -> bool:
    """Whether a namespace's listening TCP sockets include port 22 at `address` (or every address)."""
    return any(port == int(SSH_PORT) and host in (address, "0.0.0.0", "::") for host, port in sockets)


# --- routes: every server reaches the far side of each of its planes --------------------------------

@dataclass(frozen=True)
class Ping:
    """One echo a server sends on a plane, from its address there, to a peer's (or the gateway)."""

    node: str
    plane: str
    source: str
    target: str
    peer: str

    def __str__(self) -> str:
        return f"{self.node}->{self.peer} on {self.plane} ({self.source}->{self.target})"


def far_side_pings(plan: Plan, servers: Sequence[str]) -> list[Ping]:
    """Per plane, each server pings the one half the plane away (in the plan's order: under another
    leaf where the plane has several), from the address doctor probes from; and the management
    gateway. One echo per server and plane: bounded by servers x planes."""
    nodes = [n for n in plan.nodes if n.name in set(servers)]
    addressed = {n.name: probed_interfaces(n) for n in nodes}
    pings = []
    for plane in sorted({p for mine in addressed.values() for p in mine}):
        on_plane = [n.name for n in nodes if plane in addressed[n.name]]
        for k, node in enumerate(on_plane):
            peer = on_plane[(k + len(on_plane) // 2) % len(on_plane)]
            if peer != node:
                pings.append(Ping(node, plane, _ip(addressed[node][plane]), _ip(addressed[peer][plane]), peer))
    gateway = next((p.gateway for p in plan.planes if p.name == "management" and p.gateway), None)
    if gateway:
        pings += [Ping(n, "management", _ip(mine["management"]), gateway, "gateway")
                  for n, mine in addressed.items() if "management" in mine]
    return pings


def probed_interfaces(node: Node) -> dict[str, Interface]:
    """The interface per plane doctor --peers probes from (the last addressed one; oob is never probed)."""
    return {i.plane: i for i in node.interfaces if i.address and i.plane != "oob"}


def _ip(interface: Interface) -> str:
    return (interface.address or "").split("/")[0]


# --- the conditions of a lab, observed in its namespaces -------------------------------------------

class Looks(Protocol):
    """The observations the conditions make, each in one namespace (None: this host's own)."""

    def unsettled(self, namespace: str | None, only: str | None = None) -> list[str]: ...
    def listening(self, namespace: str) -> set[tuple[str, int]]: ...
    def answered(self, namespace: str, ping: Ping) -> bool: ...


class InNamespaces:
    """The observations made from a thread of this process (lab/inside.py): no process per look."""

    def unsettled(self, namespace: str | None, only: str | None = None) -> list[str]:
        return inside.namespace_unsettled(namespace, only)

    def listening(self, namespace: str) -> set[tuple[str, int]]:
        return inside.tcp_listeners(namespace)

    def answered(self, namespace: str, ping: Ping) -> bool:
        return inside.answers(namespace, ping.source, ping.target)


@dataclass(frozen=True)
class LabView:
    """What the conditions look at in a lab just built."""

    namespaces: Sequence[str]  # every namespace the lab made
    host_if: str  # its veth in the host's namespace
    sshd: Mapping[str, tuple[str, str]]  # server -> (namespace, management address)
    lldp_ports: Mapping[str, set[str]]  # namespace -> cabled interfaces; empty where lldpd does not run
    pings: Sequence[tuple[str, Ping]]  # (the sending server's namespace, the echo)


def lab_conditions(view: LabView, looks: Looks, pool: ThreadPoolExecutor,
                   lldp_silent: Callable[[Mapping[str, set[str]]], list[str]] | None) -> list[Condition]:
    """The conditions of this lab: LLDP only where lldpd runs (`lldp_silent` names the silent
    "namespace:interface" of the ports given)."""
    conditions = [
        Condition("addresses", len(view.namespaces) + 1, lambda: _unsettled(view, looks, pool)),
        Condition("sshd", len(view.sshd), lambda: _not_listening(view, looks, pool)),
    ]
    if lldp_silent is not None and view.lldp_ports:
        conditions.append(lldp_condition(view.lldp_ports, lldp_silent))
    pings = list(view.pings)
    conditions.append(Condition("routes", len(pings), lambda: _unanswered(pings, looks, pool)))
    return conditions


def _unsettled(view: LabView, looks: Looks, pool: ThreadPoolExecutor) -> list[str]:
    found = pool.map(looks.unsettled, view.namespaces)
    return ([f"{ns} {entry}" for ns, entries in zip(view.namespaces, found, strict=True) for entry in entries]
            + [f"host {entry}" for entry in looks.unsettled(None, view.host_if)])


def _not_listening(view: LabView, looks: Looks, pool: ThreadPoolExecutor) -> list[str]:
    servers = sorted(view.sshd.items())
    found = pool.map(lambda item: looks.listening(item[1][0]), servers)
    return [f"{node} ({address}:{SSH_PORT})" for (node, (_, address)), sockets in zip(servers, found, strict=True)
            if not sshd_listens(sockets, address)]


def lldp_condition(ports: Mapping[str, set[str]],
                   lldp_silent: Callable[[Mapping[str, set[str]]], list[str]]) -> Condition:
    """Every port listed (namespace -> interfaces) has heard a neighbour (`lldp_silent` names the
    silent ones as "namespace:interface")."""
    held = {ns: set(interfaces) for ns, interfaces in ports.items()}
    return Condition("lldp", sum(len(p) for p in held.values()), lambda: _silent(held, lldp_silent))


def _silent(ports: dict[str, set[str]], lldp_silent: Callable[[Mapping[str, set[str]]], list[str]]) -> list[str]:
    """Silent ports; only those are asked about again (a port that heard its neighbour stays heard)."""
    silent = lldp_silent(ports)
    still = set(silent)
    narrowed = {ns: left for ns, interfaces in ports.items()
                if (left := {i for i in interfaces if f"{ns}:{i}" in still})}
    ports.clear()
    ports.update(narrowed)
    return silent


def _unanswered(pings: list[tuple[str, Ping]], looks: Looks, pool: ThreadPoolExecutor) -> list[str]:
    """Pings not answered; only those are sent again next time (an answered path stays converged:
    static routes, and neighbours that stay resolved while the lab is used)."""
    answered = list(pool.map(lambda item: looks.answered(*item), pings))
    pings[:] = [item for item, ok in zip(pings, answered, strict=True) if not ok]
    return [str(ping) for _, ping in pings]
