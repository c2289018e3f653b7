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


# SONiC's `portstat -j` (sonic-utilities: the `show interfaces counters` table as JSON, one object per
# interface, every value a string as the table shows it: "1,000", "N/A"), or that table itself
# (`portstat`, `show interfaces counters`). Its error and drop columns in ip's words, so both read
# the same.
PORTSTAT = "portstat -j"
PORTSTAT_COUNTERS = {"RX_ERR": "rx_errors", "RX_DRP": "rx_dropped", "RX_OVR": "rx_over_errors",
                     "TX_ERR": "tx_errors", "TX_DRP": "tx_dropped"}
SONIC_PORT = re.compile(r"^Ethernet([0-9]{1,4})$")
PORTSTAT_PREAMBLE = re.compile(r"^(Last cached time was .*|The rates are calculated within .*)$")


def parse_portstat(text: str, device: str, lanes: int = 1) -> tuple[EthPortErrors, ...]:
    """`portstat -j` of one SONiC switch. SONiC names a port by its first SerDes lane
    (Ethernet8 is the second port at 8 lanes): with the switch's `lanes`, EthernetN is told as
    etpM, the front-panel alias gpunet renders. A table with no RX_ERR column, a value that is no
    count, or anything but one object per interface is refused: a clean reading of it would be a
    guess."""
    body = "\n".join(line for line in text.splitlines() if not PORTSTAT_PREAMBLE.match(line.strip()))
    table = load_json(body, PORTSTAT) if body.lstrip().startswith("{") else portstat_table(body)
    if not isinstance(table, dict) or not table:
        raise ParseError(PORTSTAT, 1, "not an object of interfaces: not portstat -j output")
    found = []
    for name, row in table.items():
        if not isinstance(row, dict) or "RX_ERR" not in row:
            raise ParseError(PORTSTAT, 1, f"{str(name)[:40]!r} has no RX_ERR column: not portstat -j output")
        counters = {ours: _portstat_count(row[theirs], name, theirs)
                    for theirs, ours in PORTSTAT_COUNTERS.items() if row.get(theirs, "N/A") != "N/A"}
        found.append(EthPortErrors(device=device, interface=sonic_alias(name, lanes), counters=counters))
    return tuple(found)


def portstat_table(text: str) -> dict[str, dict[str, str]]:
    """The table `portstat` prints, as `portstat -j` would give it: the dashed line under the
    header says where each column is (a rate like "200.87 B/s" holds a space)."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    rule = next((i for i, line in enumerate(lines) if set(line.replace(" ", "")) == {"-"}), None)
    if rule is None or rule == 0:
        raise ParseError(PORTSTAT, 1, "no header and dashed rule: not portstat output")
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[rule])]
    header = [lines[rule - 1][a:b].strip() for a, b in spans]
    if header[0] != "IFACE" or "RX_ERR" not in header:
        raise ParseError(PORTSTAT, rule, f"the header {' '.join(header)[:80]!r} has no IFACE and RX_ERR")
    table = {}
    for number, line in enumerate(lines[rule + 1:], rule + 2):
        if line.startswith("Reminder:"):  # multi-ASIC switches add a hint under the table
            continue
        cells = [line[a:b].strip() for a, b in spans]
        if not SONIC_PORT.match(cells[0]) and not cells[0].startswith("Ethernet"):
            raise ParseError(PORTSTAT, number, f"not an interface row: {line.strip()[:80]!r}")
        table[cells[0]] = dict(zip(header[1:], cells[1:], strict=True))
    return table


def sonic_alias(name: str, lanes: int) -> str:
    """Ethernet16 at 8 lanes is etp3; a name not on a port boundary (a breakout) stays as it is."""
    number = SONIC_PORT.match(name)
    if number is None or lanes < 1 or int(number[1]) % lanes:
        return name
    return f"etp{int(number[1]) // lanes + 1}"


def _portstat_count(value: object, name: str, column: str) -> int:
    text = str(value).replace(",", "")
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        raise ParseError(PORTSTAT, 1, f"{str(name)[:40]} {column}: {str(value)[:40]!r} is no count")
    return int(text)


def parse_switch_counters(text: str, device: str, lanes: int = 1) -> tuple[EthPortErrors, ...]:
    """What the switch counter command printed: SONiC's `portstat -j` (an object of interfaces)
    where the switch has it, else `ip -s -s -j link` (a list of links: any Linux NOS)."""
    start = text.lstrip()[:1]
    if start == "[":
        return parse_ip_link_stats(text, device)
    return parse_portstat(text, device, lanes)
