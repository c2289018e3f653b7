"""FRR's JSON outputs a switch check reads: `show bgp summary json` (sessions) and `show ip route
json` (next hops per prefix). Pure parsers; what they do not recognise raises ParseError.

`show bgp summary json` nests the IPv4 unicast table under "ipv4Unicast" (`show bgp ipv4 unicast
summary json` prints the table itself); peers are keyed by address (numbered) or by interface
(unnumbered, "idType": "interface"). Over FRR 5 to 10 fields came and went (pfxRcd replaced
prefixReceivedCount, desc and localAs arrived): only remoteAs and state are required."""

from __future__ import annotations

from typing import Any

from gpunet.errors import ParseError
from gpunet.files.inputs import load_json
from gpunet.model.base import Frozen

SUMMARY_TOOL, ROUTE_TOOL = "show bgp summary json", "show ip route json"


class BgpPeer(Frozen):
    key: str  # the neighbour as configured: an address, or an interface (unnumbered)
    remote_as: int
    state: str  # Established, Active, Connect, Idle, Idle (Admin), ...
    id_type: str = "ipv4"  # ipv4 | ipv6 | interface
    hostname: str | None = None  # the peer's hostname capability, when it sends one
    description: str | None = None
    prefixes_received: int | None = None

    @property
    def established(self) -> bool:
        return self.state == "Established"


class BgpSummary(Frozen):
    router_id: str | None
    local_as: int
    peers: tuple[BgpPeer, ...]


class Nexthop(Frozen):
    ip: str | None
    interface: str | None
    active: bool
    fib: bool


class Route(Frozen):
    prefix: str
    protocol: str
    selected: bool
    installed: bool
    nexthops: tuple[Nexthop, ...]

    @property
    def width(self) -> int:
        """Next hops in the forwarding table (the ECMP width the kernel or ASIC uses)."""
        return sum(1 for n in self.nexthops if n.fib)


def parse_bgp_summary_json(text: str) -> BgpSummary:
    document = load_json(text, SUMMARY_TOOL)
    table = document.get("ipv4Unicast", document) if isinstance(document, dict) else None
    if not isinstance(table, dict) or "peers" not in table or "as" not in table:
        raise ParseError(SUMMARY_TOOL, 1, "no IPv4 unicast table (\"ipv4Unicast\" with \"as\" and \"peers\")")
    peers = table["peers"]
    if not isinstance(peers, dict):
        raise ParseError(SUMMARY_TOOL, 1, "\"peers\" is not an object")
    return BgpSummary(router_id=_text(table.get("routerId")), local_as=_int(table.get("as"), "as"),
                      peers=tuple(_peer(key, body) for key, body in peers.items()))


def _peer(key: str, body: Any) -> BgpPeer:
    if not isinstance(body, dict) or not isinstance(body.get("state"), str):
        raise ParseError(SUMMARY_TOOL, 1, f"peer {key[:40]!r}: no state")
    received = body.get("pfxRcd", body.get("prefixReceivedCount"))
    return BgpPeer(key=key, remote_as=_int(body.get("remoteAs"), f"peer {key[:40]!r} remoteAs"), state=body["state"],
                   id_type=_text(body.get("idType")) or "ipv4", hostname=_text(body.get("hostname")),
                   description=_text(body.get("desc")),
                   prefixes_received=received if isinstance(received, int) and not isinstance(received, bool) else None)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParseError(SUMMARY_TOOL, 1, f"{what} is not a number")
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_frr_route_json(text: str) -> tuple[Route, ...]:
    """Every route of `show ip route json`: {prefix: [route, ...]} (one entry per protocol)."""
    document = load_json(text, ROUTE_TOOL)
    if not isinstance(document, dict):
        raise ParseError(ROUTE_TOOL, 1, "not an object of prefixes")
    return tuple(_route(prefix, entry) for prefix, entries in document.items() for entry in _entries(prefix, entries))


def _entries(prefix: str, entries: Any) -> list[dict[str, Any]]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ParseError(ROUTE_TOOL, 1, f"{prefix[:40]!r}: not a list of routes")
    return entries


def _route(prefix: str, entry: dict[str, Any]) -> Route:
    hops = entry.get("nexthops", [])
    if not isinstance(entry.get("protocol"), str) or not isinstance(hops, list):
        raise ParseError(ROUTE_TOOL, 1, f"{prefix[:40]!r}: a route without protocol or nexthops")
    return Route(prefix=prefix, protocol=entry["protocol"], selected=entry.get("selected") is True,
                 installed=entry.get("installed") is True, nexthops=tuple(_nexthop(prefix, h) for h in hops))


def _nexthop(prefix: str, hop: Any) -> Nexthop:
    if not isinstance(hop, dict):
        raise ParseError(ROUTE_TOOL, 1, f"{prefix[:40]!r}: a next hop that is not an object")
    return Nexthop(ip=_text(hop.get("ip")), interface=_text(hop.get("interfaceName")), active=hop.get("active") is True,
                   fib=hop.get("fib") is True)
