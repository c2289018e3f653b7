"""InfiniBand port counters as `ibqueryerrors` reports them: a pure parser, and what the counters
mean for a cable.

    Errors for 0x200000 "comp-leaf001"
       GUID 0x200000 port ALL: [SymbolErrorCounter == 100]
       GUID 0x200000 port 33: [SymbolErrorCounter == 100] [LinkDownedCounter == 3]
    Errors for "gpu001 mlx5_0"                       (a CA: older releases print no GUID here)

Only ports over ibqueryerrors' thresholds are listed: a port missing from a sample is "below
threshold", not zero. The aggregate `port ALL` line and switch port 0 (management) are skipped."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.files.inputs import integer, load_json
from gpunet.model.base import Frozen

TOOL = "ibqueryerrors"
HEADER = re.compile(r'^\s*Errors for (?:(0x[0-9a-fA-F]+)\s+)?"(.*)"\s*$')
PORT = re.compile(r"^\s*GUID (0x[0-9a-fA-F]{1,16}) port (ALL|[0-9]{1,3}):\s*(.*)$")
COUNTER = re.compile(r"\[(\w+) == ([0-9]+)(?:\s*\([^)]*\))?\]")
SUMMARY = re.compile(r"^## Summary: [0-9]+ nodes? checked, ([0-9]+) bad nodes? found")
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
    """Every port over the thresholds; a clean fabric's output is its explicit empty form, the
    `## Summary: N nodes checked, 0 bad nodes found` line alone. Text with neither a record nor
    that summary (a quoted paste, an error message, another tool's output) is refused: read as
    "no errors", it would call a fabric clean that nobody looked at."""
    found: list[PortErrors] = []
    description: str | None = None
    records, bad = 0, None
    for number, line in enumerate(text.splitlines(), 1):
        header = HEADER.match(line)
        if header:
            description, records = header[2], records + 1
            continue
        summary = SUMMARY.match(line)
        if summary:
            bad = integer(summary[1], TOOL, number)
            continue
        port = PORT.match(line)
        if port is None:
            _not_a_port_line(line, number, inside=description is not None)
            continue
        if description is None:
            raise ParseError(TOOL, number, "a port line before any \"Errors for\" line")
        counters = {name: integer(value, TOOL, number) for name, value in COUNTER.findall(port[3])}
        if not counters:
            raise ParseError(TOOL, number, f"no [Counter == N] on the port line: {port[3][:80]!r}")
        if port[2] != "ALL" and integer(port[2], TOOL, number) != 0:
            found.append(PortErrors(guid=port[1].lower(), description=description, port=int(port[2]),
                                    counters=counters))
    _check_complete(records, bad)
    return tuple(found)


def _check_complete(records: int, bad: int | None) -> None:
    if records == 0 and bad is None:
        raise ParseError(TOOL, 1, "no \"Errors for\" record and no \"## Summary:\" line: not ibqueryerrors output")
    if records == 0 and bad:
        raise ParseError(TOOL, 1, f"the summary counts {bad} bad node(s) but no \"Errors for\" record was understood")


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
    links = load_json(text, "ip -s -j link")
    if not isinstance(links, list):
        raise ParseError("ip -s -j link", 1, "not a JSON list of links")
    found = []
    for link in links:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            raise ParseError("ip -s -j link", 1, "a link without an ifname")
        stats = link.get("stats64") or link.get("stats")
        if link["ifname"] == "lo":
            continue
        if not isinstance(stats, dict):  # `ip -s -j link` gives every link its stats: this is another output
            raise ParseError("ip -s -j link", 1, f"{link['ifname'][:40]!r} has no stats64: not ip -s -j link")
        counters = {f"{direction}_{name}": int(value) for direction in ("rx", "tx")
                    for name, value in (stats.get(direction) or {}).items()
                    if isinstance(value, int) and f"{direction}_{name}" in (*ETH_DAMAGE, *ETH_DROPS)}
        found.append(EthPortErrors(device=device, interface=link["ifname"], counters=counters))
    return tuple(found)
