"""snmp_exporter's IF-MIB series mapped to the Plan: a switch by its planned name, its management
address, or address:port (Prometheus' usual `instance`) in the label chosen; a port by ifName,
ifDescr or ifAlias. What mapped is counted against what the Plan has, and nothing mapping is no
verdict: a fabric nobody's counters were read from is not clean."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunet.errors import CannotJudge
from gpunet.fabric.counters import EthPortErrors
from gpunet.fabric.observed import End, Names
from gpunet.fabric.prometheus import IfMibPort, host_of
from gpunet.model.plan import Plan


@dataclass
class Mapped:
    ports: list[EthPortErrors] = field(default_factory=list)  # device: the planned switch
    switches: set[str] = field(default_factory=set)  # planned switches some series named
    planned_ports: set[tuple[str, str]] = field(default_factory=set)  # (switch, port) with series
    strangers: list[str] = field(default_factory=list)  # what named no planned switch


def switch_keys(plan: Plan) -> dict[str, str]:
    """Lower-cased planned name and management address (no prefix) -> the planned switch."""
    keys = {s.name.lower(): s.name for s in plan.switches}
    keys |= {s.management.split("/")[0].lower(): s.name for s in plan.switches if s.management}
    return keys


def planned_switch(keys: dict[str, str], names: Sequence[str]) -> str | None:
    for name in names:
        text = name.strip().lower()
        for key in (text, host_of(text), host_of(text).split(".")[0]):
            if key in keys:
                return keys[key]
    return None


def map_series(plan: Plan, series: Sequence[IfMibPort]) -> Mapped:
    keys, names = switch_keys(plan), Names(plan)
    mapped = Mapped()
    for port in series:
        switch = planned_switch(keys, port.switch_names)
        if switch is None:
            mapped.strangers.append(port.shown)
            continue
        mapped.switches.add(switch)
        local = _local_port(names, switch, port)
        if local is not None:
            mapped.planned_ports.add((switch, local[1]))
        mapped.ports.append(EthPortErrors(device=switch, interface=local[0] if local else _unplanned(port),
                                          counters=port.counters))
    return mapped


# An ifAlias read for its number only where it looks like an interface name (Ethernet6, etp6, Eth1/6):
# in a description such as "uplink to spine 2" or "gpu002:ens1" the last number is not this port's.
INTERFACE_NAME = re.compile(r"[A-Za-z][A-Za-z_-]*[0-9]+(?:/[0-9]+)*")


def _unplanned(port: IfMibPort) -> str:
    """How a port that names no planned port is shown: its ifName (or ifDescr), else its description
    quoted, so that nothing later reads a number off a description."""
    return port.port_names[0] if port.port_names else f"ifAlias {port.alias!r}"


def _local_port(names: Names, switch: str, port: IfMibPort) -> tuple[str, str] | None:
    """(interface as reported, planned port): by ifName or ifDescr; else by ifAlias, as the far
    end it describes (gpunet's rendered descriptions: "gpu002:ens1") or an interface name."""
    found = next(((n, p) for n in port.port_names if (p := names.port(switch, [n])) is not None), None)
    alias = port.alias.strip()
    if found is not None or not alias:
        return found
    device, _, far_port = alias.rpartition(":")
    far = names.planned_far.get(End(names.device(device) or "", far_port)) if device else None
    if far is not None and far.device == switch:
        return f"{alias} port {far.port}", far.port  # the interface text ends in the port: read back the same
    if INTERFACE_NAME.fullmatch(alias) and (number := names.port(switch, [alias])) is not None:
        return alias, number
    return None


def cabled_switch_ports(plan: Plan) -> set[tuple[str, str]]:
    switches = {s.name for s in plan.switches}
    return {(p.device, p.port) for link in plan.links for p in (link.a, link.b) if p.device in switches}


def coverage(plan: Plan, mapped: Mapped, label: str) -> list[str]:
    """What the series covered, said; CannotJudge when they cover no planned switch."""
    cabled = cabled_switch_ports(plan)
    if not mapped.switches:
        seen = ", ".join(sorted(set(mapped.strangers))[:3]) or "no IF-MIB series at all"
        raise CannotJudge(
            f"no IF-MIB series names a planned switch (seen: {seen}): set the `{label}` label to each switch's "
            "planned name or management address (address:port is fine) — the snmp job of `gpunet render --target "
            "prometheus` does — or give --switch-label with the label that holds it")
    notes = [f"IF-MIB series for {len(mapped.switches)} of {len(plan.switches)} planned switches and "
             f"{len(mapped.planned_ports & cabled)} of {len(cabled)} cabled switch ports"]
    if mapped.strangers:
        notes.append(f"{len(mapped.strangers)} series named no planned switch, left out: "
                     f"{', '.join(sorted(set(mapped.strangers))[:3])}")
    return notes
