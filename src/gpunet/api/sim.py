"""`gpunet sim` and `gpunet place`: a collective's predicted time on the Plan's real cables, the
what-ifs beside it, and the nodes to give a job."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from gpunet.errors import ParseError, UsageError
from gpunet.files.inputs import read_bytes, read_stream, read_text, text_of
from gpunet.model.nodeset import NodeSetError, parse_nodeset
from gpunet.model.plan import Plan
from gpunet.place import Placement, parse_free_nodes, place
from gpunet.sim import SimOptions, SimReport
from gpunet.sim.fabric import default_plane
from gpunet.sim.whatif import Scenario, oversubscribed, parse_pattern, parse_sizes, side_by_side
from gpunet.spec.plan import load, plan_of

__all__ = ["Placement", "SimOptions", "SimReport", "WhatIf", "options", "place_job", "simulate"]

MAX_PATTERN_BYTES = 8 * 2**20
MAX_SLURM_BYTES = 64 * 2**20
SPEC_SUFFIXES = (".yaml", ".yml")
ROUTING = ("hash", "spray")


@dataclass(frozen=True)
class WhatIf:
    """The columns beside the job as it is: an element down, other nodes, another leaf ratio, another spec."""

    fail: list[str] = field(default_factory=list)
    place: list[str] = field(default_factory=list)
    oversubscription: list[float] = field(default_factory=list)
    spec: list[Path] = field(default_factory=list)


def options(*, collective: str, algorithm: str, sizes: str, routing: str = "hash", seed: int = 0,
            connections: int = 2, plane: str | None = None, nvlink: float | None = None, pcie: float | None = None,
            pattern: Path | None = None) -> SimOptions:
    """What to simulate, from the command's words; bad values are refused with the valid choices."""
    if routing not in ROUTING:
        raise UsageError(f"unknown routing {routing!r}; choose {' or '.join(ROUTING)}")
    pairs = parse_pattern(read_text(pattern, MAX_PATTERN_BYTES, "pattern file")) if pattern else ()
    return SimOptions(collective=collective, algorithm=algorithm, sizes=parse_sizes(sizes), routing=routing,
                      seed=seed, connections=connections, plane=plane, nvlink_gbps=nvlink, pcie_gbps=pcie, pairs=pairs)


def simulate(source: Path | None, nodes: str | None, wanted: SimOptions, whatif: WhatIf) -> list[SimReport]:
    """The job as it is, then each what-if, each a report as nccl-tests reports."""
    plan = plan_of(source)
    scenarios = [Scenario(name=f"{name} down", down=(name,)) for name in whatif.fail]
    scenarios += [Scenario(name=f"on {text}", nodes=tuple(_nodes(text))) for text in whatif.place]
    scenarios += [_oversubscribed(source, plan, wanted.plane, ratio) for ratio in whatif.oversubscription]
    scenarios += [Scenario(name=other.name, plan=plan_of(other)) for other in whatif.spec]
    return side_by_side(plan, _nodes(nodes) if nodes else None, wanted, scenarios)


def _nodes(text: str) -> list[str]:
    try:
        return list(parse_nodeset(text))
    except NodeSetError as exc:
        raise UsageError(str(exc)) from None


def _oversubscribed(source: Path | None, plan: Plan, plane: str | None, ratio: float) -> Scenario:
    if source is not None and source.suffix not in SPEC_SUFFIXES:
        raise UsageError(f"--oversubscription designs the spec again: give the spec (YAML), not {source.name}")
    return Scenario(name=f"leaf {ratio:g}:1", plan=oversubscribed(load(source)[0], plane or default_plane(plan), ratio))


def place_job(source: Path | None, count: int, *, free: str | None, slurm: Path | None, wanted: SimOptions,
              seed: int = 0) -> Placement:
    """The nodes to give a job of `count` nodes among the free ones (a NodeSet, or saved `sinfo` or
    `scontrol show nodes` output; '-' reads it from stdin): predicted against a random draw."""
    if free is not None and slurm is not None:
        raise UsageError("give the free nodes once: --free or --slurm")
    pool = _from_slurm(slurm) if slurm is not None else _nodes(free) if free is not None else None
    return place(plan_of(source), count, pool, wanted, seed=seed)


def _from_slurm(path: Path) -> list[str]:
    data = read_stream(sys.stdin.buffer, MAX_SLURM_BYTES, "stdin") if str(path) == "-" else \
        read_bytes(path, MAX_SLURM_BYTES, "Slurm node list")
    try:
        nodes = parse_free_nodes(text_of(data, "sinfo"))
    except ParseError as exc:
        raise UsageError(f"{path}: {exc}") from None
    if not nodes.free:
        raise UsageError(f"{path}: no node is free ({len(nodes.states)} listed)")
    return list(nodes.free)
