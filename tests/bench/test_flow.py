"""Pause/ECN/CNP counters around a pair: the growth between two recorded samples, a low pair with pause
growth reported `congested` ("flow control") and not `low`, kept in SQLite (a database from before the
counters loads and gains the column), and told apart by compare and the heat map."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gpunet.bench.compare import Rules, compare
from gpunet.bench.flow import CONGESTED, EndCounters, end_counters, end_devices, flow_verdict
from gpunet.bench.heatmap import STATUS_RANK, cell_colours, percent_matrix
from gpunet.bench.store import Measurement, history, measurements, save_run
from tests.checks.rdma_specs import rdma_plan

FIXTURES = Path(__file__).parent.parent / "fixtures"


def sample(case: str, device: str = "ens0np0") -> str:
    """A recorded mlx5 `ethtool -S` as the flow sample prints it for one device."""
    return f"@ethtool {device}\n" + (FIXTURES / "ethtool_stats" / case / "output.txt").read_text()


BEFORE = sample("mlx5_xdp_kernel5.15_zero_counters_removed")
AFTER = sample("mlx5_xdp_kernel6.5_zero_counters_removed")


def low(counters: tuple[EndCounters, ...] = ()) -> Measurement:
    return Measurement(source="gpu01", destination="gpu02", plane="compute", metric="throughput", value=60.0,
                       unit="Gb/s", expected=100.0, status="low", counters=counters)


def test_recorded_counters_replayed_show_pause_growth() -> None:
    """Two recorded samples of one mlx5 port (its 5.15 and 6.5 runs), replayed as before and after."""
    end = end_counters("gpu02", "server", BEFORE, AFTER)
    assert end.growth["ens0np0:tx_pause_ctrl_phy"] == 44414017 - 5745055
    assert end.growth["ens0np0:tx_global_pause"] == 44414017 - 5745042
    status, reason = flow_verdict("low", None, (end,))
    assert status == CONGESTED and reason is not None and reason.startswith("flow control: gpu02 ")


def test_cnp_growth_without_pause_is_congestion() -> None:
    before = "@file /sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent 10\n@ethtool ens0np0\n"
    after = "@file /sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent 250\n@ethtool ens0np0\n"
    end = end_counters("gpu01", "client", before, after)
    assert flow_verdict("low", None, (end,)) == (CONGESTED, "congestion: gpu01 mlx5_0/1:np_cnp_sent +240 "
                                                            "(ECN marks / CNPs: senders were slowed)")


def test_only_a_low_pair_is_explained_by_its_counters() -> None:
    end = end_counters("gpu02", "server", BEFORE, AFTER)
    for status in ("ok", "failed", "inconclusive"):
        assert flow_verdict(status, "why", (end,)) == (status, "why")
    quiet = end_counters("gpu02", "server", BEFORE, BEFORE)
    assert quiet.growth == {} and flow_verdict("low", None, (quiet,)) == ("low", None)


def test_the_older_mlx5_driver_is_read_not_called_unreadable() -> None:
    """A port on the older mlx5 driver (pause as pause_ctrl_rx/tx) is sampled, not "no flow-control
    counter": the same recorded output before and after grew nothing, so a low pair stays low."""
    legacy = sample("cx4lx_kernel4.4_legacy_names_no_per_priority")
    end = end_counters("gpu02", "server", legacy, legacy)
    assert (end.unreadable, end.growth) == (None, {})
    assert flow_verdict("low", None, (end,)) == ("low", None)


def test_counters_that_cannot_be_read_are_said_so() -> None:
    assert end_counters("gpu01", "client", None, AFTER).unreadable == "could not read the flow counters on gpu01"
    assert "no flow-control counter" in (end_counters("gpu01", "client", "@ethtool eth0\n", "@ethtool eth0\n")
                                         .unreadable or "")


def test_the_sampled_devices_are_the_pairs_ports() -> None:
    plan = rdma_plan("roce")
    iface = next(i for i in plan.node("gpu01").interfaces if i.rail == 3)  # type: ignore[union-attr]
    assert end_devices(plan, iface) == (["ens3np0"], ["mlx5_3"])


