"""`ibnetdiscover` (infiniband-diags) topology text into nodes and links: a pure parser.

A record is a header (`Switch 64 "S-<guid>" # "desc" ...`, `Ca 1 "H-<guid>" # "desc"`) and one
line per connected port; a link appears once from each end that was discovered. Ports that are
down are not listed. Width and speed are the last `NxSPEED` of a port line (4xNDR, 2xHDR)."""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

from gpunet.errors import ParseError
from gpunet.files.inputs import integer
from gpunet.model.base import Frozen, bulk_objects, trusted

TOOL = "ibnetdiscover"
KINDS: dict[str, Literal["switch", "ca", "router"]] = {"Switch": "switch", "Ca": "ca", "Rt": "router"}
# Whitespace may be lost (a terminal log turns "Switch\t41" into "Switch41"): \s* where tabs were.
HEADER = re.compile(r'^(Switch|Ca|Rt)\s*(\d+)\s*"([^"]+)"\s*(?:#\s*"(.*)"([^"]*))?$')
# A rate is a whole word: 4xNDR, 2xHDR, 1xFDR10. The port line's is the last in its comment: the greedy
# .* before it backtracks from the line's end to the last one, in the same match as the rest.
RATE = r"\b(\d{1,2})x([A-Z][A-Z0-9]*)\b"
PORT = re.compile(r'^\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*"([^"]+)"\[(\d+)\](?:\([0-9a-fA-F]+\))?\s*'
                  rf"(?:#(?:.*{RATE})?.*)?$")
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


Row = tuple[str, int, str, int, int | None, str | None]  # an IbLink's fields, in order
NodeRow = tuple[Literal["switch", "ca", "router"], str, str, int, int | None]  # an IbNode's fields, in order
Ends = tuple[str, int, str, int]  # a cable's two ends, the lower first
NODE_FIELDS, LINK_FIELDS = set(IbNode.model_fields), set(IbLink.model_fields)


class Rows(NamedTuple):
    """What the parser read, as plain tuples: a large saved file is parsed in a process of its own
    while the plan is read, which sends these back (fabric/collect.ib_file_reader); topology_of
    makes the models."""

    nodes: list[NodeRow]
    links: list[Row]  # one per cable


def parse_ibnetdiscover(text: str) -> IbTopology:
    """Lines around the records (a terminal log's banner and prompt) are skipped; inside a record
    (from its header to the next blank line) every line must be understood."""
    return topology_of(parse_rows(text))


def parse_rows(text: str) -> Rows:
    """The parse of parse_ibnetdiscover, before its models are made."""
    with bulk_objects():  # a 1M-GPU fabric is 10^6 nodes and 10^6 links: no collector passes over them
        nodes, rows = _records(text)
        return Rows(nodes, list(rows.values()))


def topology_of(rows: Rows) -> IbTopology:
    """The models of a parse. Every value of a row was checked and typed by the parser (the
    regexes, _number, the port bounds): pydantic's validation would re-check only the types the
    parser gave them."""
    with bulk_objects():
        return IbTopology(nodes=tuple(_node_model(row) for row in rows.nodes),
                          links=tuple(_link(row) for row in rows.links))


def _records(text: str) -> tuple[list[NodeRow], dict[Ends, Row]]:
    nodes: list[NodeRow] = []
    rows: dict[Ends, Row] = {}
    current: NodeRow | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if port := PORT.match(line):  # most lines: a header never starts with "["
            if current is None:
                raise ParseError(TOOL, number, "a port line outside a Switch or Ca record")
            _add_row(rows, current, port, number)
        elif header := HEADER.match(line):
            current = _node(header, number)
            nodes.append(current)
        elif not line:
            current = None
        elif current is not None and not NOISE.match(line):
            raise ParseError(TOOL, number, f"not an ibnetdiscover line: {line[:80]!r}")
    if not nodes:
        raise ParseError(TOOL, 1, "no Switch or Ca record")
    return nodes, rows


def _number(digits: str, number: int) -> int:
    """integer(), without its regex for what it would always accept: a few ASCII digits (the
    regexes' \\d also takes other scripts' digits, which integer() refuses)."""
    if len(digits) <= 3 and digits.isascii():
        return int(digits)
    return integer(digits, TOOL, number)


def _node(match: re.Match[str], number: int) -> NodeRow:
    kind, ports, node_id, description, rest = match.groups()
    count = _number(ports, number)
    if not 1 <= count <= 255:
        raise ParseError(TOOL, number, f"{ports[:20]} ports: a node has 1 to 255")
    lid = LID.search(rest or "")
    return (KINDS[kind], node_id, description if description is not None else node_id, count,
            integer(lid[1], TOOL, number) if lid else None)


def _node_model(row: NodeRow) -> IbNode:
    kind, node_id, description, ports, lid = row
    return trusted(IbNode, NODE_FIELDS, {"kind": kind, "node_id": node_id, "description": description,
                                         "ports": ports, "lid": lid})


def _link(row: Row) -> IbLink:
    node, port, remote, remote_port, width, speed = row
    return trusted(IbLink, LINK_FIELDS, {"node": node, "port": port, "remote": remote, "remote_port": remote_port,
                                         "width": width, "speed": speed})


def _add_row(rows: dict[Ends, Row], node: NodeRow, match: re.Match[str], number: int) -> None:
    """The port line's cable, keyed by both ends in order, so the second listing of a cable adds
    nothing (unless the first showed no width). The key one flat tuple, the lower end first: a
    tuple of two ends took three tuples to make and hash, at each of a 1M-GPU fabric's 3.3 million
    port lines. Port numbers read as _number reads them, its common case inline."""
    port, remote, remote_port, width, speed = match.groups()
    port_number = int(port) if len(port) <= 3 and port.isascii() else integer(port, TOOL, number)
    remote_number = (int(remote_port) if len(remote_port) <= 3 and remote_port.isascii()
                     else integer(remote_port, TOOL, number))
    kind, node_id, _, ports, _ = node
    if not (port_number <= ports and 1 <= remote_number <= 255) or (port_number == 0 and kind != "switch"):
        raise ParseError(TOOL, number, f"port {port_number} to {remote}[{remote_number}] is outside the node's ports")
    if node_id < remote or (node_id == remote and port_number <= remote_number):  # (node_id, port) <= (remote, port)
        key = (node_id, port_number, remote, remote_number)
    else:
        key = (remote, remote_number, node_id, port_number)
    kept = rows.get(key)
    if kept is None or kept[4] is None:
        rows[key] = (node_id, port_number, remote, remote_number, int(width) if width is not None else None, speed)
