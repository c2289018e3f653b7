"""`compare`'s reference job: simulated busbw per design, healthy and after the worst failure."""

from __future__ import annotations

import pytest

from gpunet.decide.compare import compare
from gpunet.decide.reference import ReferenceJob, reference_busbw
from gpunet.design import design
from gpunet.sim import SimOptions
from tests.specs import rail_spec

GiB = 1 << 30


def test_an_oversubscribed_design_reads_slower_in_job_time() -> None:
    """An all-to-all over three units of 42 (at 2:1: 42 down, 21 up) sends two thirds of its bytes
    across the spines, more than the uplinks carry; at 1:1 (four units of 32) the uplinks keep up.
    The failure rows name an element."""
    job = ReferenceJob(nodes=126, options=SimOptions(collective="alltoall", sizes=(GiB,), routing="spray",
                                                     connections=1))
    one = design(rail_spec(126, radix=64, rails=2))
    two = design(rail_spec(126, radix=64, rails=2, oversubscription={"leaf": 2}))
    result = compare([("1:1", one), ("2:1", two)], reference=job)
    first, second = result.references
    assert first is not None and second is not None
    assert second.busbw < first.busbw * 0.95
    assert first.worst_busbw is not None and first.worst_busbw < first.busbw
    assert first.worst_element and first.worst_element.startswith(("comp-", "gpu"))
    row = next(r for r in result.rows if r.metric.startswith("alltoall"))
    assert row.differs and "GB/s on 126 nodes" in row.values[0]


def test_no_reference_job_when_asked_for_none() -> None:
    plan = design(rail_spec(4, radix=16))
    assert compare([("a", plan), ("b", plan)], reference=None).references == ()
    found = reference_busbw(plan, ReferenceJob(nodes=4))
    assert found is not None and found.busbw == pytest.approx(found.busbw) and found.nodes == 4
