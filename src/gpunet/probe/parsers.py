"""Pure parsers: text of a tool's output in, a model out, or ParseError(tool, line)."""

from __future__ import annotations

import re
from typing import Any

from gpunet.errors import ParseError
from gpunet.files.inputs import load_json
from gpunet.model.state import (
    BondSlave,
    BondState,
    EthtoolLink,
    IbCa,
    IbPort,
    NetDevCounters,
    NicInfo,
    Route,
    SnmpCounters,
    VerbsDevice,
    VerbsPort,
)

# a counter's name as drivers print them (rx_prio3_pause, tx_queue_0_packets, "Tx Queue#"), never a
# quoting mark or a prompt: a pasted "> rx_bytes: 1" is not ethtool's output
STAT_LINE = re.compile(r"^\s*([A-Za-z0-9_][A-Za-z0-9_ .#\[\]/()-]*?):\s+(-?[0-9]{1,20})\s*$")
STATS_HEADER = re.compile(r"^\s*NIC statistics:\s*$", re.M)  # ethtool prints it before the counters
SETTINGS_HEADER = re.compile(r"^Settings for \S+:\s*$", re.M)  # and this before a link's settings
UNSIGNED = re.compile(r"[0-9]{1,20}")  # ASCII digits only ("²".isdigit() is true), a 64-bit count at most


def parse_ethtool_stats(text: str) -> dict[str, int]:
    """`ethtool -S DEV`: counter name -> value, after ethtool's "NIC statistics:" line (lines that
    are not counters, driver warnings, skipped). Without the header (a grep of the counters, a paste
    that dropped it) every line must be a counter. No counter at all is an error."""
    header = STATS_HEADER.search(text)
    body = text[header.end():] if header else text
    if header is None:
        stray = next((n for n, line in enumerate(text.splitlines(), 1) if line.strip() and not STAT_LINE.match(line)),
                     None)
        if stray is not None:
            raise ParseError("ethtool -S", stray, "no 'NIC statistics:' line, and this line is no counter")
    stats: dict[str, int] = {}
    for line in body.splitlines():
        match = STAT_LINE.match(line)
        if match:
            stats[match[1].strip()] = int(match[2])
    if not stats:
        raise ParseError("ethtool -S", 1, "no 'name: value' counter lines")
    return stats


def parse_ethtool_link(text: str) -> EthtoolLink:
    """`ethtool DEV`: speed, duplex, link detected (the settings block, after "Settings for DEV:")."""
    header = SETTINGS_HEADER.search(text)
    if header is None:
        raise ParseError("ethtool", 1, "no 'Settings for DEV:' line")
    fields: dict[str, str] = {}
    for line in text[header.end():].splitlines():
        key, sep, value = line.strip().partition(":")
        if sep and key and not key.startswith("Supported") and not key.startswith("Advertised"):
            fields[key.strip()] = value.strip()
    if "Link detected" not in fields and "Speed" not in fields:
        raise ParseError("ethtool", 1, "neither 'Speed:' nor 'Link detected:' found")
    return EthtoolLink(
        speed_mbps=_speed_mbps(fields.get("Speed")), duplex=_known(fields.get("Duplex")),
        link_detected=_yes(fields.get("Link detected")), port=fields.get("Port"),
        auto_negotiation=_yes(fields.get("Auto-negotiation")),
    )


def _speed_mbps(value: str | None) -> int | None:
    """'25000Mb/s' (ethtool) or '25000 Mbps' (bonding); anything else (Unknown!) is None."""
    match = re.match(r"^([0-9]{1,9})\s*(Mb/s|Mbps)$", value or "")
    return int(match[1]) if match else None


def _known(value: str | None) -> str | None:
    return None if value is None or value.lower().startswith("unknown") else value


def _yes(value: str | None) -> bool | None:
    return None if value is None else value.lower() in ("yes", "on")


def parse_proc_bonding(text: str, name: str = "") -> BondState:
    """/proc/net/bonding/<bond>: the bond's header, then one block per 'Slave Interface:'."""
    blocks = re.split(r"\n(?=Slave Interface:)", text)
    head = _colon_fields(blocks[0])
    if "Bonding Mode" not in head:
        raise ParseError("/proc/net/bonding", 1, "no 'Bonding Mode:' line")
    slaves = tuple(_bond_slave(block) for block in blocks[1:])
    return BondState(
        name=name, mode=head["Bonding Mode"], mii_up=head.get("MII Status") == "up",
        mii_interval_ms=_int(head.get("MII Polling Interval (ms)")), active_slave=_none_if(
            head.get("Currently Active Slave"), "None"),
        hash_policy=head.get("Transmit Hash Policy"), lacp_rate=head.get("LACP rate"), slaves=slaves,
    )


