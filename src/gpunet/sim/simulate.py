"""`simulate`: one collective of one job over one plane of a Plan, as nccl-tests would report it,
beside the same job on a non-blocking fabric of the same NICs."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from gpunet.errors import UsageError
from gpunet.model.base import Frozen, bulk_objects
from gpunet.model.nodeset import fold
from gpunet.model.plan import Plan
from gpunet.sim.collectives import ALGORITHMS, COLLECTIVES, Job, Pattern, pattern, point_to_point
from gpunet.sim.engine import PhaseResult, Run, collective_seconds, run_phases
from gpunet.sim.fabric import Nic, SimFabric, read_fabric
from gpunet.sim.hardware import NodeLimits
from gpunet.sim.report import SimReport, SizeRow
from gpunet.sim.routing import Path, Router, Routing

MiB = 1 << 20
DEFAULT_SIZES = (MiB, 16 * MiB, 256 * MiB, 1024 * MiB, 8192 * MiB)
MAX_SIZE = 1 << 40


class SimOptions(Frozen):
    collective: str = "all_reduce"
    algorithm: str = "ring"
    sizes: tuple[int, ...] = DEFAULT_SIZES
    connections: int = Field(2, ge=1, le=64)  # per peer and rail: NCCL's channels per NIC x QPs per connection
    routing: Routing = "hash"
    seed: int = 0
    plane: str | None = None
    nvlink_gbps: float | None = Field(None, gt=0)
    pcie_gbps: float | None = Field(None, gt=0)
    pairs: tuple[tuple[str, str, int | None], ...] = ()  # sendrecv: (source, destination, rail or None)


def check_options(options: SimOptions) -> None:
    if options.collective not in COLLECTIVES:
        raise UsageError(f"unknown collective {options.collective!r}; choose one of {', '.join(COLLECTIVES)}")
    if options.algorithm not in ALGORITHMS:
        raise UsageError(f"unknown algorithm {options.algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    bad = [s for s in options.sizes if not 0 < s <= MAX_SIZE]
    if bad or not options.sizes:
        raise UsageError(f"message size {bad[0] if bad else 'none'}: give sizes from 1 byte to 1T (e.g. 8M,1G)")
    if options.collective == "sendrecv" and not options.pairs:
        raise UsageError("sendrecv needs a pattern: pairs of source and destination nodes")


def job_nodes(fabric: SimFabric, nodes: Sequence[str] | None, options: SimOptions) -> tuple[str, ...]:
    """The job's nodes in rank order: as given, or every GPU node of the plane by name."""
    if options.collective == "sendrecv" and nodes is None:
        nodes = list(dict.fromkeys(n for s, d, _ in options.pairs for n in (s, d)))
    if nodes is None:
        nodes = sorted(n for n in fabric.nics if fabric.gpus.get(n, 0) > 0) or sorted(fabric.nics)
    unknown = [n for n in nodes if n not in fabric.nics]
    if unknown:
        raise UsageError(f"node {unknown[0]!r} is not on plane {fabric.plane}; its nodes: {fold(list(fabric.nics))}")
    if len(set(nodes)) != len(nodes):
        twice = sorted({n for n in nodes if nodes.count(n) > 1})
        raise UsageError(f"the job names {fold(twice)} twice: each node holds one rank; name it once")
    if not nodes:
        raise UsageError(f"the job has no node on plane {fabric.plane}: name at least one")
    return tuple(nodes)


def make_job(fabric: SimFabric, nodes: tuple[str, ...]) -> Job:
    gpus = min(fabric.gpus.get(n, 0) for n in nodes) or 1
    rails = min(len(fabric.nics[n]) for n in nodes)
    return Job(nodes, gpus, rails)


def make_pattern(job: Job, options: SimOptions) -> Pattern:
    if options.collective == "sendrecv":
        where = {n: i for i, n in enumerate(job.nodes)}
        missing = [n for s, d, _ in options.pairs for n in (s, d) if n not in where]
        if missing:
            raise UsageError(f"pattern names {missing[0]!r}, which is not among the job's nodes")
        return point_to_point(job, [(where[s], where[d], r) for s, d, r in options.pairs])
    try:
        return pattern(job, options.collective, options.algorithm)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def nonblocking(src: Nic, dst: Nic, key: int) -> Path | None:
    """A non-blocking fabric of the same NICs: out of one NIC, into the other, nothing between."""
    del key
    return None if src.node == dst.node else {src.up: 1.0, dst.down: 1.0}