def test_congested_pairs_are_stored_with_their_counters(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    end = end_counters("gpu02", "server", BEFORE, AFTER)
    status, reason = flow_verdict("low", None, (end,))
    congested = low((end,)).model_copy(update={"status": status, "reason": reason})
    run = save_run(db, plan_hash="h", tool="iperf3", pattern="pair", arguments="plane=compute",
                   measurements=[congested])
    assert measurements(db, run) == [congested]
    assert [(r.flagged, r.congested) for r in history(db)] == [(0, 1)]


def test_a_database_from_before_counters_loads_and_gains_the_column(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite"
    with sqlite3.connect(db) as old:
        old.executescript(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT NOT NULL, plan_hash TEXT NOT NULL, "
            "tool TEXT NOT NULL, pattern TEXT NOT NULL, arguments TEXT NOT NULL);"
            "CREATE TABLE measurements (run_id INTEGER NOT NULL, source TEXT NOT NULL, destination TEXT NOT NULL, "
            "plane TEXT NOT NULL, metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL, expected REAL, "
            "status TEXT NOT NULL, raw TEXT NOT NULL, rail INTEGER, health TEXT, reason TEXT, "
            "attempts INTEGER NOT NULL DEFAULT 1, cell INTEGER);"
            "INSERT INTO runs VALUES (1, 't', 'h', 'iperf3', 'pair', 'plane=compute');"
            "INSERT INTO measurements VALUES (1, 'gpu01', 'gpu02', 'compute', 'throughput', 60.0, 'Gb/s', 100.0, "
            "'low', '', NULL, '[]', NULL, 1, NULL);")
    old.close()
    assert measurements(db, 1) == [low()]
    save_run(db, plan_hash="h", tool="iperf3", pattern="pair", arguments="plane=compute", measurements=[low()])
    with sqlite3.connect(db) as upgraded:
        assert "counters" in {row[1] for row in upgraded.execute("PRAGMA table_info(measurements)")}
    upgraded.close()


def test_compare_and_the_heat_map_show_congested_apart() -> None:
    baseline = low().model_copy(update={"value": 98.0, "status": "ok"})
    congested = low().model_copy(update={"status": CONGESTED, "reason": "flow control: gpu02 x +5"})
    [pair] = compare([baseline], [congested], Rules.model_validate({"rules": [{"metric": "*", "fail_below": -0.1}]}))
    assert (pair.verdict, pair.reason) == ("congested", "current: flow control: gpu02 x +5")
    [slow] = compare([baseline], [low()], Rules.model_validate({"rules": [{"metric": "*", "fail_below": -0.1}]}))
    assert slow.verdict == "fail"
    matrix = percent_matrix([congested, low().model_copy(update={"source": "gpu03"})])
    assert matrix.status[matrix.names.index("gpu01")][matrix.names.index("gpu02")] == CONGESTED
    assert STATUS_RANK["inconclusive"] < STATUS_RANK[CONGESTED] < STATUS_RANK["low"]
    colours = cell_colours([[60.0, 60.0]], [[STATUS_RANK[CONGESTED], STATUS_RANK["low"]]])
    assert colours[0][0].tolist() != colours[0][1].tolist()


def test_busbw_under_sharp_is_the_algorithm_bandwidth() -> None:
    """A recorded all_reduce_perf table; with a CollNet line added (constructed, in the form NCCL prints a
    CollNet channel: no recorded log with CollNet was found) the busbw becomes the mean algbw."""
    from gpunet.bench.nccl import parse_nccl_tests  # noqa: PLC0415
    from gpunet.bench.sharp import busbw_of  # noqa: PLC0415
    raw = (FIXTURES / "nccl_tests" / "all_reduce_2node_h100_root_column" / "output.txt").read_text()
    result = parse_nccl_tests(raw)
    assert busbw_of(result, raw) == (result.avg_busbw_gbs, None)
    line = "gpu01:523:564 [0] NCCL INFO CollNet 00/0 : 0 [receive] via COLLNET/IB/0/GDRDMA\n"
    value, why = busbw_of(result, line + raw)
    algbw = [t.algbw_gbs for r in result.rows for t in (r.out_of_place, r.in_place) if t]
    assert value == round(sum(algbw) / len(algbw), 3) and why and why.startswith("CollNet/SHARP reduced")
