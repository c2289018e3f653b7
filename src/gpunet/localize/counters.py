"""Suspects from InfiniBand port counters: two ibqueryerrors samples (or one, the totals since the
counters were last cleared), each errored port mapped to the Plan's cable through the names the
fabric reports, cables ranked by the damage counted on either end.

Damage (symbol errors, link recovery, link downed, receive errors) counts against the cable into
the port. PortXmitWait is congestion, not damage: it is said, never blamed on a cable."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpunet.fabric.cabling import cable_name
from gpunet.fabric.counters import CONGESTION, DAMAGE, DISCARDS, ETH_DAMAGE, ETH_DROPS, EthPortErrors, PortErrors
from gpunet.fabric.observed import MELLANOX_DESCRIPTION, End, Names, cables_by_end
from gpunet.localize.report import Suspect, cable_fix
from gpunet.model.plan import Link, Plan

MIN_DAMAGE = 10  # error events on a cable before it is named (ibqueryerrors' default threshold): a
# healthy link shows the odd symbol error


@dataclass
class CounterReading:
    suspects: list[Suspect] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def port_end(names: Names, port: PortErrors) -> End | None:
    """The Plan's end for a reported port: a switch by its described name and port number, an
    HCA ("gpu001 mlx5_0") port 1 as its planned interface."""
    mellanox = MELLANOX_DESCRIPTION.match(port.description)
    switch = names.device(mellanox[1] if mellanox else port.description.split(" ")[0])
    if switch in names.switch_radix:
        return End(switch, str(port.port))
    host, _, hca = port.description.rpartition(" ")
    device = names.device(host)
    if device is not None and (device, hca) in names.hcas and port.port == 1:
        return End(device, names.hcas[device, hca])
    return None


def deltas(before: Sequence[PortErrors] | None, after: Sequence[PortErrors]) -> tuple[list[PortErrors], list[str]]:
    """Counts added between the samples; a port absent before was under the threshold (taken as
    0), and one that went down was cleared in between (its new count is taken)."""
    if before is None:
        return list(after), ["one sample: counts are totals since the counters were last cleared, not rates"]
    earlier = {(p.guid, p.port): p.counters for p in before}
    changed, cleared = [], 0
    for port in after:
        old = earlier.get((port.guid, port.port), {})
        counts = {}
        for name, value in port.counters.items():
            grown = value - old.get(name, 0)
            cleared += grown < 0
            counts[name] = value if grown < 0 else grown
        if any(counts.values()):
            changed.append(port.model_copy(update={"counters": {k: v for k, v in counts.items() if v}}))
    notes = [f"{cleared} counter(s) went down between the samples (cleared): their new values are used"] \
        if cleared else []
    return changed, notes


def counter_suspects(plan: Plan, before: Sequence[PortErrors] | None, after: Sequence[PortErrors],
                     seconds: float | None = None) -> CounterReading:
    """InfiniBand ports (ibqueryerrors)."""
    names = Names(plan)
    changed, notes = deltas(before, after)
    reading = CounterReading(notes=notes)
    ports = [(port_end(names, p), p.counters, f"{p.description} port {p.port}") for p in changed]
    return _rank(plan, cables_by_end(plan), ports, damage_kinds=DAMAGE, seconds=seconds, reading=reading)


def eth_counter_suspects(plan: Plan, before: Sequence[EthPortErrors] | None, after: Sequence[EthPortErrors],
                         seconds: float | None = None) -> CounterReading:
    """Ethernet switch ports (`ip -s -s -j link` from the switch, or snmp_exporter's IF-MIB). With
    `before`, a port it lacks is left out and said: its totals since the counters were cleared are
    no growth in the window (Prometheus had not scraped the switch yet, the switch did not answer)."""
    names = Names(plan)
    earlier = {(p.device, p.interface): p for p in before} if before is not None else None
    reading = CounterReading(notes=[] if before is not None else
                             ["one sample: counts are totals since the counters were last cleared, not rates"])
    if earlier is not None:
        unread = [f"{p.device} {p.interface}" for p in after if (p.device, p.interface) not in earlier]
        after = [p for p in after if (p.device, p.interface) in earlier]
        reading.notes += unread_note(unread, seconds)
    ports = []
    for port in after:
        old = earlier.get((port.device, port.interface)) if earlier is not None else None
        grown = {k: v - (old.counters.get(k, 0) if old else 0) for k, v in port.counters.items()}
        grown = {k: v for k, v in grown.items() if v > 0}
        device = names.device(port.device)
        local = names.port(device, [port.interface]) if device else None
        ports.append((End(device, local) if device and local else None, grown, f"{port.device} {port.interface}"))
    cable_at = cables_by_end(plan)
    reading.notes += drops_note(ports, cable_at)
    return _rank(plan, cable_at, [p for p in ports if p[1]], damage_kinds=ETH_DAMAGE, seconds=seconds,
                 reading=reading)


def unread_note(unread: Sequence[str], seconds: float | None) -> list[str]:
    if not unread:
        return []
    ago = f"{seconds:g} s earlier" if seconds else "in the first sample"
    return [f"{len(unread)} port(s) had no reading {ago}, left out (their counts are totals, not growth): "
            f"{', '.join(unread[:3])}"]


def _rank(plan: Plan, cable_at: dict[End, Link], ports: list[tuple[End | None, dict[str, int], str]], *,
          damage_kinds: tuple[str, ...], seconds: float | None, reading: CounterReading) -> CounterReading:
    """Damage summed per cable (either end), cables ranked by it; other signals said in notes."""
    damage: dict[str, list[tuple[End, dict[str, int]]]] = defaultdict(list)
    unnamed = []
    for end, counters, shown in ports:
        link = cable_at.get(end) if end else None
        if end is None or link is None:
            unnamed.append(shown)
            continue
        hurt = {k: v for k, v in counters.items() if k in damage_kinds}
        if hurt:
            damage[cable_name(link)].append((end, hurt))
        reading.notes += _other_signals(end, counters, seconds)
    if unnamed:
        reading.notes.append(f"{len(unnamed)} port(s) with errors on no planned cable, skipped: "
                             f"{', '.join(unnamed[:3])}")
    total = sum(sum(c.values()) for ends in damage.values() for _, c in ends) or 1
    span = f" in {seconds:g} s" if seconds else ""
    for cable, ends in sorted(damage.items(), key=lambda item: -sum(sum(c.values()) for _, c in item[1])):
        count = sum(sum(c.values()) for _, c in ends)
        evidence = tuple(f"{end}: " + ", ".join(f"{k} +{v}" for k, v in sorted(c.items())) + span for end, c in ends)
        reading.suspects.append(Suspect(
            cable=cable, plane=cable_at[ends[0][0]].plane, source="counters", confidence=round(count / total, 3),
            evidence=evidence, fix=cable_fix(plan, cable) + "; the port counting errors receives a bad signal: "
            "suspect the cable and the optic at the far end first", named=count >= MIN_DAMAGE))
    return reading


def _other_signals(end: End, counters: dict[str, int], seconds: float | None) -> list[str]:
    span = f" in {seconds:g} s" if seconds else ""
    notes = []
    waited = sum(counters.get(k, 0) for k in CONGESTION)
    if waited:
        notes.append(f"congestion, not damage: {end} PortXmitWait +{waited}{span} (waiting for credits: a hot "
                     "spot or an oversubscribed path, not a bad cable)")
    dropped = {k: v for k, v in counters.items() if k in DISCARDS}
    if dropped:
        notes.append(f"{end} discarded packets on the way out{span}: " +
                     ", ".join(f"{k} +{v}" for k, v in dropped.items()) + " (congestion or a link that went down)")
    return notes


def drops_note(ports: list[tuple[End | None, dict[str, int], str]], cable_at: dict[End, Link]) -> list[str]:
    """Ethernet drops in one line: a full queue, or frames nobody takes (LLDP where no daemon
    listens, IPv6 where it is off, a frame over the port's MTU), not a bad cable; the port's
    cable said where the Plan has it."""
    dropped = sorted(((sum(v for k, v in c.items() if k in ETH_DROPS), shown,
                       cable_name(cable_at[end]) if end in cable_at else None) for end, c, shown in ports),
                     reverse=True)
    dropped = [(n, shown, cable) for n, shown, cable in dropped if n]
    if not dropped:
        return []
    count, shown, cable = dropped[0]
    return [f"{len(dropped)} Ethernet port(s) dropped packets (not errors: a full queue, or frames nobody takes), "
            f"most at {shown}{f' (cable {cable})' if cable else ''}: {count}"]
