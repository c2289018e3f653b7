"""`lldpcli -f json show neighbors` (lldpd) into neighbour records: a pure parser.

lldpd's JSON changes shape with what it holds: one interface is an object keyed by its name,
several are a list of one-key objects; a chassis without a system name is not keyed by one; the
`json0` format wraps every value in a list. All three (and the 0.9 layouts) read the same here."""

from __future__ import annotations

import re
from typing import Any

from gpunet.errors import ParseError
from gpunet.files.inputs import integer, load_json
from gpunet.model.base import Frozen

TOOL = "lldpcli"
MAU_SPEED = re.compile(r"^([0-9]{1,6})(G|Gig)?Base", re.IGNORECASE)  # 100GbaseCR4, 10GigBaseX, 1000BaseTFD


class LldpNeighbor(Frozen):
    """One neighbour heard on one local port."""

    local_port: str
    system_name: str | None = None
    chassis_id: str | None = None
    port_id: str | None = None
    port_id_type: str | None = None  # ifname | local | mac | ...
    port_descr: str | None = None
    mau: str | None = None  # the negotiated MAU type (802.3 MAC/PHY TLV), when sent
    speed_gbps: float | None = None  # read from the MAU type

    @property
    def port_names(self) -> tuple[str, ...]:
        """What may name the far port: its id unless a MAC, then its description."""
        named = [self.port_id] if self.port_id and self.port_id_type != "mac" else []
        return tuple(dict.fromkeys(n for n in [*named, self.port_descr] if n))


def parse_lldpcli_json(text: str) -> tuple[LldpNeighbor, ...]:
    """Every neighbour in the output; lines before the JSON (warnings) are skipped."""
    document = _document(text)
    lldp = document.get("lldp") if isinstance(document, dict) else None
    if isinstance(lldp, list):  # json0
        lldp = lldp[0] if lldp else {}
    if not isinstance(lldp, dict):
        raise ParseError(TOOL, 1, "no top-level \"lldp\" object")
    return tuple(_neighbor(name, body) for name, body in _named(lldp.get("interface", []), "interface"))


def _document(text: str) -> Any:
    start = next((i for i, line in enumerate(text.splitlines()) if line.lstrip().startswith("{")), None)
    if start is None:
        raise ParseError(TOOL, 1, "no JSON object in the output")
    body = "\n".join(text.splitlines()[start:])
    try:
        return load_json(body, TOOL)
    except ParseError as exc:
        raise ParseError(TOOL, start + exc.line, str(exc).split(": ", 2)[-1]) from None


def _named(value: Any, what: str) -> list[tuple[str | None, dict[str, Any]]]:
    """(name, body) pairs from any of lldpd's layouts: {name: body}, [{name: body}, ...],
    [{"name": name, ...}] (json0), or a body with no name at all."""
    items = value if isinstance(value, list) else [value]
    pairs: list[tuple[str | None, dict[str, Any]]] = []
    for item in items:
        if not isinstance(item, dict):
            raise ParseError(TOOL, 1, f"{what}: expected an object, found {type(item).__name__}")
        if _is_body(item):
            pairs.append((_text(item.get("name")), item))
        else:
            pairs += [(str(key), body) for key, body in item.items() if isinstance(body, dict)]
    return pairs


BODY_KEYS = {"id", "via", "chassis", "port", "descr", "rid", "age", "ttl"}


def _is_body(item: dict[str, Any]) -> bool:
    return bool(BODY_KEYS & item.keys())


def _text(value: Any) -> str | None:
    """A scalar, or lldpd's {"value": x} / [{"value": x}] wrappings of one."""
    while isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict):
        value = value.get("value")
    return None if value is None or isinstance(value, dict | list) else str(value)


def _neighbor(local_port: str | None, body: dict[str, Any]) -> LldpNeighbor:
    if not local_port:
        raise ParseError(TOOL, 1, "an interface without a name")
    chassis = _named(body.get("chassis", {}), "chassis")
    system, chassis_body = chassis[0] if chassis else (None, {})
    port = _first(body.get("port", {}))
    mau = _text(_first(port.get("auto-negotiation", {})).get("current"))
    return LldpNeighbor(
        local_port=local_port, system_name=system, chassis_id=_text(_first(chassis_body.get("id", {})).get("value")),
        port_id=_text(_first(port.get("id", {})).get("value")),
        port_id_type=_text(_first(port.get("id", {})).get("type")), port_descr=_text(port.get("descr")),
        mau=mau, speed_gbps=mau_gbps(mau),
    )


def _first(value: Any) -> dict[str, Any]:
    while isinstance(value, list) and value:
        value = value[0]
    return value if isinstance(value, dict) else {}


def mau_gbps(mau: str | None) -> float | None:
    """'100GbaseCR4 - ...' -> 100; '1000BaseTFD - ...' -> 1; None when it names no speed."""
    match = MAU_SPEED.match(mau or "")
    if not match:
        return None
    speed = integer(match[1], TOOL)
    return float(speed) if match[2] else speed / 1000