def _bond_slave(block: str) -> BondSlave:
    fields = _colon_fields(block)
    return BondSlave(
        name=fields["Slave Interface"], mii_up=fields.get("MII Status") == "up",
        speed_mbps=_speed_mbps(fields.get("Speed")), duplex=_known(fields.get("Duplex")),
        link_failures=_int(fields.get("Link Failure Count")) or 0,
        aggregator_id=_int(fields.get("Aggregator ID")),
    )


def _colon_fields(block: str) -> dict[str, str]:
    """First occurrence of each 'Key: value' line (nested LACP sections repeat keys)."""
    fields: dict[str, str] = {}
    for line in block.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields.setdefault(key.strip(), value.strip())
    return fields


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and re.fullmatch(r"-?[0-9]{1,20}", value.strip()) else None


def _none_if(value: str | None, none: str) -> str | None:
    return None if value in (None, none) else value


def parse_ibstat(text: str) -> tuple[IbCa, ...]:
    """`ibstat`: CA blocks ("CA 'mlx5_0'") with ports ("Port 1:") and their state and rate."""
    cas: list[IbCa] = []
    for number, chunk in _ca_chunks(text):
        cas.append(_ib_ca(number, chunk))
    if not cas:
        raise ParseError("ibstat", 1, "no \"CA '<name>'\" line")
    return tuple(cas)


def _ca_chunks(text: str) -> list[tuple[int, str]]:
    starts = [(m.start(), text.count("\n", 0, m.start()) + 1) for m in re.finditer(r"^CA '", text, re.M)]
    if not starts:
        return []
    ends = [s for s, _ in starts[1:]] + [len(text)]
    return [(line, text[start:end]) for (start, line), end in zip(starts, ends, strict=True)]


def _ib_ca(line: int, chunk: str) -> IbCa:
    name_match = re.match(r"CA '([^']+)'", chunk)
    if name_match is None:
        raise ParseError("ibstat", line, "malformed CA line")
    head, *ports = re.split(r"\n\s*(?=Port [0-9]+:)", chunk)
    fields = _colon_fields(head)
    return IbCa(name=name_match[1], ca_type=fields.get("CA type"), firmware=fields.get("Firmware version"),
                ports=tuple(_ib_port(name_match[1], line, p) for p in ports))


def _ib_port(ca: str, line: int, chunk: str) -> IbPort:
    number = re.match(r"Port ([0-9]{1,3}):", chunk.strip())
    fields = _colon_fields(chunk)
    if number is None or "State" not in fields:
        raise ParseError("ibstat", line, f"port block of {ca} without 'State:'")
    rate = fields.get("Rate")
    return IbPort(ca=ca, port=int(number[1]), state=fields["State"],
                  physical_state=fields.get("Physical state", ""),
                  rate_gbps=float(rate) if rate and re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,6})?", rate) else None,
                  link_layer=fields.get("Link layer"))


def parse_proc_snmp(text: str, tool: str = "/proc/net/snmp") -> SnmpCounters:
    """/proc/net/snmp and /proc/net/netstat: pairs of 'Group: names...' / 'Group: values...'."""
    groups: dict[str, dict[str, int]] = {}
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) % 2:
        raise ParseError(tool, len(lines), "a header line without its value line")
    for index in range(0, len(lines), 2):
        groups.update(_snmp_pair(lines[index], lines[index + 1], index + 1, tool))
    if not groups:
        raise ParseError(tool, 1, "no counters")
    return SnmpCounters(groups=groups)


def _snmp_pair(header: str, values: str, line: int, tool: str) -> dict[str, dict[str, int]]:
    group, _, names = header.partition(":")
    group_values, _, numbers = values.partition(":")
    if group != group_values or not names or not SNMP_GROUP.fullmatch(group):
        raise ParseError(tool, line + 1, f"value line {group_values[:40]!r} does not follow header {group[:40]!r}")
    keys, counts = names.split(), numbers.split()
    if len(keys) != len(counts) or not all(SIGNED.fullmatch(c) for c in counts):
        raise ParseError(tool, line + 1, f"{group}: {len(keys)} names, {len(counts)} values")
    return {group: dict(zip(keys, map(int, counts), strict=True))}


SNMP_GROUP = re.compile(r"[A-Z][A-Za-z0-9]{1,63}")  # Ip, Icmp, TcpExt, MPTcpExt
SIGNED = re.compile(r"-?[0-9]{1,20}")