def simulate(plan: Plan, nodes: Sequence[str] | None = None, options: SimOptions | None = None,
             down: Sequence[str] = (), scenario: str = "plan") -> SimReport:
    """One collective of a job (`nodes` in rank order; every GPU node of the plane when None)."""
    options = options or SimOptions()
    check_options(options)
    with bulk_objects():  # 10^5-10^6 small lists and dicts: no cyclic GC passes over a large plan's objects
        fabric = read_fabric(plan, options.plane, down)
        return simulate_on(fabric, nodes, options, scenario)


def simulate_on(fabric: SimFabric, nodes: Sequence[str] | None, options: SimOptions, scenario: str, *,
                against_nonblocking: bool = True) -> SimReport:
    """`simulate` on a fabric already read; without `against_nonblocking` the non-blocking
    reference is left out (what-ifs that only need the busbw)."""
    job = make_job(fabric, job_nodes(fabric, nodes, options))
    shape = make_pattern(job, options)
    limits = NodeLimits.of(fabric, job.nodes, options.nvlink_gbps, options.pcie_gbps)
    router = Router(fabric, options.routing, options.seed)
    results = run_phases(Run(fabric, job, router.path, options.connections, limits, options.seed), shape)
    ideal = run_phases(Run(fabric, job, nonblocking, options.connections, limits, options.seed), shape) \
        if against_nonblocking else None
    return _report(Run(fabric, job, router.path, options.connections, limits, options.seed), shape, options,
                   scenario=scenario, results=results, ideal=ideal)


def _report(run: Run, shape: Pattern, options: SimOptions, *, scenario: str, results: list[PhaseResult],
            ideal: list[PhaseResult] | None) -> SimReport:
    fabric, job, limits = run.fabric, run.job, run.limits
    rows = tuple(_row(results, size, shape.bus_factor) for size in sorted(options.sizes))
    largest = max(options.sizes)
    ideal_bus = _row(ideal, largest, shape.bus_factor).busbw if ideal is not None else None
    network = sum(r.network_bytes for r in results)
    return SimReport(
        scenario=scenario, plane=fabric.plane, collective=shape.collective, algorithm=shape.algorithm,
        routing=options.routing, seed=options.seed, nodes=len(job.nodes), gpus_per_node=job.gpus, ranks=job.ranks,
        rails=job.rails, connections=options.connections, down=fabric.down, rows=rows,
        bottlenecks=tuple(b for r in results for b in r.bottlenecks), limited_by=_limited_by(results, largest),
        peak_busbw=bandwidth_busbw(results, shape.bus_factor), nonblocking_busbw=ideal_bus,
        vs_nonblocking=rows[-1].busbw / ideal_bus if ideal_bus else None,
        spine_share=min(1.0, sum(r.spine_bytes for r in results) / network) if network else 0.0,
        disconnected=sum(r.disconnected for r in results), notes=tuple(n for n in (limits.note,) if n),
    )


def _row(results: list[PhaseResult], size: int, factor: float) -> SizeRow:
    seconds = collective_seconds(results, size)
    algbw = size / seconds / 1e9 if seconds != float("inf") else 0.0
    return SizeRow(bytes=size, time_us=seconds * 1e6, algbw=algbw, busbw=algbw * factor)


def _limited_by(results: list[PhaseResult], size: int) -> str:
    if any(r.disconnected for r in results):
        return "disconnected"
    latency = sum(r.steps * r.latency_us * 1e-6 for r in results)
    network = sum(r.steps * r.network_spb * size for r in results)
    local = sum(r.steps * r.local_spb * size for r in results)
    return max((latency, "latency"), (network, "network"), (local, "nvlink"))[1]


def bandwidth_busbw(results: list[PhaseResult], factor: float) -> float:
    """Bus bandwidth (GB/s) as the message grows without bound: the bandwidth term alone."""
    per_byte = sum(r.steps * r.seconds_per_byte for r in results)
    return factor / per_byte / 1e9 if per_byte else float("inf")
