"""A switch's ports as its OS reports them: `ip -j link show` (a Linux switch: Cumulus, SONiC's
host side, the lab) and SONiC's `show interfaces status` table. Pure parsers into PortState;
what they do not recognise raises ParseError."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.files.inputs import integer, load_json
from gpunet.model.base import Frozen

IP_LINK, SONIC_STATUS = "ip -j link", "show interfaces status"
SPEED = re.compile(r"^(\d+)G$")


class PortState(Frozen):
    name: str
    mtu: int
    admin_up: bool
    oper_up: bool
    alias: str | None = None  # SONiC: etp1, fortyGigE0/0 ...
    speed_gbps: int | None = None


def parse_ip_link_json(text: str) -> tuple[PortState, ...]:
    data = load_json(text or "[]", IP_LINK)
    if not isinstance(data, list):
        raise ParseError(IP_LINK, 1, "expected a JSON list")
    return tuple(_link(item) for item in data)


def _link(item: object) -> PortState:
    if not isinstance(item, dict) or not isinstance(item.get("ifname"), str):
        raise ParseError(IP_LINK, 1, "an entry without 'ifname'")
    mtu, flags = item.get("mtu"), item.get("flags", [])
    if isinstance(mtu, bool) or not isinstance(mtu, int) or not isinstance(flags, list):
        raise ParseError(IP_LINK, 1, f"{item['ifname'][:20]!r}: no numeric mtu or flags list")
    return PortState(name=item["ifname"], mtu=mtu, admin_up="UP" in flags,
                     oper_up=item.get("operstate") == "UP" or ("LOWER_UP" in flags and "UP" in flags))


def parse_sonic_interfaces_status(text: str) -> tuple[PortState, ...]:
    """The table under its header (Interface, Lanes, Speed, MTU, [FEC], Alias, [Vlan], Oper, Admin,
    Type, Asym PFC: columns came and went across releases, so they are found by name)."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.split()[:1] == ["Interface"]), None)
    if header is None or header + 1 >= len(lines) or not set(lines[header + 1].strip()) <= {"-", " "}:
        raise ParseError(SONIC_STATUS, 1, "no 'Interface ... MTU ... Oper Admin' header over a dashed rule")
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", lines[header + 1])]
    names = [lines[header][a:b].strip() for a, b in _widened(spans)]
    if not {"Interface", "MTU", "Oper", "Admin"} <= set(names):
        raise ParseError(SONIC_STATUS, header + 1, f"columns {names} lack Interface, MTU, Oper or Admin")
    return tuple(_row(dict(zip(names, (line[a:b].strip() for a, b in _widened(spans)), strict=True)), number)
                 for number, line in enumerate(lines[header + 2:], start=header + 3) if line.strip())


def _widened(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Columns are right-aligned under their rule: a cell runs from the end of the previous rule."""
    return [(spans[i - 1][1] if i else 0, end) for i, (_, end) in enumerate(spans)]


def _row(cells: dict[str, str], number: int) -> PortState:
    known = cells["Oper"] in ("up", "down") and cells["Admin"] in ("up", "down")
    if not (known and cells["MTU"].isascii() and cells["MTU"].isdigit()):
        raise ParseError(SONIC_STATUS, number, f"row {cells['Interface'][:20]!r}: MTU, Oper or Admin not understood")
    speed = SPEED.match(cells.get("Speed", ""))
    return PortState(name=cells["Interface"], mtu=integer(cells["MTU"], SONIC_STATUS, number),
                     admin_up=cells["Admin"] == "up", oper_up=cells["Oper"] == "up", alias=cells.get("Alias") or None,
                     speed_gbps=integer(speed[1], SONIC_STATUS, number) if speed else None)
