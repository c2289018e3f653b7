"""The RoCE QoS tools' output: `mlnx_qos -i IF` (trust mode, DSCP -> priority, PFC per priority, the
priority of each traffic class), `show_gids` (the GID table NCCL_IB_GID_INDEX indexes), and the GPU
PCI addresses nvidia-smi reports. Lines outside the sections these tools print are refused."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.files.inputs import integer
from gpunet.model.rdma import GidEntry, MlnxQos

QOS_TOOL = "mlnx_qos"
GIDS_TOOL = "show_gids"
# mlnx_qos lines that carry nothing the checks use, by their prefix.
QOS_PASSED = ("DCBX mode:", "default priority:", "Receive buffer size", "Cable len:", "buffer ")
TRUST = re.compile(r"^Priority trust state:\s*(pcp|dscp)\s*$")
DSCP_ROW = re.compile(r"^prio:(\d) dscp:((?:\d{1,2},)*\d{1,2}),?$")
TC = re.compile(r"^tc: (\d) ratelimit: .*tsa: \S+")
TC_PRIORITY = re.compile(r"^priority:\s+(\d)$")
# One show_gids row, its columns joined by single spaces: the IPv4 and netdev columns may be empty.
GID_ROW = re.compile(r"(\S+) (\d+) (\d+) ([0-9a-f]{4}(?::[0-9a-f]{4}){7})"
                     r"(?: ((?:\d{1,3}\.){3}\d{1,3}))? (v[12])(?: (\S+))?")


def parse_mlnx_qos(text: str) -> MlnxQos:
    state: dict[str, object] = {"tc_of_priority": {}}
    section, tc = "", None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(QOS_PASSED):
            continue
        section, tc = _qos_line(state, line, section, tc, number)
    if "trust" not in state:
        raise ParseError(QOS_TOOL, 1, "no 'Priority trust state:' line")
    return MlnxQos.model_validate(state)


def _qos_line(state: dict[str, object], line: str, section: str, tc: int | None,
              number: int) -> tuple[str, int | None]:
    if trust := TRUST.match(line):
        state["trust"] = trust[1]
    elif line == "dscp2prio mapping:":
        state["dscp2prio"] = {}
        return "dscp", None
    elif line == "PFC configuration:":
        return "pfc", None
    elif (row := DSCP_ROW.match(line)) and section == "dscp":
        mapping = state["dscp2prio"]
        assert isinstance(mapping, dict)
        mapping.update({integer(d, QOS_TOOL, number): integer(row[1], QOS_TOOL, number) for d in row[2].split(",")})
    elif section == "pfc" and line.startswith(("priority ", "enabled ")):
        _pfc_row(state, line, number)
    elif match := TC.match(line):
        return "tc", integer(match[1], QOS_TOOL, number)
    elif (prio := TC_PRIORITY.match(line)) and section == "tc" and tc is not None:
        tcs = state["tc_of_priority"]
        assert isinstance(tcs, dict)
        tcs[integer(prio[1], QOS_TOOL, number)] = tc
    else:
        raise ParseError(QOS_TOOL, number, f"not a line mlnx_qos prints: {line[:60]!r}")
    return section, tc


def _pfc_row(state: dict[str, object], line: str, number: int) -> None:
    label, *values = line.split()
    if len(values) != 8 or not all(v in ("0", "1") or label == "priority" for v in values):
        raise ParseError(QOS_TOOL, number, f"PFC {label} row without 8 values: {line[:60]!r}")
    if label == "enabled":
        state["pfc_enabled"] = tuple(p for p, v in enumerate(values) if v == "1")


def parse_show_gids(text: str) -> tuple[GidEntry, ...]:
    """`show_gids [DEV [PORT]]`: the header, the dashes, a row per GID, and n_gids_found=N, which
    must count the rows (a cut output is refused)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 3 or lines[0].split()[:4] != ["DEV", "PORT", "INDEX", "GID"] or set(lines[1].split()) - {
            "---", "----", "-----", "------------"}:
        raise ParseError(GIDS_TOOL, 1, "no show_gids header")
    found = re.fullmatch(r"n_gids_found=(\d+)", lines[-1].strip())
    rows = [_gid(line, number) for number, line in enumerate(lines[2:-1], 3)]
    if found is None or integer(found[1], GIDS_TOOL, len(lines)) != len(rows):
        raise ParseError(GIDS_TOOL, len(lines), "n_gids_found= missing or not the number of rows")
    return tuple(rows)


def _gid(line: str, number: int) -> GidEntry:
    """DEV PORT INDEX GID [IPv4] VER [DEV]: the IPv4 column is empty for a GID that is not IPv4-mapped, and
    the netdev column for a port with no netdev (an InfiniBand port of a mixed host prints 'v1' and nothing
    after it); the columns are tab-separated, or spaces where a paste turned tabs into spaces."""
    words = line.split()
    match = GID_ROW.fullmatch(" ".join(words))
    if match is None:
        raise ParseError(GIDS_TOOL, number, f"not a GID row: {line.strip()[:80]!r}")
    hca, port, index, gid, ipv4, version, netdev = match.groups()
    return GidEntry(hca=hca, port=integer(port, GIDS_TOOL, number), index=integer(index, GIDS_TOOL, number), gid=gid,
                    ipv4=ipv4,
                    version="v1" if version == "v1" else "v2", netdev=netdev)


def parse_gpu_bus_ids(text: str) -> dict[str, str]:
    """`nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader`: GPU0 -> 0000:1b:00.0 (nvidia-smi
    writes an 8-digit domain and upper case; lspci a 4-digit one in lower case)."""
    result = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = re.fullmatch(r"\s*(\d+),\s*([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])\s*", line)
        if match is None:
            raise ParseError("nvidia-smi --query-gpu", number, f"not 'index, bus id': {line.strip()[:60]!r}")
        result[f"GPU{match[1]}"] = f"{match[2][-4:]}:{match[3]}:{match[4]}.{match[5]}".lower()
    if not result:
        raise ParseError("nvidia-smi --query-gpu", 1, "no GPU")
    return result
