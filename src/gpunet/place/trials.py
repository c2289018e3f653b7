"""Seeded trials of `place` against random placements: each trial frees a random share of the
plane's GPU nodes, places a job, and draws as many free nodes at random (ranks in name order, as
Slurm lists them), both simulated with the same routing seed."""

from __future__ import annotations

import random
from collections.abc import Callable

from gpunet.model.base import Frozen
from gpunet.model.plan import Plan
from gpunet.place.choose import place
from gpunet.sim.fabric import read_fabric
from gpunet.sim.simulate import SimOptions


class Trial(Frozen):
    seed: int
    free: int
    chosen_busbw: float
    random_busbw: float
    chosen_spine_share: float
    random_spine_share: float
    units: int


def trials(plan: Plan, count: int, runs: int, options: SimOptions | None = None, *,
           free_share: tuple[float, float] = (0.4, 0.9), progress: Callable[[int], None] | None = None) -> list[Trial]:
    """`runs` trials of a `count`-node job; trial i is seeded with i (free set, random draw, hashing)."""
    options = options or SimOptions()
    fabric = read_fabric(plan, options.plane)
    gpus = sorted(n for n in fabric.nics if fabric.gpus.get(n, 0) > 0) or sorted(fabric.nics)
    done = []
    for seed in range(runs):
        rng = random.Random(seed)
        share = rng.uniform(*free_share)
        free = rng.sample(gpus, max(count, round(share * len(gpus))))
        placed = place(plan, count, free, options.model_copy(update={"seed": seed}), seed=seed)
        done.append(Trial(seed=seed, free=len(free), chosen_busbw=placed.chosen.busbw,
                          random_busbw=placed.random.busbw, chosen_spine_share=placed.chosen.spine_share,
                          random_spine_share=placed.random.spine_share, units=placed.units))
        if progress is not None:
            progress(seed + 1)
    return done