NET_DEV_HEADER = re.compile(r"^Inter-\|\s+Receive\s.*\|\s*Transmit")
PROC_NET_DEV_FIELDS = (  # the 16 columns after "name:", as /sys/class/net/<dev>/statistics names them
    "rx_bytes", "rx_packets", "rx_errors", "rx_dropped", "rx_fifo_errors", "rx_frame_errors", "rx_compressed",
    "multicast", "tx_bytes", "tx_packets", "tx_errors", "tx_dropped", "tx_fifo_errors", "collisions",
    "tx_carrier_errors", "tx_compressed",
)


def parse_proc_net_dev(text: str) -> NetDevCounters:
    """/proc/net/dev: every interface's counters in one read (the receive 'drop' column is
    rx_dropped plus rx_missed_errors, as the kernel prints it). A line that is not 'name: 16
    counters' costs that line only: it is listed in `skipped`, and the others are read (an
    exporter must not lose every interface's counters over one). A text without the two header
    lines is not /proc/net/dev at all: ParseError."""
    lines = text.splitlines()
    if len(lines) < 2 or not NET_DEV_HEADER.match(lines[0]) or "bytes" not in lines[1]:
        raise ParseError("/proc/net/dev", 1, "no 'Inter-|   Receive ... |  Transmit' header")
    interfaces: dict[str, dict[str, int]] = {}
    skipped: list[str] = []
    for number, line in enumerate(lines[2:], start=3):
        name, sep, numbers = line.partition(":")
        values = numbers.split()
        digits = "".join(values)  # every field digits only: one check, not 16 (this runs on every scrape)
        if sep and name.strip() and len(values) == len(PROC_NET_DEV_FIELDS) and digits.isdigit() and digits.isascii() \
                and len(digits) <= 20 * len(values) and max(map(len, values)) <= 20:
            interfaces[name.strip()] = dict(zip(PROC_NET_DEV_FIELDS, map(int, values), strict=True))
        elif line.strip():
            skipped.append(f"line {number}: expected 'name: {len(PROC_NET_DEV_FIELDS)} counters', got {line[:80]!r}")
    return NetDevCounters(interfaces=interfaces, skipped=tuple(skipped))


def parse_proc_snmp6(text: str) -> SnmpCounters:
    """/proc/net/snmp6: one 'Ip6InReceives   7' per line. The group is the name up to its first
    '6' (Ip6, Icmp6, Udp6, UdpLite6), as node_exporter's netstat collector splits it; lines without
    a '6' or without an integer value are skipped, and a text with no counter is an error."""
    groups: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        fields = line.split()
        six = fields[0].find("6") if len(fields) == 2 else -1
        if 0 < six < len(fields[0]) - 1 and SNMP_GROUP.fullmatch(fields[0]) and UNSIGNED.fullmatch(fields[1]):
            groups.setdefault(fields[0][:six + 1], {})[fields[0][six + 1:]] = int(fields[1])
    if not groups:
        raise ParseError("/proc/net/snmp6", 1, "no 'Ip6InReceives <count>' lines")
    return SnmpCounters(groups=groups)


def parse_nft_json(text: str) -> list[dict[str, Any]]:
    """`nft -j list ruleset`: the list of objects (tables, chains, rules) under "nftables"."""
    data = load_json(text, "nft -j")
    if not isinstance(data, dict) or not isinstance(data.get("nftables"), list):
        raise ParseError("nft -j", 1, "no top-level 'nftables' list")
    return [item for item in data["nftables"] if isinstance(item, dict) and "metainfo" not in item]


def parse_ip_addr_json(text: str) -> dict[str, tuple[str, ...]]:
    """`ip -j addr show`: interface -> its IPv4/IPv6 CIDRs (link-local IPv6 left out)."""
    items = _json_list(text, "ip -j addr")
    result: dict[str, tuple[str, ...]] = {}
    for link in items:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            raise ParseError("ip -j addr", 1, "an entry without 'ifname'")
        infos = link.get("addr_info")
        if not isinstance(infos, list):  # every link of `ip -j addr` has its list, empty or not
            raise ParseError("ip -j addr", 1, f"{link['ifname'][:40]!r} has no 'addr_info' list: not ip -j addr")
        result[link["ifname"]] = tuple(
            f"{a['local']}/{a['prefixlen']}" for a in infos
            if isinstance(a, dict) and isinstance(a.get("local"), str) and isinstance(a.get("prefixlen"), int)
            and a.get("scope") != "link")
    return result


