"""Tool command lines (pure), perftest pairs from the Plan's HCAs and rails, an nccl-tests job
through a recorded output, and what a lab refuses."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpunet.api import bench
from gpunet.api.bench import BenchRun, congestion_for
from gpunet.api.plans import plan_spec
from gpunet.bench.expected import rdma_efficiency
from gpunet.bench.launch import Endpoints, NcclJob, iperf3_pair, nccl_argv, perftest_pair, pick_launcher
from gpunet.bench.run import BenchSetup, _measurement, pair_commands, run_nccl, run_rounds
from gpunet.bench.schedule import RailPair
from gpunet.errors import UsageError

FIXTURES = Path(__file__).parent.parent / "fixtures"
ENDS = Endpoints(client_ip="10.1.0.1", server_ip="10.1.0.2", server_hca="mlx5_3", client_hca="mlx5_4", port_offset=3)


def test_iperf3_pair_binds_both_ends_and_offsets_the_port() -> None:
    pair = iperf3_pair(ENDS, seconds=5, streams=8)
    assert pair.server == ["iperf3", "-s", "-1", "-B", "10.1.0.2", "-p", "5204"]
    assert pair.client == ["iperf3", "-c", "10.1.0.2", "-B", "10.1.0.1", "-p", "5204", "-t", "5", "-O", "1",
                           "-P", "8", "-C", "cubic", "-J"]
    assert "-C" not in iperf3_pair(ENDS, seconds=5, streams=8, congestion=None).client  # the host's default


def test_iperf3_gets_the_planes_congestion_control_unless_told_otherwise() -> None:
    plan = plan_spec(None)  # scalable-unit: management Ethernet, compute InfiniBand, storage RoCE
    assert {p.name: congestion_for(BenchRun(plane=p.name), plan) for p in plan.planes} == {
        "management": "cubic", "oob": "cubic", "compute": "cubic", "storage": "cubic"}
    assert congestion_for(BenchRun(congestion="system"), plan) is None  # no -C: each host's own
    assert congestion_for(BenchRun(congestion="bbr"), plan) == "bbr"
    assert congestion_for(BenchRun(tool="ib_write_bw"), plan) is None  # RDMA: no TCP to control
    for hostile in ("-J", "cubic; reboot", "a" * 16, ""):
        with pytest.raises(UsageError, match="--congestion"):
            congestion_for(BenchRun(congestion=hostile), plan)
    with pytest.raises(UsageError, match="no plane 'nope'"):
        congestion_for(BenchRun(plane="nope"), plan)


def test_perftest_pair_on_roce_uses_rdma_cm_and_each_ends_hca() -> None:
    pair = perftest_pair("ib_write_bw", ENDS, seconds=5, qps=4, roce=True)
    common = ["-F", "--report_gbits", "-D", "5", "-q", "4", "-s", "65536", "-p", "18518", "-R"]
    assert pair.server == ["ib_write_bw", "-d", "mlx5_3", *common, "--bind_source_ip", "10.1.0.2"]
    assert pair.client == ["ib_write_bw", "-d", "mlx5_4", *common, "10.1.0.2"]
    assert "-R" not in perftest_pair("ib_read_bw", ENDS, seconds=5, qps=4, roce=False).client


@pytest.mark.parametrize(("tool", "ends", "message"), [
    ("ib_write_lat", ENDS, "unknown perftest tool"),
    ("ib_write_bw", Endpoints(client_ip="a", server_ip="b"), "needs an RDMA device"),
])
def test_perftest_pair_refuses(tool: str, ends: Endpoints, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        perftest_pair(tool, ends, seconds=1, qps=1, roce=True)


def test_nccl_argv_for_srun_and_mpirun() -> None:
    job = NcclJob(test="all_reduce_perf", max_bytes="1G", iterations=20)
    test = ["all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "1", "-n", "20"]
    assert nccl_argv("srun", ["gpu001", "gpu002"], 8, job) == [
        "srun", "--nodes=2", "--ntasks-per-node=8", "--nodelist=gpu[001-002]", "--mpi=pmix", *test]
    assert nccl_argv("mpirun", ["gpu001", "gpu002"], 8, job) == [
        "mpirun", "-np", "16", "--host", "gpu001:8,gpu002:8", "--bind-to", "none", "-x", "NCCL_DEBUG=WARN", *test]
    with pytest.raises(UsageError, match="unknown launcher"):
        nccl_argv("pdsh", ["a"], 8, job)
    with pytest.raises(UsageError, match="unknown nccl-tests binary"):
        nccl_argv("srun", ["a"], 8, NcclJob(test="rm"))


def test_pick_launcher_needs_one_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match=r"srun.*mpirun"):
        pick_launcher({"SLURM_JOB_ID": "7"})


def _plan():  # type: ignore[no-untyped-def]
    return plan_spec(None)  # the built-in scalable unit: 8 RoCE rails with an HCA each


def test_perftest_on_a_rail_pair_uses_that_rails_addresses_and_hcas() -> None:
    plan = _plan()
    a, b = plan.nodes[0], plan.nodes[1]
    setup = BenchSetup(plan=plan, on_node=lambda n, c: list(c), tool="ib_write_bw")
    commands = pair_commands(setup, RailPair(a.name, b.name, 3))
    rail3 = {n.name: next(i for i in n.interfaces if i.plane == "compute" and i.rail == 3) for n in (a, b)}
    assert commands.client[:3] == ["ib_write_bw", "-d", rail3[a.name].hca]
    assert commands.server[:3] == ["ib_write_bw", "-d", rail3[b.name].hca]
    assert commands.client[-1] == (rail3[b.name].address or "").split("/")[0]
    assert "18518" in commands.client


def test_a_perftest_result_is_judged_against_the_rdma_line_rate() -> None:
    plan = _plan()
    a, b = plan.nodes[0].name, plan.nodes[1].name
    setup = BenchSetup(plan=plan, on_node=lambda n, c: list(c), tool="ib_write_bw")
    raw = (FIXTURES / "perftest/ib_write_bw_server_cuda_roce_16qp_gbits/output.txt").read_text()
    m = _measurement(setup, RailPair(a, b, 0), raw)
    assert m.value == 181.46 and m.rail == 0
    # NDR InfiniBand, IPoIB MTU 4092: 4096-byte packets, 400 x 4096 / (4096 + 26)
    assert rdma_efficiency("infiniband", 4092) == pytest.approx(4096 / 4122)
    assert m.expected == pytest.approx(400 * 4096 / 4122, abs=1e-5)
    assert m.status == "low"
    assert _measurement(setup, RailPair(a, b, 0), "ib_write_bw: command not found\n").status == "failed"


def test_an_nccl_job_runs_through_the_launcher_and_reads_its_table() -> None:
    plan = _plan()
    nodes = [plan.nodes[0].name, plan.nodes[1].name]
    output = (FIXTURES / "nccl_tests/all_reduce_2node_h100_root_column/output.txt").read_text()
    calls: list[list[str]] = []

    def run(argv: Sequence[str], *, stdin: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        return subprocess.CompletedProcess(list(argv), 0, output, "")

    m = run_nccl(plan, nodes, NcclJob(), "mpirun", run=run)
    assert calls[0][:3] == ["mpirun", "-np", str(2 * plan.nodes[0].gpus)]
    assert (m.metric, m.value, m.unit, m.status) == ("busbw", 70.742, "GB/s", "ok")
    failed = (FIXTURES / "nccl_tests/all_reduce_2node_failed_wrong_exponent/output.txt").read_text()
    bad = run_nccl(plan, nodes, NcclJob(), "mpirun",
                   run=lambda argv, **_: subprocess.CompletedProcess(list(argv), 0, failed, ""))
    assert bad.status == "failed"  # 108 values out of bounds: wrong results, whatever the speed


def test_a_lab_runs_iperf3_only(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot run there"):
        bench.run(BenchRun(seconds=1, tool="ib_write_bw"), plan=None, lab="zz", db=tmp_path / "b.sqlite")
    with pytest.raises(UsageError, match="unknown tool"):
        bench.run(BenchRun(seconds=1, tool="netperf"), plan=None, lab=None, db=tmp_path / "b.sqlite")


def test_a_hung_client_is_a_failed_measurement_not_the_end_of_the_run() -> None:
    plan = _plan()
    a, b = plan.nodes[0].name, plan.nodes[1].name
    hang = BenchSetup(plan=plan, on_node=lambda n, c: ["sleep", "60"] if c[0] == "iperf3" and "-c" in c else ["true"],
                      plane="management", seconds=-29)  # the client's deadline: seconds + omit + 30 = 2 s
    results = run_rounds(hang, [[(a, b)]])
    assert [(m.status, m.value) for m in results] == [("failed", 0.0)]
    assert "timed out after 2 s" in results[0].raw


def test_each_round_is_handed_over_as_it_ends(tmp_path: Path) -> None:
    """What bench.run stores round by round: an interrupted run keeps the rounds it finished."""
    plan = _plan()
    names = [n.name for n in plan.nodes[:4]]
    setup = BenchSetup(plan=plan, on_node=lambda n, c: ["true"], plane="management", seconds=1)
    handed: list[int] = []
    results = run_rounds(setup, [[(names[0], names[1]), (names[2], names[3])], [(names[0], names[2])]],
                         on_round=lambda ms: handed.append(len(ms)))
    assert handed == [2, 1] and len(results) == 3 and all(m.status == "failed" for m in results)
