"""Max-min fair rates by progressive filling: every unfrozen flow's rate rises together until a
resource fills; the flows crossing it freeze at their rate; repeat until every flow is frozen.

The result is the max-min fair allocation: no resource carries more than its capacity, and every
flow crosses a full resource on which no other flow has a larger rate (its bottleneck). Flows may
cross a resource with a weight (a fraction of them, as ideal spraying splits a flow over paths).

Sparse and vectorised: a flow-resource incidence of three arrays, one pass of numpy per fill
level, and the incidence shrinks as flows freeze."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPSILON = 1e-9  # a resource with less than this fraction of its capacity left is full


@dataclass(frozen=True)
class Incidence:
    """Flow f crosses resource r with weight w, one entry per (f, r)."""

    flow: np.ndarray  # int64
    resource: np.ndarray  # int64
    weight: np.ndarray  # float64
    flows: int


def max_min_rates(incidence: Incidence, capacity: np.ndarray, speed: np.ndarray | None = None) -> np.ndarray:
    """Each flow's max-min fair rate, in capacity's units. A flow crossing no resource of finite
    capacity is unbounded (inf); one crossing a resource of capacity 0 gets 0. With `speed` (per
    flow), rates rise in proportion to it: weighted max-min, where flows that share a bottleneck
    end with rates in the ratio of their speeds."""
    rate = np.zeros(incidence.flows)
    pace = np.ones(incidence.flows) if speed is None else np.asarray(speed, dtype=np.float64)
    frozen = np.zeros(incidence.flows, dtype=bool)
    crossing = np.zeros(incidence.flows, dtype=bool)
    crossing[incidence.flow] = True
    rate[~crossing] = np.inf
    remaining = capacity.astype(np.float64).copy()
    flow, resource, weight = incidence.flow, incidence.resource, incidence.weight
    while flow.size:
        load = np.bincount(resource, weights=weight * pace[flow], minlength=remaining.size)
        used = load > 0
        step = float(np.min(remaining[used] / load[used]))
        step = max(step, 0.0)
        rising = ~frozen & crossing
        rate[rising] += step * pace[rising]
        remaining -= step * load
        full = used & (remaining <= EPSILON * np.maximum(capacity, 1.0))
        newly = np.unique(flow[full[resource]])
        frozen[newly] = True
        keep = ~frozen[flow]
        flow, resource, weight = flow[keep], resource[keep], weight[keep]
    return rate


def bottlenecks(incidence: Incidence, capacity: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Per flow, one full resource on which it has the largest rate (-1 where none: a sign the
    allocation is not max-min fair, which tests look for)."""
    load = np.bincount(incidence.resource, weights=incidence.weight * rate[incidence.flow], minlength=capacity.size)
    full = load >= capacity * (1 - 1e-6)
    top = np.full(capacity.size, -np.inf)
    np.maximum.at(top, incidence.resource, rate[incidence.flow])
    good = full[incidence.resource] & (rate[incidence.flow] >= top[incidence.resource] * (1 - 1e-6))
    result = np.full(incidence.flows, -1, dtype=np.int64)
    result[incidence.flow[good]] = incidence.resource[good]
    return result
