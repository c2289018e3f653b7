"""Measure the pairs of a pattern, round by round, pairs of a round at once; compare each with
what the Plan says it should carry; keep everything in SQLite."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from gpunet.bench import DIRECT, SAME_LEAF, pair_interfaces
from gpunet.bench.expected import rdma_expected_gbps, slow_path, tcp_expected_gbps
from gpunet.bench.flow import EndCounters, end_counters, flow_sample_argv, flow_verdict
from gpunet.bench.health import CPU_SAMPLE_ARGV, EndHealth, end_health, verdict, with_tool_cpu
from gpunet.bench.iperf3 import Iperf3Result, parse_iperf3_json
from gpunet.bench.launch import (
    PERFTEST_TOOLS,
    Endpoints,
    NcclJob,
    PairCommands,
    iperf3_pair,
    nccl_argv,
    perftest_pair,
)
from gpunet.bench.nccl import parse_nccl_tests
from gpunet.bench.perftest import parse_perftest
from gpunet.bench.schedule import Pair, Round, path_of, rail_of, to_rail_of
from gpunet.bench.sharp import DEBUG_ENV, busbw_of
from gpunet.bench.store import Measurement
from gpunet.errors import ParseError, UsageError
from gpunet.model.nodeset import fold
from gpunet.model.plan import Plan
from gpunet.model.tuning import DEFAULT_CONGESTION
from gpunet.runner import CommandRunner, run_local

NodeArgv = Callable[[str, Sequence[str]], list[str]]  # node, command -> argv that runs it there
Progress = Callable[[int, int, str], None]  # (steps done, steps, what runs now: "round 3/15: 6 pairs")
Measure = Callable[["BenchSetup", Pair, int], Measurement]  # (setup, pair, attempt) -> its measurement
SAMPLE_SECONDS = 15  # reading /proc on a node: an ssh connection at worst


@dataclass(frozen=True)
class BenchSetup:
    plan: Plan
    on_node: NodeArgv
    plane: str = "compute"
    seconds: int = 3
    scale: float | None = None  # lab Mbit/s per plan Gbit/s; None on real hardware
    # Parallel TCP streams per pair: a flow rides one ECMP path and flows hashed onto one link share
    # it. In a round that fills a leaf's uplinks exactly (1:1, every pair across), the worst pair
    # of 4 falls under 85 % of its line in 49 % of rounds with 8 streams each, 7.6 % with 16,
    # 0.07 % with 32 (benchmarks/ecmp_streams.py: max-min shares over random 5-tuple hashing).
    streams: int = 32
    omit: int = 1  # iperf3 -O: seconds of slow start left out of the result
    # iperf3's -C; api.bench sets the plane's choice from the Plan (model/tuning.py), what its
    # nodes' sysctl holds. None: each host's own default.
    congestion: str | None = DEFAULT_CONGESTION
    tool: str = "iperf3"  # or ib_write_bw, ib_read_bw, ib_send_bw
    qps: int = 4  # perftest queue pairs: several, for the same reason as several TCP streams
    # Rounds of re-measuring inconclusive pairs (an end was saturated), one pair at a time, after
    # the scheduled rounds: the pattern's own load is gone, and a passing burst of other work may be.
    retries: int = 1
    # Where each node's flow counters are read from: "/" on nodes; a lab server's own tree in a lab
    # (its servers have no NIC counters of their own: recorded ones are replayed from there).
    counter_root: Callable[[str], str] = lambda node: "/"


def _no_progress(done: int, total: int, what: str) -> None:
    """The default progress: nothing shown."""


def run_rounds(setup: BenchSetup, rounds: list[Round], progress: Progress = _no_progress,
               on_round: Callable[[list[Measurement]], None] = lambda ms: None,
               measure: Measure | None = None) -> list[Measurement]:
    """Round by round, the pairs of a round at once, then the retry rounds of inconclusive pairs;
    `on_round` gets each round's results (and each retry) as it ends. `measure`: measure_pair."""
    measure = measure or measure_pair
    results: list[Measurement] = []
    for done, pairs in enumerate(rounds):
        progress(done, len(rounds), f"round {done + 1}/{len(rounds)}: {len(pairs)} pairs")
        with ThreadPoolExecutor(max_workers=max(1, len(pairs))) as pool:
            measured = list(pool.map(lambda p: measure(setup, p, 1), pairs))
        on_round(measured)
        results += measured
    progress(len(rounds), len(rounds), f"{len(rounds)} rounds measured")
    return retry_inconclusive(setup, [p for r in rounds for p in r], results, progress=progress, on_round=on_round,
                              measure=measure)


