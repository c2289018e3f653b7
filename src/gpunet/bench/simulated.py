"""A stored run's pairs as the simulator predicts them, to set measured against simulated.

The run's rounds are scheduled again from its pattern, plane and nodes (the schedule is a pure
function of the plan), and each round's pairs are simulated at once with as many connections as
the tool opened (iperf3's parallel streams), each hashed over the plan's ECMP next hops. A pair's
simulated value is its expectation (line rate times protocol efficiency, in the run's own units:
a lab's scaled rates included) times the share of its line rate the simulation gives it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from gpunet.bench import bench_nodes, pattern_rounds
from gpunet.bench.compare import Comparison, compare, load_rules
from gpunet.bench.store import Measurement, RunInfo, load_run
from gpunet.errors import UsageError
from gpunet.model.plan import Plan
from gpunet.sim.engine import nic_of
from gpunet.sim.fabric import SimFabric, read_fabric
from gpunet.sim.pairs import pair_rates

ARGUMENT = re.compile(r"(\w+)=(\S+)")
STREAMS = 32  # bench run's iperf3 streams per pair (BenchSetup.streams)


def simulated_run(plan: Plan, info: RunInfo, measured: Sequence[Measurement], streams: int = STREAMS,
                  seed: int = 0) -> list[Measurement]:
    """The run's measurements with simulated values (status ok; no raw output); pairs without an
    expectation are left out."""
    if info.tool != "iperf3":
        raise UsageError(f"run {info.id} measured with {info.tool}: simulated pairs are iperf3 pairs (an nccl-tests "
                         "job compares with `gpunet sim`)")
    arguments = dict(ARGUMENT.findall(info.arguments))
    plane = arguments.get("plane", "")
    nodes = bench_nodes(plan, plane, None if arguments.get("nodes", "all") == "all" else arguments["nodes"])
    fabric = read_fabric(plan, plane)
    waiting = [m for m in measured if m.expected and m.metric == "throughput"]
    simulated: list[Measurement] = []
    for pairs in pattern_rounds(plan, plane, info.pattern, nodes):
        wanted = set(pairs)
        batch = [m for m in waiting if (m.source, m.destination) in wanted]
        waiting = [m for m in waiting if (m.source, m.destination) not in wanted]
        simulated += _simulate(fabric, batch, streams, seed)
    return simulated + _simulate(fabric, waiting, streams, seed)  # pairs the schedule no longer has: alone


def _simulate(fabric: SimFabric, batch: list[Measurement], streams: int, seed: int) -> list[Measurement]:
    if not batch:
        return []
    pairs = [(m.source, m.destination, m.rail or 0) for m in batch]
    rates = pair_rates(fabric, pairs, connections=streams, seed=seed).pairs
    result = []
    for m, rate, (src, dst, rail) in zip(batch, rates, pairs, strict=True):
        line = min(nic.gbps for nic in (nic_of(fabric, src, rail), nic_of(fabric, dst, rail)) if nic is not None)
        assert m.expected is not None
        result.append(m.model_copy(update={"value": m.expected * min(1.0, rate / line), "status": "ok", "raw": "",
                                           "health": (), "reason": None, "attempts": 1}))
    return result


def compare_simulated(db: Path, run: int, plan: Plan, rules_file: Path | None = None) -> list[Comparison]:
    """A stored iperf3 run (current) against the simulation of its own pairs, round by round (baseline)."""
    rules = load_rules(rules_file)
    info, measured = load_run(db, run)
    return compare(simulated_run(plan, info, measured), measured, rules)
