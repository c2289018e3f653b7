"""One Plan's answer kept while that same Plan is asked again: `gpunet plan` wants its failures
and headroom for summary.md and again for the terminal (2.5 s each at 12 500 nodes)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from gpunet.model.plan import Plan

R = TypeVar("R")


def last_plan(compute: Callable[[Plan], R]) -> Callable[[Plan], R]:
    """`compute` once per Plan object: a Plan is frozen, so the same object has the same answer.
    Only the last one is held (a strong reference, so its id cannot be reused meanwhile)."""
    held: list[tuple[Plan, R]] = []

    @functools.wraps(compute)
    def cached(plan: Plan) -> R:
        if held and held[0][0] is plan:
            return held[0][1]
        result = compute(plan)
        held[:] = [(plan, result)]
        return result

    return cached
