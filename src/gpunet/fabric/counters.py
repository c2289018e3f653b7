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
