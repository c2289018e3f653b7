"""The growth guarantee, checked on the result: against the previous plan, no node that is
still there lost an address, no switch its ASN, loopback or management address, and no cable
between devices that are still there moved or lost its /31."""

from __future__ import annotations

from gpunet.errors import DesignError, SpecProblem
from gpunet.model.plan import Link, Plan


def check_stable(previous: Plan, plan: Plan) -> None:
    moved_cables = _moved_cables(previous, plan)
    renumbered = _renumbered(previous, plan)
    if not moved_cables and not renumbered:
        return
    planes = sorted({plane for plane, _ in moved_cables} | {plane for plane, _ in renumbered})
    raise DesignError([SpecProblem(
        f"this change moves {len(moved_cables)} existing cable(s) and renumbers {len(renumbered)} existing "
        f"address(es) on {', '.join(planes)} (e.g. {_example(moved_cables, renumbered)})",
        ("planes", planes[0], "fabric"),
        "set fabric.planned_nodes to the size the cluster grows to (spines and cores are sized for it), "
        "or re-plan with --fresh to accept the recabling",
    )])


def _moved_cables(previous: Plan, plan: Plan) -> list[tuple[str, str]]:
    """Cables of the previous plan that are gone. While every previous node is still there, any
    gone cable counts, also one whose switch the new layout dropped (fewer spines after a port-speed
    change); only when nodes were removed may cables of devices that went with them go too."""
    nodes = {n.name for n in plan.nodes}
    shrunk = any(n.name not in nodes for n in previous.nodes)
    devices = nodes | {s.name for s in plan.switches}
    now = {(c.a.device, c.a.port, c.b.device, c.b.port) for c in plan.links}
    gone = [c for c in previous.links if (c.a.device, c.a.port, c.b.device, c.b.port) not in now]
    return [(c.plane, f"{c.a.device}:{c.a.port}-{c.b.device}:{c.b.port}") for c in gone
            if not shrunk or {c.a.device, c.b.device} <= devices]


def _renumbered(previous: Plan, plan: Plan) -> list[tuple[str, str]]:
    now = {(n.name, i.name): i.address for n in plan.nodes for i in n.interfaces}
    return [
        (i.plane, f"{n.name}/{i.name} {i.address}") for n in previous.nodes for i in n.interfaces
        if (n.name, i.name) in now and i.address and now[n.name, i.name] != i.address
    ] + _switches_renumbered(previous, plan) + _cables_renumbered(previous, plan)


SWITCH_NUMBERS = ("asn", "loopback", "management")


def _switches_renumbered(previous: Plan, plan: Plan) -> list[tuple[str, str]]:
    """A switch that is still there keeps its ASN, loopback and management address."""
    now = {s.name: s for s in plan.switches}
    return [(s.plane, f"{s.name} {key} {getattr(s, key)}") for s in previous.switches if s.name in now
            for key in SWITCH_NUMBERS if getattr(s, key) is not None and getattr(now[s.name], key) != getattr(s, key)]


def _cables_renumbered(previous: Plan, plan: Plan) -> list[tuple[str, str]]:
    """A switch-to-switch cable that is still there keeps its /31."""
    now = {_key(c): c.p2p for c in plan.links if c.p2p is not None}
    return [(c.plane, f"{c.a.device}:{c.a.port} /31 {c.p2p}") for c in previous.links
            if c.p2p is not None and _key(c) in now and now[_key(c)] != c.p2p]


def _key(cable: Link) -> tuple[str, str, str, str]:
    return cable.a.device, cable.a.port, cable.b.device, cable.b.port


def _example(moved: list[tuple[str, str]], renumbered: list[tuple[str, str]]) -> str:
    return (moved or renumbered)[0][1]
