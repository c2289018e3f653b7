"""Which nodes Slurm can give a job now, from `sinfo` (its default partition summary) or
`scontrol show nodes` text. Pure parsers: text in, states out, ParseError on what they do not know.

A node is free when its state is idle and nothing else keeps it from a new job: idle, or idle and
powered down (`idle~`, IDLE+POWERED_DOWN: Slurm powers it up for the job), or a cloud node. A flag
such as not responding (`*`), drain, reserved or maintenance (`$`), reboot pending (`@`), or
powering down (`%`, `!`) keeps it out; so do mix, alloc, down and the rest. A node listed in several
partitions is free only if every line says so."""

from __future__ import annotations

import re

from gpunet.errors import ParseError
from gpunet.model.base import Frozen
from gpunet.model.nodeset import NodeSetError, parse_nodeset

SINFO_HEADER = ("PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST")
FREE_SUFFIXES = {"", "~"}  # powered down: allocatable, Slurm resumes it
SINFO_SUFFIXES = "*~#!%$@^-"
FREE_FLAGS = {"CLOUD", "POWERED_DOWN", "POWER"}  # scontrol: flags that leave an idle node usable
NOT_FOUND = re.compile(r"^Node (\S+) not found$")
FIELD = re.compile(r"(\w+)=(\S*)")
MAX_LINES = 200_000


class SlurmNodes(Frozen):
    """Each node's state as the tool wrote it, and the free ones."""

    tool: str
    states: dict[str, str]
    free: tuple[str, ...]
    missing: tuple[str, ...] = ()  # scontrol: "Node X not found"


def parse_sinfo(text: str) -> SlurmNodes:
    """`sinfo` (or `sinfo -p PART`): PARTITION AVAIL TIMELIMIT NODES STATE NODELIST, one line per
    partition and state, NODELIST a hostlist."""
    lines = [(n, line) for n, line in enumerate(_bounded(text, "sinfo"), 1) if line.strip()]
    if not lines or tuple(lines[0][1].split()) != SINFO_HEADER:
        raise ParseError("sinfo", lines[0][0] if lines else 1, "expected sinfo's default header "
                         f"({' '.join(SINFO_HEADER)}); run plain `sinfo`")
    states: dict[str, list[str]] = {}
    for number, line in lines[1:]:
        fields = line.split()
        if len(fields) != len(SINFO_HEADER) or not fields[3].isdigit():
            raise ParseError("sinfo", number, f"not a sinfo summary line: {line[:80]!r}")
        nodes = _hostlist("sinfo", fields[5], number)
        if len(nodes) != int(fields[3]):
            raise ParseError("sinfo", number, f"NODES says {fields[3]}, NODELIST names {len(nodes)}")
        for node in nodes:
            states.setdefault(node, []).append(fields[4])
    free = tuple(sorted(n for n, s in states.items() if all(_sinfo_free(x) for x in s)))
    return SlurmNodes(tool="sinfo", states={n: ",".join(s) for n, s in states.items()}, free=free)


def _sinfo_free(state: str) -> bool:
    base = state.rstrip(SINFO_SUFFIXES)
    return base == "idle" and state[len(base):] in FREE_SUFFIXES


def parse_scontrol_nodes(text: str) -> SlurmNodes:
    """`scontrol show nodes`: a block per node of Key=Value words, NodeName= first; "Node X not
    found" lines (asked for a name Slurm does not know) are kept as missing."""
    states: dict[str, str] = {}
    missing: list[str] = []
    node: str | None = None
    for number, line in enumerate(_bounded(text, "scontrol"), 1):
        stripped = line.strip()
        if found := NOT_FOUND.match(stripped):
            missing.append(found.group(1))
        elif stripped:
            node = _scontrol_line(number, stripped, node, states)
    if not states:
        raise ParseError("scontrol", 1, "no NodeName= ... State= found")
    free = tuple(sorted(n for n, s in states.items() if _scontrol_free(s)))
    return SlurmNodes(tool="scontrol", states=states, free=free, missing=tuple(missing))


def _scontrol_line(number: int, line: str, node: str | None, states: dict[str, str]) -> str | None:
    """One Key=Value line: a NodeName= starts a node, its State= is recorded; the current node back."""
    fields = dict(FIELD.findall(line))
    if not fields:
        raise ParseError("scontrol", number, f"not a Key=Value line of `scontrol show nodes`: {line[:80]!r}")
    if "NodeName" in fields:
        node = fields["NodeName"]
        _hostlist("scontrol", node, number)
    if "State" in fields:
        if node is None:
            raise ParseError("scontrol", number, "State= before any NodeName=")
        states[node] = fields["State"]
    return node


def _scontrol_free(state: str) -> bool:
    base, *flags = state.rstrip("*").split("+")
    return base == "IDLE" and not state.endswith("*") and set(flags) <= FREE_FLAGS


def parse_free_nodes(text: str) -> SlurmNodes:
    """Either tool's text, told apart by its first line."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first.split()[:1] == ["PARTITION"]:
        return parse_sinfo(text)
    if first.strip().startswith(("NodeName=", "Node ")):
        return parse_scontrol_nodes(text)
    raise ParseError("slurm", 1, f"neither `sinfo` nor `scontrol show nodes` output: {first[:80]!r}")


def _bounded(text: str, tool: str) -> list[str]:
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise ParseError(tool, MAX_LINES + 1, f"more than {MAX_LINES} lines")
    return lines


def _hostlist(tool: str, text: str, line: int) -> list[str]:
    try:
        return list(parse_nodeset(text))
    except NodeSetError as exc:
        raise ParseError(tool, line, str(exc)) from None