def parse_ip_route_json(text: str) -> tuple[Route, ...]:
    """`ip -j route show table all` (IPv4): dst, device, gateway, table."""
    routes = []
    for r in _json_list(text, "ip -j route"):
        if not isinstance(r, dict) or not isinstance(r.get("dst"), str):
            raise ParseError("ip -j route", 1, "an entry without 'dst'")
        dev, gateway = r.get("dev"), r.get("gateway")
        routes.append(Route(dst=r["dst"], dev=dev if isinstance(dev, str) else None,
                            gateway=gateway if isinstance(gateway, str) else None, table=str(r.get("table", "main"))))
    return tuple(routes)


def _json_list(text: str, tool: str) -> list[Any]:
    data = load_json(text or "[]", tool)
    if not isinstance(data, list):
        raise ParseError(tool, 1, "expected a JSON list")
    return data


def parse_sshd_t(text: str) -> dict[str, str]:
    """`sshd -T`: one 'keyword value' per line (keywords lower-case); repeated keys keep the first."""
    settings: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and not key.startswith("#"):
            settings.setdefault(key.lower(), value.strip())
    if "passwordauthentication" not in settings:
        raise ParseError("sshd -T", 1, "no passwordauthentication line: not sshd -T output")
    return settings


def parse_env_file(text: str) -> dict[str, str]:
    """`export NAME=value` / `NAME=value` lines of a shell env file (comments skipped)."""
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip().removeprefix("export ").strip()
        name, sep, value = line.partition("=")
        if sep and name.isidentifier() and not line.startswith("#"):
            values[name] = value.strip().strip('"').strip("'")
    return values


def parse_ethtool_driver(text: str) -> NicInfo:
    """`ethtool -i DEV`: driver, version, firmware-version, bus-info."""
    fields = _colon_fields(text)
    if not fields.get("driver"):
        raise ParseError("ethtool -i", 1, "no 'driver:' line")
    return NicInfo(driver=fields["driver"], version=fields.get("version") or None,
                   firmware=fields.get("firmware-version") or None, bus_info=fields.get("bus-info") or None)


IBV_KEY = re.compile(r"^\s*([a-z_]+):\s*(.*?)\s*$")
# ibv_devinfo's own empty forms: no device, or no RDMA in the kernel at all
NO_VERBS_DEVICE = ("No IB devices found", "Failed to get IB devices list")


def parse_ibv_devinfo(text: str) -> tuple[VerbsDevice, ...]:
    """`ibv_devinfo` (plain or -v): each hca_id block with its ports. Lines that are not `key: value`
    (libibverbs warnings, "Failed to open device", -v's capability lists) are skipped; "No IB
    devices found" is an empty result."""
    devices: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        found = IBV_KEY.match(line)
        if found and (found[1] == "hca_id" or devices):
            _ibv_line(devices, found[1], found[2], number)
    if not devices and not any(empty in text for empty in NO_VERBS_DEVICE):
        raise ParseError("ibv_devinfo", 1, "no hca_id line, and not ibv_devinfo's \"No IB devices found\"")
    return tuple(VerbsDevice(hca=d["hca"], transport=d.get("transport"), fw_ver=d.get("fw_ver"),
                             ports=tuple(VerbsPort(**p) for p in d["ports"])) for d in devices)


def _ibv_line(devices: list[dict[str, Any]], key: str, value: str, number: int) -> None:
    """One `key: value` line into the device (or port) it belongs to."""
    if key == "hca_id":
        devices.append({"hca": value, "ports": []})
        return
    device = devices[-1]
    if key == "port":
        if not UNSIGNED.fullmatch(value) or len(value) > 3:
            raise ParseError("ibv_devinfo", number, f"port {value[:20]!r} is not a number")
        device["ports"].append({"port": int(value), "state": ""})
    elif device["ports"] and key in ("state", "link_layer", "active_mtu", "active_speed"):
        device["ports"][-1][key] = _ibv_value(key, value)
    elif not device["ports"] and key in ("transport", "fw_ver"):
        device[key] = value.split(" (", maxsplit=1)[0]


def _ibv_value(key: str, value: str) -> Any:
    """'PORT_ACTIVE (4)' -> 'PORT_ACTIVE'; '4096 (5)' -> 4096; '50.0 Gbps (64)' -> '50.0 Gbps'."""
    text = value.split(" (", maxsplit=1)[0].strip()
    if key == "active_mtu":
        return int(text) if UNSIGNED.fullmatch(text) else None
    return text
