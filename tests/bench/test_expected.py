"""Expected rates from the Plan, and the SQLite store, without a lab."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunet.bench import pair_interfaces
from gpunet.bench.expected import tcp_efficiency, tcp_expected_gbps
from gpunet.bench.store import Measurement, history, measurements, save_run
from gpunet.errors import UsageError
from tests.render.rendered import example_plan


def test_tcp_efficiency_at_common_mtus() -> None:
    assert tcp_efficiency(9000) == pytest.approx((9000 - 52) / (9000 + 38))  # 0.990
    assert tcp_efficiency(1500) == pytest.approx(1448 / 1538)  # 0.941


def test_expected_rate_is_the_slower_end_at_tcp_efficiency() -> None:
    plan = example_plan("small-ethernet")
    ends = pair_interfaces(plan, "compute", ("node01", "node02"))
    assert tcp_expected_gbps(*ends) == pytest.approx(25 * tcp_efficiency(9000))
    shaped = tcp_expected_gbps(*ends, scale=1.0)  # the lab: 25 Mbit/s per 25G
    assert shaped == pytest.approx(0.025 * (9000 - 52) / (9000 + 14))
    with pytest.raises(UsageError, match="no address on the compute plane"):
        pair_interfaces(plan, "compute", ("stor01", "node01"))


def test_runs_and_measurements_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    rows = [Measurement(source="a", destination="b", plane="compute", metric="throughput", value=9.0, unit="Gb/s",
                        expected=10.0, status="ok", raw="{}"),
            Measurement(source="a", destination="c", plane="compute", metric="throughput", value=4.0, unit="Gb/s",
                        expected=10.0, status="low", raw="{}")]
    first = save_run(db, plan_hash="h", tool="iperf3", pattern="pair", arguments="", measurements=rows[:1])
    second = save_run(db, plan_hash="h", tool="iperf3", pattern="all-pairs", arguments="", measurements=rows)
    assert [(r.id, r.measurements, r.flagged) for r in history(db)] == [(second, 2, 1), (first, 1, 0)]
    assert measurements(db, second) == rows
    assert rows[1].percent_of_expected == pytest.approx(40.0)