def retry_inconclusive(setup: BenchSetup, pairs: list[Pair], results: list[Measurement], *,
                       progress: Progress = _no_progress,
                       on_round: Callable[[list[Measurement]], None] = lambda ms: None,
                       measure: Measure | None = None) -> list[Measurement]:
    """Each inconclusive pair measured again, one at a time, up to `setup.retries` times: a
    conclusive measurement (ok, low or failed) replaces the inconclusive one, an inconclusive one
    only counts as an attempt. `pairs` and `results` are in the same order."""
    measure = measure or measure_pair
    results = list(results)
    for attempt in range(2, setup.retries + 2):
        pending = [i for i, m in enumerate(results) if m.status == "inconclusive"]
        for done, i in enumerate(pending):
            progress(done, len(pending), f"retry {done + 1}/{len(pending)}: {pairs[i][0]} -> {pairs[i][1]}")
            results[i] = _kept(results[i], measure(setup, pairs[i], attempt), attempt)
            on_round([results[i]])
    return results


def _kept(earlier: Measurement, again: Measurement, attempt: int) -> Measurement:
    """The retry when it is conclusive; else the earlier measurement, its reason telling the retry's."""
    if again.status != "inconclusive":
        return again
    return earlier.model_copy(update={"attempts": attempt,
                                      "reason": f"{earlier.reason}; again on attempt {attempt}: {again.reason}"})


def measure_pair(setup: BenchSetup, pair: Pair, attempt: int = 1) -> Measurement:
    """The tool from source to target on the plane: a one-off server on the target, then the client,
    with both ends' CPUs read just before and just after the client runs."""
    commands = pair_commands(setup, pair)
    server = subprocess.Popen(setup.on_node(pair[1], commands.server),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3 if setup.tool == "iperf3" else 1.0)  # the server binds (perftest opens the HCA) first
        before, flow_before = _sample_ends(setup, pair)
        raw = _client_output(setup.on_node(pair[0], commands.client), setup.seconds + setup.omit + 30)
        after, flow_after = _sample_ends(setup, pair)
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=10)
    counters = (end_counters(pair[0], "client", flow_before[0], flow_after[0]),
                end_counters(pair[1], "server", flow_before[1], flow_after[1]))
    return _measurement(setup, pair, raw, _health(setup, pair, before, after, _iperf3(setup.tool, raw)), attempt,
                        counters=counters)


Samples = tuple[str | None, str | None]


def _sample_ends(setup: BenchSetup, pair: Pair) -> tuple[Samples, Samples]:
    """CPU_SAMPLE_ARGV's and the flow counters' output on both ends at once, through the runner that runs
    the tool there."""
    ends = pair_interfaces(setup.plan, setup.plane, pair)
    procs = [_start(setup.on_node(node, CPU_SAMPLE_ARGV)) for node in pair]
    flows = [_start(setup.on_node(node, flow_sample_argv(setup.plan, iface, setup.counter_root(node))))
             for node, iface in zip(pair, ends, strict=True)]
    return (_stdout(procs[0]), _stdout(procs[1])), (_stdout(flows[0]), _stdout(flows[1]))


def _start(argv: list[str]) -> subprocess.Popen[str] | None:
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:  # the transport itself is missing (no ssh): health unreadable, said so
        return None


def _stdout(proc: subprocess.Popen[str] | None) -> str | None:
    """What the sample printed (cat exits 1 without PSI, having printed the rest); None if nothing."""
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=SAMPLE_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
    return out or None


def _health(setup: BenchSetup, pair: Pair, before: tuple[str | None, str | None],
            after: tuple[str | None, str | None], result: Iperf3Result | None) -> tuple[EndHealth, EndHealth]:
    client = end_health(pair[0], "client", before[0], after[0])
    server = end_health(pair[1], "server", before[1], after[1])
    if result is None:
        return client, server
    return (with_tool_cpu(client, result.client_cpu_percent, result.version, setup.streams),
            with_tool_cpu(server, result.server_cpu_percent, result.version, setup.streams))


def _iperf3(tool: str, raw: str) -> Iperf3Result | None:
    if tool != "iperf3":
        return None
    try:
        return parse_iperf3_json(raw)
    except ParseError:
        return None


