"""What the perftest and nccl-tests results mean: units to Gb/s, warnings, wrong results."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunet.bench.nccl import parse_nccl_tests
from gpunet.bench.perftest import parse_perftest

FIXTURES = Path(__file__).parent.parent / "fixtures"


def _perftest(case: str):  # type: ignore[no-untyped-def]
    return parse_perftest((FIXTURES / "perftest" / case / "output.txt").read_text())


def test_mb_per_second_is_mebibytes() -> None:
    """QDR InfiniBand: 40 Gb/s signalling, 32 Gb/s of data after 8b/10b; perftest's 3665.25 MB/s
    (2^20 bytes) is 30.75 Gb/s, 96 % of it. Read as 10^6 bytes it would be 29.3."""
    result = _perftest("ib_write_bw_sweep_mlx4_ib_old")
    assert result.gbps(result.rows[-1].bw_average) == pytest.approx(30.747, abs=1e-3)


def test_gbits_are_taken_as_printed() -> None:
    result = _perftest("ib_write_bw_server_cuda_roce_16qp_gbits")
    assert result.gbps(result.rows[0].bw_average) == 181.46
    assert result.gbps(result.rows[0].bw_peak) == 0.0  # -D runs print no peak


def test_warnings_are_picked_from_the_chatter() -> None:
    result = _perftest("ib_write_bw_server_cuda_roce_16qp_gbits")
    assert "initializing CUDA" in result.notes
    assert result.warnings == ("WARNING: BW peak won't be measured in this run.",
                               "Perftest doesn't supports CUDA tests with inline messages: inline size set to 0",
                               "Requested mtu is higher than active mtu", "Changing to active mtu - 3")


def test_latency_has_no_bandwidth_unit() -> None:
    result = _perftest("ib_write_lat_sweep_mlx4_ib_old")
    assert result.kind == "lat" and result.unit is None and result.gbps(1.0) is None
    assert result.rows[0].p99_9_us == 5.42


@pytest.mark.parametrize(("case", "ok"), [("all_reduce_2node_h100_root_column", True),
                                         ("all_reduce_2node_failed_wrong_exponent", False),
                                         ("alltoall_v2_18_3_inplace_na_mpi_noise", True)])
def test_wrong_results_fail_the_run(case: str, ok: bool) -> None:
    assert parse_nccl_tests((FIXTURES / "nccl_tests" / case / "output.txt").read_text()).ok is ok


def test_a_wrong_count_in_exponent_form_is_a_number() -> None:
    result = parse_nccl_tests((FIXTURES / "nccl_tests/all_reduce_2node_failed_wrong_exponent/output.txt").read_text())
    assert max(r.out_of_place.wrong or 0 for r in result.rows if r.out_of_place) > 1_000_000
    assert result.out_of_bounds == 108
