"""Closed forms the simulator must meet, property-tested: a ring all-reduce on a non-blocking fabric
runs at the NICs' rate; progressive filling is max-min fair; an r:1 leaf divides cross-leaf
traffic by r."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpunet.design import design
from gpunet.model.spec import Spec
from gpunet.sim import SimOptions, simulate
from gpunet.sim.maxmin import Incidence, bottlenecks, max_min_rates
from tests.specs import rail_spec

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
HUGE = 1 << 40  # a message large enough that the latency term is under 0.1 %


def spine_leaf_spec(nodes: int, ratio: int, nics: int = 1, speed: str = "400G") -> Spec:
    return Spec.model_validate({
        "site": {"name": "t"},
        "planes": {"compute": {
            "subnet": "10.0.0.0/16", "technology": "roce", "speed": speed,
            "fabric": {"style": "spine-leaf", "switch": {"model": "sw-16", "radix": 16, "port_speed": "400G"},
                       "oversubscription": {"leaf": ratio, "spine": 1}},
        }},
        "groups": [{"name": "gpu", "nodes": f"g[001-{nodes:03d}]", "gpus": 8, "gpu_model": "H100-SXM5",
                    "nics": {"compute": {"count": nics}}}],
    })


@SETTINGS
@given(nodes=st.integers(2, 40), rails=st.sampled_from([1, 2, 4, 8]), routing=st.sampled_from(["hash", "spray"]),
       seed=st.integers(0, 2**16))
def test_ring_all_reduce_on_a_non_blocking_fabric_runs_at_the_nic_rate(nodes: int, rails: int, routing: Any,
                                                                       seed: int) -> None:
    """Rails each under one leaf per unit, at 1:1: every rail's ring stays on its leaf within a unit
    and crosses spines only between units; the job's busbw is R x line rate (400G = 50 GB/s)."""
    plan = design(rail_spec(nodes, radix=16, rails=rails))
    options = SimOptions(sizes=(HUGE,), routing=routing, seed=seed)
    report = simulate(plan, options=options)
    expected = rails * 400 / 8
    assert abs(report.nonblocking_busbw - expected) / expected < 0.01  # type: ignore[operator]
    if routing == "spray":
        assert abs(report.busbw - expected) / expected < 0.01
    assert report.busbw <= expected * 1.0001


@SETTINGS
@given(nodes=st.integers(2, 16), speed=st.sampled_from(["100G", "200G", "400G"]), nics=st.sampled_from([1, 2]))
def test_ring_on_one_switch_runs_at_the_nic_rate(nodes: int, speed: str, nics: int) -> None:
    spec = spine_leaf_spec(nodes, 1, nics, speed).model_dump()
    spec["planes"]["compute"]["fabric"] = {"style": "single-switch",
                                           "switch": {"model": "sw-64", "radix": 64, "port_speed": "400G"}}
    report = simulate(design(Spec.model_validate(spec)), options=SimOptions(sizes=(HUGE,)))
    expected = nics * int(speed.removesuffix("G")) / 8
    assert abs(report.busbw - expected) / expected < 0.01


@st.composite
def flow_sets(draw: st.DrawFn) -> tuple[Incidence, np.ndarray]:
    resources = draw(st.integers(1, 12))
    capacity = np.asarray(draw(st.lists(st.floats(0.5, 1000), min_size=resources, max_size=resources)))
    paths = draw(st.lists(st.sets(st.integers(0, resources - 1), min_size=1, max_size=resources),
                          min_size=1, max_size=40))
    flow = np.asarray([f for f, p in enumerate(paths) for _ in p], dtype=np.int64)
    resource = np.asarray([r for p in paths for r in sorted(p)], dtype=np.int64)
    return Incidence(flow, resource, np.ones(flow.size), len(paths)), capacity


@settings(max_examples=200, deadline=None, derandomize=True)
@given(flow_sets())
def test_progressive_filling_is_max_min_fair(case: tuple[Incidence, np.ndarray]) -> None:
    incidence, capacity = case
    rate = max_min_rates(incidence, capacity)
    load = np.bincount(incidence.resource, weights=rate[incidence.flow], minlength=capacity.size)
    assert np.all(load <= capacity * (1 + 1e-9))  # no cable over capacity
    assert np.all(rate > 0)
    assert np.all(bottlenecks(incidence, capacity, rate) >= 0)  # each flow: a full cable where it is largest


@SETTINGS
@given(ratio=st.sampled_from([1, 2, 3, 4]), routing=st.sampled_from(["spray"]))
def test_oversubscribed_leaf_divides_cross_leaf_traffic(ratio: int, routing: Any) -> None:
    """Every node of a full leaf sends to one under another leaf: each gets the NIC rate over the
    plan's oversubscription (down Gb/s over up Gb/s of the leaf)."""
    plan = design(spine_leaf_spec(24, ratio))
    leaves: dict[str, list[str]] = {}
    for link in plan.links:
        if link.plane == "compute" and link.tier == "node_leaf":
            leaves.setdefault(link.b.device, []).append(link.a.device)
    first, second = list(leaves.values())[:2]
    pairs = tuple((a, b, None) for a, b in zip(first, second, strict=False))
    options = SimOptions(collective="sendrecv", pairs=pairs, sizes=(HUGE,), routing=routing)
    report = simulate(plan, options=options)
    down = len(leaves[next(iter(leaves))]) * 400
    up = sum(c.gbps for c in plan.links if c.tier == "leaf_spine" and c.a.device == next(iter(leaves)))
    oversubscription = max(1.0, down / up)
    assert len(first) == len(second) == len(pairs)
    expected = 400 / 8 / oversubscription
    assert abs(report.busbw - expected) / expected < 0.01
    stated = next(c for c in plan.capacity if c.plane == "compute").oversubscription["leaf"]
    assert abs(stated - down / up) < 0.01


def test_weighted_filling_shares_a_bottleneck_by_speed() -> None:
    """Two flows on one link at speeds 1 and 3 end at a quarter and three quarters of it; a third
    flow alone on another link still fills it."""
    incidence = Incidence(np.asarray([0, 1, 2]), np.asarray([0, 0, 1]), np.ones(3), 3)
    rate = max_min_rates(incidence, np.asarray([100.0, 40.0]), speed=np.asarray([1.0, 3.0, 0.5]))
    assert rate == pytest.approx([25.0, 75.0, 40.0])
