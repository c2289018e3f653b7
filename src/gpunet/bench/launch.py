"""Command lines for the benchmark tools (pure: argv in lists, never a shell string): an iperf3
or perftest server/client pair, and an nccl-tests job launched through srun or mpirun."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpunet.errors import UsageError
from gpunet.model.nodeset import fold
from gpunet.model.tuning import DEFAULT_CONGESTION

PERFTEST_TOOLS = ("ib_write_bw", "ib_read_bw", "ib_send_bw")
PAIR_TOOLS = ("iperf3", *PERFTEST_TOOLS)
NCCL_TESTS = ("all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf",
              "broadcast_perf")
TOOLS = (*PAIR_TOOLS, "nccl")
IPERF3_PORT = 5201
PERFTEST_PORT = 18515  # perftest's default out-of-band port; rail i uses the port + i
# NCCL's own debug output would interleave with the table; WARN keeps real problems visible.
NCCL_ENV_PASSED = ("NCCL_DEBUG=WARN",)


@dataclass(frozen=True)
class PairCommands:
    server: list[str]
    client: list[str]


@dataclass(frozen=True)
class Endpoints:
    """Where a pair runs: the addresses on the plane (the rail's, on a rail pattern), the target's
    RDMA device, and a port offset so several rails of one node run side by side."""

    client_ip: str
    server_ip: str
    server_hca: str | None = None
    client_hca: str | None = None
    port_offset: int = 0


def iperf3_pair(ends: Endpoints, seconds: int, streams: int, omit: int = 1,
                congestion: str | None = DEFAULT_CONGESTION) -> PairCommands:
    """A one-off server (-1): it exits after one test, so nothing lingers on the node. The client
    binds its plane address so the traffic leaves through that NIC, leaves the first `omit`
    seconds out of the result (-O: slow start's overshoot is not the path), and names its
    congestion control (-C; None: the host's)."""
    port = str(IPERF3_PORT + ends.port_offset)
    control = ["-C", congestion] if congestion else []
    return PairCommands(server=["iperf3", "-s", "-1", "-B", ends.server_ip, "-p", port],
                        client=["iperf3", "-c", ends.server_ip, "-B", ends.client_ip, "-p", port, "-t", str(seconds),
                                "-O", str(omit), "-P", str(streams), *control, "-J"])


def perftest_pair(tool: str, ends: Endpoints, seconds: int, qps: int, roce: bool) -> PairCommands:
    """ib_*_bw for `seconds` (-D) at 64 KiB messages in Gb/s; on RoCE through rdma_cm (-R), which
    resolves the GID from the plane address instead of guessing a GID index."""
    if tool not in PERFTEST_TOOLS:
        raise UsageError(f"unknown perftest tool {tool!r}; known: {', '.join(PERFTEST_TOOLS)}")
    if ends.server_hca is None or ends.client_hca is None:
        raise UsageError(f"{tool} needs an RDMA device (hca) on both ends in the Plan")
    common = ["-F", "--report_gbits", "-D", str(seconds), "-q", str(qps), "-s", "65536",
              "-p", str(PERFTEST_PORT + ends.port_offset), *(["-R"] if roce else [])]
    bind = ["--bind_source_ip", ends.server_ip] if roce else []
    return PairCommands(server=[tool, "-d", ends.server_hca, *common, *bind],
                        client=[tool, "-d", ends.client_hca, *common, ends.server_ip])


@dataclass(frozen=True)
class NcclJob:
    test: str = "all_reduce_perf"
    min_bytes: str = "8"
    max_bytes: str = "8G"
    factor: int = 2
    iterations: int = 20
    connections: tuple[str, ...] = ()  # NCCL_DEBUG settings that log how NCCL connected (bench/sharp.py)


def nccl_argv(launcher: str, nodes: Sequence[str], gpus_per_node: int, job: NcclJob) -> list[str]:
    """One rank per GPU (-g 1), as NCCL wants for multi-node runs."""
    if job.test not in NCCL_TESTS:
        raise UsageError(f"unknown nccl-tests binary {job.test!r}; known: {', '.join(NCCL_TESTS)}")
    test = [job.test, "-b", job.min_bytes, "-e", job.max_bytes, "-f", str(job.factor), "-g", "1",
            "-n", str(job.iterations)]
    if launcher == "srun":
        exported = ["--export=ALL," + ",".join(job.connections)] if job.connections else []
        return ["srun", f"--nodes={len(nodes)}", f"--ntasks-per-node={gpus_per_node}",
                f"--nodelist={fold(nodes)}", "--mpi=pmix", *exported, *test]
    if launcher == "mpirun":
        hosts = ",".join(f"{n}:{gpus_per_node}" for n in nodes)
        passed = [a for pair in (job.connections or NCCL_ENV_PASSED) for a in ("-x", pair)]
        return ["mpirun", "-np", str(len(nodes) * gpus_per_node), "--host", hosts, "--bind-to", "none",
                *passed, *test]
    raise UsageError(f"unknown launcher {launcher!r}; use srun or mpirun")


def pick_launcher(environ: Mapping[str, str] = os.environ) -> str:
    """srun inside a Slurm allocation, else mpirun; a clear error when neither is installed."""
    if "SLURM_JOB_ID" in environ and shutil.which("srun"):
        return "srun"
    if shutil.which("mpirun"):
        return "mpirun"
    raise UsageError("nccl-tests needs a launcher: run inside a Slurm allocation (srun) or install Open MPI (mpirun)")