def _client_output(argv: list[str], timeout: float) -> str:
    """The client's stdout; a client that hangs is a failed measurement, not the end of the run."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False).stdout
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return f"{partial}\n[gpunet] client timed out after {timeout:g} s"


def pair_commands(setup: BenchSetup, pair: Pair) -> PairCommands:
    client, server = pair_interfaces(setup.plan, setup.plane, pair)
    ends = Endpoints(client_ip=_ip(client.address), server_ip=_ip(server.address), server_hca=server.hca,
                     client_hca=client.hca, port_offset=to_rail_of(pair) or 0)
    if setup.tool == "iperf3":
        return iperf3_pair(ends, setup.seconds, setup.streams, setup.omit, setup.congestion)
    return perftest_pair(setup.tool, ends, setup.seconds, setup.qps, roce=_technology(setup) != "infiniband")


def _ip(cidr: str | None) -> str:
    return (cidr or "").split("/")[0]


def _technology(setup: BenchSetup) -> str:
    return next(p.technology for p in setup.plan.planes if p.name == setup.plane)


def _measurement(setup: BenchSetup, pair: Pair, raw: str, health: tuple[EndHealth, ...] = (),
                 attempt: int = 1, *, counters: tuple[EndCounters, ...] = ()) -> Measurement:
    value = _value(setup.tool, raw)
    a, b = pair_interfaces(setup.plan, setup.plane, pair)
    expected = (rdma_expected_gbps(a, b, _technology(setup)) if setup.tool in PERFTEST_TOOLS
                else tcp_expected_gbps(a, b, setup.scale))
    status, reason = flow_verdict(*verdict(value, expected, health, _slow_path(setup, pair, raw)), counters)
    return Measurement(source=pair[0], destination=pair[1], plane=setup.plane, metric="throughput",
                       value=value or 0.0, unit="Gb/s", expected=round(expected, 6), status=status, raw=raw,
                       rail=rail_of(pair), to_rail=_other_rail(pair), path=path_of(pair), health=health,
                       reason=reason, attempts=attempt, counters=counters)


def _other_rail(pair: Pair) -> int | None:
    """The destination's rail where it is not the source's (a pair across rails)."""
    return None if to_rail_of(pair) == rail_of(pair) else to_rail_of(pair)


def _slow_path(setup: BenchSetup, pair: Pair, raw: str) -> str | None:
    """Where the pair's streams spread over equal-cost paths (across leaves): why one path is slow."""
    if path_of(pair) in (None, SAME_LEAF, DIRECT):
        return None
    result = _iperf3(setup.tool, raw)
    return slow_path(result.stream_gbps) if result is not None and not result.error else None


def _value(tool: str, raw: str) -> float | None:
    """Gb/s the client measured, or None when the run failed or printed nothing readable."""
    try:
        if tool == "iperf3":
            result = parse_iperf3_json(raw)
            return None if result.error else result.received_gbps
        perftest = parse_perftest(raw)
        return perftest.gbps(perftest.rows[-1].bw_average)
    except ParseError:
        return None


def run_nccl(plan: Plan, nodes: list[str], job: NcclJob, launcher: str, *, run: CommandRunner = run_local,
             timeout: float = 3600) -> Measurement:
    """One nccl-tests job over the nodes (one rank per GPU), judged by its own correctness check:
    its bus bandwidth depends on the algorithm NCCL picks, so `bench compare` against a baseline
    run judges the speed, not a figure from the Plan."""
    gpus = min((n.gpus for n in plan.nodes if n.name in set(nodes)), default=0)
    if gpus < 1:
        raise UsageError(f"{fold(nodes)} have no GPUs in the Plan")
    if any(p.sharp for p in plan.planes if p.name == "compute"):
        job = replace(job, connections=DEBUG_ENV)  # the log then says whether CollNet/SHARP was used
    done = run(nccl_argv(launcher, nodes, gpus, job), check=False, timeout=timeout)
    raw = done.stdout + done.stderr
    try:
        result = parse_nccl_tests(done.stdout)
    except ParseError:
        result = None
    busbw, why = busbw_of(result, raw) if result else (None, None)
    status = "ok" if result is not None and result.ok and done.returncode == 0 else "failed"
    return Measurement(source=fold(nodes), destination=job.test, plane="compute", metric="busbw",
                       value=busbw or 0.0, unit="GB/s", expected=None, status=status, raw=raw, reason=why)
