"""Readers of /proc/net files under a root path that the exporter reads on every scrape."""

from __future__ import annotations

from pathlib import Path

from gpunet.errors import ParseError
from gpunet.model.state import NetDevCounters, SnmpCounters
from gpunet.probe.parsers import parse_proc_net_dev, parse_proc_snmp6


def read_proc_net_dev(root: Path) -> NetDevCounters | None:
    """Every interface's counters in one read; None where the file does not exist. A file that is
    not /proc/net/dev at all raises ParseError; one bad line is only listed as skipped."""
    try:
        with open(root / "proc/net/dev", "rb") as file:
            text = file.read().decode(errors="replace")
    except FileNotFoundError:
        return None
    return parse_proc_net_dev(text)


def read_snmp6(root: Path, problems: list[str]) -> SnmpCounters | None:
    """/proc/net/snmp6 (Ip6, Icmp6, Udp6, UdpLite6); None, with the reason noted unless the file
    is absent (IPv6 disabled), where it cannot be read."""
    path = root / "proc/net/snmp6"
    try:
        return parse_proc_snmp6(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ParseError) as exc:
        problems.append(f"{path}: {exc}")
        return None
