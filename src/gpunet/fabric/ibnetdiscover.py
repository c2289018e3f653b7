"""`ibnetdiscover` (infiniband-diags) topology text into nodes and links: a pure parser.

A record is a header (`Switch 64 "S-<guid>" # "desc" ...`, `Ca 1 "H-<guid>" # "desc"`) and one
line per connected port; a link appears once from each end that was discovered. Ports that are
down are not listed. Width and speed are the last `NxSPEED` of a port line (4xNDR, 2xHDR)."""

from __future__ import annotations

import re
from typing import Literal

from gpunet.errors import ParseError
from gpunet.files.inputs import integer
from gpunet.model.base import Frozen

TOOL = "ibnetdiscover"
KINDS: dict[str, Literal["switch", "ca", "router"]] = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
# Whitespace may be lost (a terminal log turns "Switch\t41" into "Switch41"): \s* where tabs were.
HEADER = re.compile(r'^(Switch|Ca|Rt)\s*(\d+)\s*"([^"]+)"\s*(?:#\s*"(.*)"([^"]*))?$')
PORT = re.compile(r'^\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*"([^"]+)"\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*(?:#(.*))?$')
RATE = re.compile(r"\b(\d{1,2})x([A-Z][A-Z0-9]*)\b")
LID = re.compile(r"\blid (\d+)")
NOISE = re.compile(r"^(#|ibwarn|ibdebug|ibpanic|\w+=|$)")  # comments, warnings, vendid=0x.. lines


class IbNode(Frozen):
    kind: Literal["switch", "ca", "router"]
    node_id: str  # "S-0002c90200412345": the GUID ibnetdiscover names the node by
    description: str  # NodeDescription: "gpu001 mlx5_3", a switch's configured name
    ports: int
    lid: int | None = None


class IbLink(Frozen):
    """One cable, as seen from `node` (the first end listed)."""

    node: str
    port: int
    remote: str
    remote_port: int
    width: int | None = None  # lanes: 4 for 4xNDR
    speed: str | None = None  # NDR, HDR, EDR, FDR10, ...


class IbTopology(Frozen):
    nodes: tuple[IbNode, ...]
    links: tuple[IbLink, ...]  # one per cable


def parse_ibnetdiscover(text: str) -> IbTopology:
    """Lines around the records (a terminal log's banner and prompt) are skipped; inside a record
    (from its header to the next blank line) every line must be understood."""
    nodes: list[IbNode] = []
    links: dict[tuple[tuple[str, int], tuple[str, int]], IbLink] = {}
    current: IbNode | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if header := HEADER.match(line):
            current = _node(header, number)
            nodes.append(current)
        elif port := PORT.match(line):
            if current is None:
                raise ParseError(TOOL, number, "a port line outside a Switch or Ca record")
            _add_link(links, _link(current, port, number))
        elif not line:
            current = None
        elif current is not None and not NOISE.match(line):
            raise ParseError(TOOL, number, f"not an ibnetdiscover line: {line[:80]!r}")
    if not nodes:
        raise ParseError(TOOL, 1, "no Switch or Ca record")
    return IbTopology(nodes=tuple(nodes), links=tuple(links.values()))


def _node(match: re.Match[str], number: int) -> IbNode:
    kind, ports, node_id, description, rest = match.groups()
    count = integer(ports, TOOL, number)
    if not 1 <= count <= 255:
        raise ParseError(TOOL, number, f"{ports[:20]} ports: a node has 1 to 255")
    lid = LID.search(rest or "")
    return IbNode(kind=KINDS[kind], node_id=node_id, description=description if description is not None else node_id,
                  ports=count, lid=integer(lid[1], TOOL, number) if lid else None)


def _link(node: IbNode, match: re.Match[str], number: int) -> IbLink:
    port, remote, remote_port = integer(match[1], TOOL, number), match[2], integer(match[3], TOOL, number)
    comment = match[4] or ""
    if not (port <= node.ports and 1 <= remote_port <= 255) or (port == 0 and node.kind != "switch"):
        raise ParseError(TOOL, number, f"port {port} to {remote}[{remote_port}] is outside the node's ports")
    rates = RATE.findall(comment)
    width, speed = (int(rates[-1][0]), rates[-1][1]) if rates else (None, None)
    return IbLink(node=node.node_id, port=port, remote=remote, remote_port=remote_port, width=width, speed=speed)


def _add_link(links: dict[tuple[tuple[str, int], tuple[str, int]], IbLink], link: IbLink) -> None:
    """Keyed by both ends in order, so the second listing of a cable adds nothing."""
    ends = (link.node, link.port), (link.remote, link.remote_port)
    key = (min(ends), max(ends))
    if key not in links or links[key].width is None:
        links[key] = link
