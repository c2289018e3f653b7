"""iperf3 benchmarks in the lab, against the lab's plan, stored in SQLite (root; `lab` marker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunet import api
from gpunet.bench.store import history, measurements
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.state import LabState
from tests.lab.helpers import built_lab

pytestmark = pytest.mark.lab
LAB = "zm"


@pytest.fixture(scope="module")
def lab() -> Iterator[LabState]:
    with built_lab(LAB) as state:
        yield state


def test_all_pairs_in_n_minus_1_rounds_stored_with_history(lab: LabState, tmp_path: Path) -> None:
    rounds: list[int] = []
    run_id, results = api.bench(plan_source=None, lab=LAB, pattern="all-pairs", plane="compute", nodes=None,
                                seconds=3, db=tmp_path / "b.sqlite", progress=lambda done, total: rounds.append(total))
    assert rounds[-1] == 7 and len(results) == 28  # 8 servers: 7 rounds of 4 disjoint pairs
    assert {frozenset((m.source, m.destination)) for m in results} == {
        frozenset((f"gpu{a}", f"gpu{b}")) for a in range(1, 9) for b in range(a + 1, 9)}
    assert all(m.status != "failed" and m.raw for m in results)
    # Every pair, across leaves too: 4 cross-leaf pairs at once fill the 4 uplinks of a leaf exactly.
    assert all(0.85 <= m.value / (m.expected or 1) <= 1.15 for m in results), sorted(
        (round(m.percent_of_expected or 0), m.source, m.destination) for m in results)
    (latest,) = history(tmp_path / "b.sqlite", limit=1)
    assert (latest.id, latest.measurements) == (run_id, 28)
    assert len(measurements(tmp_path / "b.sqlite", run_id)) == 28


def test_a_degraded_link_flags_exactly_the_pairs_through_it(lab: LabState, tmp_path: Path) -> None:
    """Under one leaf (no ECMP in the path): gpu3's cable shaped to 40 % flags gpu3's pairs only."""
    apply_fault(LAB, "gpu3:ens1", "rate", "40mbit")
    try:
        _, results = api.bench(plan_source=None, lab=LAB, pattern="all-pairs", plane="compute", nodes="gpu[1-4]",
                               seconds=2, db=tmp_path / "b.sqlite")
    finally:
        heal(LAB)
    flagged = {frozenset((m.source, m.destination)) for m in results if m.status == "low"}
    assert flagged == {frozenset(("gpu3", other)) for other in ("gpu1", "gpu2", "gpu4")}
