"""A reference job's simulated busbw per design, healthy and after the worst failure, so designs
compare in job time as well as in cost and bisection.

The job (configurable): a ring all-reduce of 8 GiB over the fabric plane's first 256 GPU nodes
by name (all of them on a smaller plane), two connections per peer and rail, static ECMP hashing.
"After the worst failure": the worst leaf, spine, core and cable of that plane by the failure
analysis (decide/failures.py), each simulated down; the one that slows the job most is reported."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from gpunet.decide.failures import PlaneFailures, plan_failures
from gpunet.model.base import Frozen, bulk_objects
from gpunet.model.plan import Plan
from gpunet.sim.fabric import default_plane, read_fabric
from gpunet.sim.simulate import SimOptions, simulate_on

GiB = 1 << 30


class ReferenceJob(Frozen):
    options: SimOptions = SimOptions(sizes=(8 * GiB,))
    nodes: int = Field(256, ge=1)  # the plane's first GPU nodes by name

    @property
    def text(self) -> str:
        o = self.options
        algorithm = f" {o.algorithm}" if o.collective == "all_reduce" else ""
        return f"{o.collective}{algorithm} {o.sizes[-1] / GiB:g} GiB"


class ReferenceResult(Frozen):
    plane: str
    job: str
    nodes: int
    busbw: float  # GB/s
    vs_nonblocking: float | None
    worst_busbw: float | None  # after the worst failure (None: the analysis named none)
    worst_element: str | None


def reference_busbw(plan: Plan, job: ReferenceJob | None = None,
                    failures: Sequence[PlaneFailures] | None = None) -> ReferenceResult | None:
    """The reference job on the plan, healthy and after the worst failure; None when the plan has
    no switched plane or no node on it. `failures`: the plan's failure analysis where the caller has
    it already (compare does; at 100k GPUs it costs seconds)."""
    job = job or ReferenceJob()
    if not plan.capacity:
        return None
    with bulk_objects():
        plane = job.options.plane or default_plane(plan)
        fabric = read_fabric(plan, plane)
        gpus = sorted(n for n in fabric.nics if fabric.gpus.get(n, 0) > 0) or sorted(fabric.nics)
        if len(gpus) < 2:
            return None
        nodes = gpus[:job.nodes]
        healthy = simulate_on(fabric, nodes, job.options, "healthy")
        analysis = next((f for f in (failures if failures is not None else plan_failures(plan)) if f.plane == plane),
                        None)
        worst = [(simulate_on(fabric.with_down([i.name]), nodes, job.options, i.name, against_nonblocking=False).busbw,
                  i.name)
                 for i in (analysis.impacts if analysis else ())]
    slowest = min(worst, default=None)
    return ReferenceResult(plane=plane, job=job.text, nodes=len(nodes), busbw=healthy.busbw,
                           vs_nonblocking=healthy.vs_nonblocking, worst_busbw=slowest[0] if slowest else None,
                           worst_element=slowest[1] if slowest else None)
