"""Placement on the shipped examples: packed jobs predict at least a random placement's busbw and
cross the spines less; bad requests name what is possible."""

from __future__ import annotations

import pytest

from gpunet.errors import UsageError
from gpunet.model.plan import Plan
from gpunet.place import place
from gpunet.place.trials import trials
from gpunet.sim import SimOptions
from tests.render.rendered import example_plan

GiB = 1 << 30


def example(name: str) -> Plan:
    return example_plan(name)  # designed once per process, shared with the other modules


@pytest.fixture(scope="module")
def large() -> Plan:
    return example("multi-unit-large")


@pytest.mark.parametrize("count", [32, 256])
def test_placed_jobs_beat_or_match_random_ones(large: Plan, count: int) -> None:
    """Six seeded trials here (benchmarks/place_trials.py runs fifty): never slower than random."""
    done = trials(large, count, 6, SimOptions(sizes=(8 * GiB,)))
    assert all(t.chosen_busbw >= t.random_busbw * (1 - 1e-9) for t in done)
    assert all(t.chosen_spine_share <= t.random_spine_share for t in done)
    assert sum(t.chosen_spine_share for t in done) < sum(t.random_spine_share for t in done)


def test_a_job_that_fits_a_unit_stays_in_it(large: Plan) -> None:
    placed = place(large, 32, options=SimOptions(sizes=(8 * GiB,)))
    assert placed.units == 1 and placed.pods == 1
    assert placed.chosen.spine_share == 0
    assert placed.nodes == tuple(f"gpu{i:04d}" for i in range(1, 33))


def test_the_default_example_is_one_unit() -> None:
    """32 nodes in one scalable unit: every placement of 32 is the whole unit; 256 do not fit."""
    plan = example("scalable-unit")
    placed = place(plan, 32)
    assert placed.chosen.busbw == pytest.approx(placed.random.busbw)
    with pytest.raises(UsageError, match="ask for 1 to 32"):
        place(plan, 256)


def test_free_nodes_must_be_on_the_plane(large: Plan) -> None:
    with pytest.raises(UsageError, match="gpu9999"):
        place(large, 2, ["gpu0001", "gpu9999"])
    with pytest.raises(UsageError, match="does not fit the 2 free"):
        place(large, 3, ["gpu0001", "gpu0002"])
