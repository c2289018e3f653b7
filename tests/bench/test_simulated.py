"""`bench compare --simulated`: a stored iperf3 run against the simulation of its own rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunet.api import load_plan
from gpunet.bench import pattern_rounds
from gpunet.bench.simulated import compare_simulated
from gpunet.bench.store import Measurement, add_measurements, start_run
from gpunet.design import design
from gpunet.errors import UsageError
from gpunet.sim.fabric import read_fabric
from gpunet.sim.pairs import pair_rates
from tests.specs import rail_spec

EXPECTED = 396.0  # a 400G line times TCP efficiency, as bench's expectation would give it


def stored(db: Path, pattern: str, nodes: str, values: dict[tuple[str, str], float]) -> int:
    run = start_run(db, plan_hash="x", tool="iperf3", pattern=pattern,
                    arguments=f"plane=compute seconds=3 nodes={nodes}")
    add_measurements(db, run, [Measurement(source=s, destination=d, plane="compute", metric="throughput", value=v,
                                           unit="Gb/s", expected=EXPECTED, status="ok")
                               for (s, d), v in values.items()])
    return run


def test_measured_pairs_meet_their_simulation(tmp_path: Path) -> None:
    plan = load_plan(None)
    rounds = pattern_rounds(plan, "compute", "all-pairs", ["gpu001", "gpu002", "gpu003", "gpu004"])
    values = {pair: EXPECTED * 0.99 for r in rounds for pair in r}
    slow = rounds[0][0]
    values[slow] = EXPECTED * 0.5
    rows = compare_simulated(tmp_path / "b.sqlite", stored(tmp_path / "b.sqlite", "all-pairs", "gpu[001-004]", values),
                             plan)
    verdicts = {(r.source, r.destination): r.verdict for r in rows}
    assert verdicts.pop(slow) == "fail"
    assert set(verdicts.values()) == {"ok"}
    assert all(r.baseline == pytest.approx(EXPECTED) for r in rows)  # one unit: every pair at line rate


def test_pairs_sharing_an_uplink_are_predicted_below_line_rate() -> None:
    """Two units at 3:1 (48 down, 16 up): 48 pairs across at once get a third of a line each."""
    plan = design(rail_spec(96, radix=64, rails=1, oversubscription={"leaf": 3}))
    fabric = read_fabric(plan)
    pairs = [(f"gpu{i:05d}", f"gpu{i + 48:05d}", 0) for i in range(1, 49)]
    rates = pair_rates(fabric, pairs, connections=32, routing="spray").pairs
    assert rates == pytest.approx([400 / 3] * 48, rel=0.01)


def test_only_iperf3_runs_compare_with_a_simulation(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    run = start_run(db, plan_hash="x", tool="nccl", pattern="job", arguments="plane=compute seconds=3 nodes=all")
    with pytest.raises(UsageError, match="gpunet sim"):
        compare_simulated(db, run, load_plan(None))
