"""`lspci -vvv` (with or without -nn, -D): each device's address, description, the bus range a bridge
forwards, its NUMA node, driver, and the ACS control bits. Other detail lines are the device's and
are passed over; a line that belongs to no device is refused. Run as a normal user, lspci shows no
capabilities: `acs` then stays None ("not shown"), never "off"."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.model.rdma import AcsControl, PciDevice

TOOL = "lspci -vvv"
HEADER = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7]) (\S.*)$")
BUS = re.compile(r"Bus: primary=([0-9a-f]{2}), secondary=([0-9a-f]{2}), subordinate=([0-9a-f]{2})")
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


def parse_lspci(text: str) -> tuple[PciDevice, ...]:
    devices: list[dict[str, object]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if header := HEADER.match(line):
            devices.append(_start(header))
        elif line[0] in " \t" and devices:
            _detail(devices[-1], line.strip(), number)
        else:
            raise ParseError(TOOL, number, f"not a device header or a detail of one: {line.strip()[:60]!r}")
    if not devices:
        raise ParseError(TOOL, 1, "no device")
    return tuple(PciDevice.model_validate(d) for d in devices)


def _start(header: re.Match[str]) -> dict[str, object]:
    domain = (header[1] or "0000").lower()
    return {"address": f"{domain}:{header[2].lower()}:{header[3].lower()}.{header[4]}", "description": header[5]}


def _detail(device: dict[str, object], line: str, number: int) -> None:
    if bus := BUS.match(line):
        device["secondary_bus"], device["subordinate_bus"] = int(bus[2], 16), int(bus[3], 16)
    elif line.startswith("NUMA node:"):
        value = line.split(":", 1)[1].strip()
        device["numa_node"] = int(value) if value.lstrip("-").isdigit() and int(value) >= 0 else None
    elif line.startswith("ACSCtl:"):
        device["acs"] = _acs(line.split(":", 1)[1], number)
    elif line.startswith("Kernel driver in use:"):
        device["driver"] = line.split(":", 1)[1].strip()


def _acs(flags: str, number: int) -> AcsControl:
    """'SrcValid+ TransBlk- ReqRedir+ ...': every one of the seven bits, each + or -."""
    found = dict(re.findall(r"([A-Za-z]+)([+-])", flags))
    if set(found) != set(ACS_BITS):
        raise ParseError(TOOL, number, f"ACSCtl without its seven bits: {flags.strip()[:80]!r}")
    values = [found[bit] == "+" for bit in ACS_BITS]
    return AcsControl(**dict(zip(AcsControl.model_fields, values, strict=True)))


def upstream_bridges(devices: tuple[PciDevice, ...], address: str) -> list[PciDevice]:
    """The bridges above a device, nearest first: each forwards the bus the one below sits on. The
    domain must match (every domain has its own bus 00)."""
    by_address = {d.address: d for d in devices}
    if address not in by_address:
        return []
    chain: list[PciDevice] = []
    current = by_address[address]
    while parent := _parent(devices, current, chain):
        chain.append(parent)
        current = parent
    return chain


def _parent(devices: tuple[PciDevice, ...], child: PciDevice, seen: list[PciDevice]) -> PciDevice | None:
    domain, bus = child.address[:-8], int(child.address[-7:-5], 16)
    below = [d for d in devices if d.is_bridge and d.address[:-8] == domain and d not in seen and d is not child
             and d.secondary_bus == bus]
    return below[0] if below else None
