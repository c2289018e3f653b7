"""`nvidia-smi topo -m`: the distance of every GPU to every NIC. Both layouts nvidia-smi has printed:
NIC columns (NIC0..) resolved through the "NIC Legend", and older drivers' RDMA device names as
column headers. Tabs or the spaces a copy turned them into; the remains of the header's underline
escape are dropped. A row whose cells do not line up with the header is refused (a damaged copy),
never guessed at."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.files.inputs import integer
from gpunet.model.rdma import TopoMatrix

TOOL = "nvidia-smi topo -m"
UNDERLINE = re.compile(r"\x1b?\[[0-9;]*m")
LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")
LEGEND_TEXT = re.compile(r"^\s*(X|SYS|NODE|PHB|PXB|PIX|NV#|NVL|NV\d+)\s*=")
CELL = re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|NV\d+|NVL\d*)$")
GPU = re.compile(r"^GPU\d+$")


def parse_nvidia_smi_topo(text: str) -> TopoMatrix:
    lines = [UNDERLINE.sub("", line).rstrip("\r") for line in text.splitlines()]
    start = _header_line(lines)
    columns = _columns(lines[start], start)
    rows, legend = _rows_and_legend(lines[start + 1:], columns, start + 1)
    nics = [c for c in columns if not GPU.match(c)]
    names = _nic_names(nics, legend, start)
    gpus = [c for c in columns if GPU.match(c)]
    missing = [g for g in gpus if g not in rows]
    if not gpus or missing:
        raise ParseError(TOOL, start + 1, f"no row for {', '.join(missing) or 'any GPU'}")
    links = {g: {names[n]: rows[g][0][columns.index(n)] for n in nics} for g in gpus}
    return TopoMatrix(gpus=tuple(gpus), nics=tuple(names[n] for n in nics), links=links,
                      numa={g: rows[g][1] for g in gpus})


def _header_line(lines: list[str]) -> int:
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        if line.split()[0] == "GPU0":
            return number
        raise ParseError(TOOL, number + 1, f"expected the GPU0 ... header, got {line.strip()[:60]!r}")
    raise ParseError(TOOL, 1, "no header row (GPU0 ...)")


def _columns(header: str, number: int) -> list[str]:
    words = header.split()
    end = words.index("CPU") if "CPU" in words else len(words)
    columns = words[:end]
    if len(set(columns)) != len(columns) or not all(re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", c) for c in columns):
        raise ParseError(TOOL, number + 1, "the header's device columns are not unique names")
    return columns


def _rows_and_legend(lines: list[str], columns: list[str], offset: int
                     ) -> tuple[dict[str, tuple[list[str], int | None]], dict[str, str]]:
    rows: dict[str, tuple[list[str], int | None]] = {}
    legend: dict[str, str] = {}
    for number, line in enumerate(lines, offset + 1):
        stripped = line.strip()
        if not stripped or stripped in ("Legend:", "NIC Legend:") or LEGEND_TEXT.match(line):
            continue
        if entry := LEGEND_ENTRY.match(line):
            legend[entry[1]] = entry[2]
        elif line.split()[0] in columns:
            rows[line.split()[0]] = _row(line, len(columns), number)
        else:
            raise ParseError(TOOL, number, f"not a matrix row or legend line: {stripped[:60]!r}")
    return rows, legend


def _row(line: str, width: int, number: int) -> tuple[list[str], int | None]:
    """The row's cells, and its NUMA affinity (None where empty or absent: NIC rows have none)."""
    fields = [f.strip() for f in line.split("\t")] if "\t" in line else line.split()
    cells = fields[1:width + 1]
    if len(cells) != width or not all(CELL.match(c) for c in cells):
        raise ParseError(TOOL, number, f"{fields[0]}: {width} link cells expected, got {cells!r}")
    return cells, _numa(fields[width + 1:])


def _numa(rest: list[str]) -> int | None:
    """CPU affinity, NUMA affinity, GPU NUMA ID follow the cells: the second is the NUMA node
    (None where empty: tabs keep an empty CPU affinity in place, spaces cannot)."""
    value = rest[1] if len(rest) > 1 else ""
    return integer(value, TOOL) if value.isascii() and value.isdigit() else None


def _nic_names(nics: list[str], legend: dict[str, str], number: int) -> dict[str, str]:
    named = {}
    for column in nics:
        if re.fullmatch(r"NIC\d+", column):
            if column not in legend:
                raise ParseError(TOOL, number + 1, f"{column} has no entry in the NIC legend")
            named[column] = legend[column]
        else:
            named[column] = column  # older drivers: the RDMA device is the column itself
    return named
