"""iperf3 benchmarks in the lab, against the lab's plan, stored in SQLite (root; `lab` marker). The
lab's servers share the host's CPUs: a pair measured while the host is saturated is inconclusive."""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from gpunet.api import bench
from gpunet.api.bench import BenchRun
from gpunet.bench.health import CPU_PRESSURE_LIMIT
from gpunet.bench.store import Measurement, history, measurements
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.state import LabState
from tests.lab.helpers import server_process
from tests.labs import shared_lab, shared_lab_id

pytestmark = [pytest.mark.lab, pytest.mark.slow]
LAB = shared_lab_id("small")


lab = shared_lab("small")


def test_all_pairs_in_n_minus_1_rounds_stored_with_history(lab: LabState, tmp_path: Path) -> None:
    said: list[str] = []
    outcome = bench.run(BenchRun(pattern="all-pairs", seconds=3), plan=None, lab=LAB, db=tmp_path / "b.sqlite",
                        progress=lambda done, total, what: said.append(what))
    run_id, results = outcome.run_id, outcome.measurements
    assert outcome.congestion == "cubic"  # the compute plane's choice in the Plan
    assert [w for w in said if w.startswith("round ")][-1] == "round 7/7: 4 pairs" and len(results) == 28
    assert {frozenset((m.source, m.destination)) for m in results} == {
        frozenset((f"gpu{a}", f"gpu{b}")) for a in range(1, 9) for b in range(a + 1, 9)}
    assert all(m.status != "failed" and m.raw for m in results)
    # Both ends' CPUs read over every window (this kernel has PSI).
    assert all([h.role for h in m.health] == ["client", "server"] and all(h.cpu_pressure is not None
                                                                          for h in m.health) for m in results)
    # Contention from the machine itself makes a pair inconclusive, never low, and the retry round
    # measures it again alone: it stays inconclusive only if the host was saturated then too.
    retried = [m for m in results if m.attempts > 1]
    stuck = [m for m in results if m.status == "inconclusive"]
    print(f"idle lab: {len(retried)} retried, {len(stuck)} still inconclusive")  # shown with -s
    assert all(m.reason and "again on attempt 2: " in m.reason for m in stuck), [m.reason for m in stuck]
    # Every pair, across leaves too: 4 cross-leaf pairs at once fill the 4 uplinks of a leaf exactly.
    assert all(m.status == "ok" and 0.85 <= m.value / (m.expected or 1) <= 1.15 for m in results if m not in stuck), \
        sorted((round(m.percent_of_expected or 0), m.status, m.source, m.destination) for m in results)
    (latest,) = history(tmp_path / "b.sqlite", limit=1)
    assert (latest.id, latest.measurements, latest.plane, latest.inconclusive) == (run_id, 28, "compute", len(stuck))
    assert sorted(measurements(tmp_path / "b.sqlite", run_id), key=str) == sorted(results, key=str)


def test_a_saturated_server_makes_its_pairs_inconclusive_never_low(lab: LabState, tmp_path: Path) -> None:
    """A CPU burner a core inside gpu3 during all-pairs of gpu[1-4]: gpu3's pairs are never low; each is
    inconclusive (measured again) or, where it still reached the expected rate, ok, and either way says
    gpu3's load; the host's other pairs meanwhile too (the lab's servers share its CPUs)."""
    with ExitStack() as burners:
        for _ in range(os.cpu_count() or 1):
            burners.enter_context(server_process(LAB, "gpu3", "sh", "-c", "while :; do :; done"))
        time.sleep(0.5)  # burning before the first window opens
        results = bench.run(BenchRun(pattern="all-pairs", nodes="gpu[1-4]", seconds=1), plan=None, lab=LAB,
                            db=tmp_path / "b.sqlite").measurements
    statuses = sorted((m.status, m.attempts, m.source, m.destination) for m in results)
    print(f"saturated lab: {statuses}")  # shown with -s
    assert len(results) == 6 and not [m for m in results if m.status in ("low", "failed")], statuses
    of_gpu3 = [m for m in results if "gpu3" in (m.source, m.destination)]
    assert len(of_gpu3) == 3 and all(m.status == "ok" or (m.status == "inconclusive" and m.attempts == 2)
                                     for m in of_gpu3), statuses
    for m in of_gpu3:  # gpu3's own end named, by its CPU pressure or its busy CPUs
        (end,) = [h for h in m.health if h.node == "gpu3"]
        why = end.saturation()
        assert why and m.reason and why in m.reason and why.startswith(f"{end.role} gpu3: ")
        assert (end.cpu_pressure or 0) >= CPU_PRESSURE_LIMIT or (end.busy or 0) >= 0.95


def test_a_degraded_link_flags_exactly_the_pairs_through_it(lab: LabState, tmp_path: Path) -> None:
    """Under one leaf (no ECMP in the path): gpu3's cable shaped to 40 % flags gpu3's pairs only. On a
    loaded host a pair may be left inconclusive (an end saturated, said with its figure, even when
    measured again): so each pair through the link is low or inconclusive for a saturated end, never
    ok, and no other pair is ever low; how many are judged depends on the load."""
    apply_fault(LAB, "gpu3:ens1", "rate", "40mbit")
    try:
        results = bench.run(BenchRun(pattern="all-pairs", nodes="gpu[1-4]", seconds=2), plan=None, lab=LAB,
                            db=tmp_path / "b.sqlite").measurements
    finally:
        heal(LAB)
    through_gpu3 = {frozenset(("gpu3", other)) for other in ("gpu1", "gpu2", "gpu4")}
    shown = sorted((m.status, m.source, m.destination, m.reason or "") for m in results)
    assert len(results) == 6, shown
    for m in results:
        if frozenset((m.source, m.destination)) in through_gpu3:  # low, or not judged for a saturated end
            assert m.status == "low" or (m.status == "inconclusive" and _saturation_said(m)), shown
        else:  # never blamed on the degraded link
            assert m.status != "low", shown


def _saturation_said(m: Measurement) -> bool:
    """The measurement's reason names an end's saturation, with the figure that shows it."""
    return any(h.saturation() and h.saturation() in (m.reason or "") for h in m.health)
