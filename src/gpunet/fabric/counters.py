"""InfiniBand port counters as `ibqueryerrors` reports them: a pure parser, and what the counters
mean for a cable.

    Errors for 0x200000 "comp-leaf001"
       GUID 0x200000 port ALL: [SymbolErrorCounter == 100]
       GUID 0x200000 port 33: [SymbolErrorCounter == 100] [LinkDownedCounter == 3]
    Errors for "gpu001 mlx5_0"                       (a CA: older releases print no GUID here)

Only ports over ibqueryerrors' thresholds are listed: a port missing from a sample is "below
threshold", not zero. The aggregate `port ALL` line and switch port 0 (management) are skipped."""

from __future__ import annotations

import json
import math
import re

from gpunet.errors import ParseError
from gpunet.model.base import Frozen

TOOL = "ibqueryerrors"
HEADER = re.compile(r'^\s*Errors for (?:(0x[0-9a-fA-F]+)\s+)?"(.*)"\s*$')
PORT = re.compile(r"^\s*GUID (0x[0-9a-fA-F]+) port (ALL|\d+):\s*(.*)$")
COUNTER = re.compile(r"\[(\w+) == (\d+)(?:\s*\([^)]*\))?\]")
# Errors that mean a bad signal on the cable into the port (or the far end's transmitter).
DAMAGE = ("SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
          "PortRcvRemotePhysicalErrors", "LocalLinkIntegrityErrors", "ExcessiveBufferOverrunErrors")
# Packets dropped on the way out (congestion, or a link that went down); not the cable's own fault.
DISCARDS = ("PortXmitDiscards", "PortXmitConstraintErrors", "PortRcvConstraintErrors")
CONGESTION = ("PortXmitWait",)  # time with data to send and no credits: congestion, not damage


class PortErrors(Frozen):
    guid: str
    description: str  # the node description: "comp-leaf001", "gpu001 mlx5_0", "MF0;leaf01:MQM9700/U1"
    port: int
    counters: dict[str, int]


def parse_ibqueryerrors(text: str) -> tuple[PortErrors, ...]:
    found: list[PortErrors] = []
    description: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        header = HEADER.match(line)
        if header:
            description = header[2]
            continue
        port = PORT.match(line)
        if port is None:
            _not_a_port_line(line, number, inside=description is not None)
            continue
        if description is None:
            raise ParseError(TOOL, number, "a port line before any \"Errors for\" line")
        counters = {name: int(value) for name, value in COUNTER.findall(port[3])}
        if not counters:
            raise ParseError(TOOL, number, f"no [Counter == N] on the port line: {port[3][:80]!r}")
        if port[2] != "ALL" and int(port[2]) != 0:
            found.append(PortErrors(guid=port[1].lower(), description=description, port=int(port[2]),
                                    counters=counters))
    return tuple(found)


def _not_a_port_line(line: str, number: int, *, inside: bool) -> None:
    """Blank lines, ## summaries and other tools' warnings pass; an indented line inside a
    record that is no port line means the format is not understood."""
    if inside and line.startswith((" ", "\t")) and line.strip() and not line.lstrip().startswith("##"):
        raise ParseError(TOOL, number, f"not a port line: {line.strip()[:80]!r}")


# Ethernet switch ports, as Linux-based switch OSes (SONiC, Cumulus) expose them to `ip -s -s -j
# link`, and as snmp_exporter's IF-MIB series carry them (ifInErrors ...).
ETH_DAMAGE = ("rx_errors", "rx_crc_errors", "rx_frame_errors", "rx_length_errors")
ETH_DROPS = ("rx_dropped", "tx_dropped", "rx_missed_errors", "rx_over_errors", "rx_fifo_errors")


class EthPortErrors(Frozen):
    device: str  # the switch (or host) as named where it was read
    interface: str  # swp33, Ethernet33, p33
    counters: dict[str, int]


def parse_ip_link_stats(text: str, device: str) -> tuple[EthPortErrors, ...]:
    """`ip -s -s -j link` of one device: its ports' error and drop counters (loopback left out)."""
    try:
        links = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError("ip -s -j link", exc.lineno, f"not JSON: {exc.msg}") from None
    if not isinstance(links, list):
        raise ParseError("ip -s -j link", 1, "not a JSON list of links")
    found = []
    for link in links:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            raise ParseError("ip -s -j link", 1, "a link without an ifname")
        stats = link.get("stats64") or link.get("stats")
        if link["ifname"] == "lo" or not isinstance(stats, dict):
            continue
        counters = {f"{direction}_{name}": int(value) for direction in ("rx", "tx")
                    for name, value in (stats.get(direction) or {}).items()
                    if isinstance(value, int) and f"{direction}_{name}" in (*ETH_DAMAGE, *ETH_DROPS)}
        found.append(EthPortErrors(device=device, interface=link["ifname"], counters=counters))
    return tuple(found)


IF_MIB = {"ifInErrors": "rx_errors", "ifInDiscards": "rx_dropped", "ifOutDiscards": "tx_dropped",
          "ifOutErrors": "tx_errors"}


def parse_prometheus_vector(text: str, now: float, max_age_s: float = 300.0) -> tuple[tuple[EthPortErrors, ...],
                                                                                     list[str]]:
    """A Prometheus HTTP API answer (/api/v1/query, an instant vector) of IF-MIB error series, as
    snmp_exporter labels them (instance, ifName or ifDescr): per port, the value as a count. Series
    older than `max_age_s` are stale: left out and said."""
    try:
        answer = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError("prometheus", exc.lineno, f"not JSON: {exc.msg}") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        why = answer.get("error", "no status") if isinstance(answer, dict) else "not an object"
        raise ParseError("prometheus", 1, f"the query did not succeed: {str(why)[:200]}")
    data = answer.get("data") or {}
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise ParseError("prometheus", 1, f"expected an instant vector, got {data.get('resultType')!r}")
    ports: dict[tuple[str, str], dict[str, int]] = {}
    stale: list[str] = []
    for series in data["result"]:
        metric, value = _series(series)
        name = IF_MIB.get(metric.get("__name__", ""))
        device = metric.get("instance", "").rsplit(":", 1)[0]
        interface = metric.get("ifName") or metric.get("ifDescr") or ""
        if name is None or not device or not interface:
            continue
        stamp, number = value
        if now - stamp > max_age_s:
            stale.append(f"{device} {interface}")
            continue
        ports.setdefault((device, interface), {})[name] = int(number)
    notes = [f"{len(stale)} stale series (older than {max_age_s:g} s) left out, e.g. {stale[0]}"] if stale else []
    return tuple(EthPortErrors(device=d, interface=i, counters=c) for (d, i), c in ports.items()), notes


def _series(series: object) -> tuple[dict[str, str], tuple[float, float]]:
    if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
        raise ParseError("prometheus", 1, "a result without a metric")
    value = series.get("value")
    try:
        stamp, number = float(value[0]), float(value[1])  # type: ignore[index]
    except (TypeError, ValueError, IndexError):
        raise ParseError("prometheus", 1, f"a sample that is not [time, \"number\"]: {str(value)[:80]}") from None
    if not math.isfinite(number) or number < 0:  # NaN, infinite or negative: no count
        raise ParseError("prometheus", 1, f"a sample that is no count: {value[1]!r}")  # type: ignore[index]
    return series["metric"], (stamp, number)
