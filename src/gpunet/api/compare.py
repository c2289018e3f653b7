"""Design decisions: designs side by side (cost, power, carry, growth, what one failure takes
away), and the same figures for one plan (the lines under `gpunet plan`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from gpunet.decide.catalog import Catalog, example_catalog_text, load_catalog
from gpunet.decide.compare import DEFAULT_REFERENCE, Comparison, money, per_gpu, power, render_markdown
from gpunet.decide.compare import compare as compare_plans
from gpunet.decide.cost import Costing
from gpunet.decide.failures import PlaneFailures, plan_failures
from gpunet.decide.growth import plan_headroom
from gpunet.decide.reference import ReferenceJob
from gpunet.errors import UsageError
from gpunet.model.plan import Plan
from gpunet.sim.simulate import SimOptions, check_options
from gpunet.sim.whatif import parse_sizes
from gpunet.spec.plan import plan_of

__all__ = ["Catalog", "Comparison", "Costing", "PlaneFailures", "ReferenceJob", "bom_units", "compare_designs",
           "example_catalog_text", "failures", "headroom", "load_catalog", "money", "per_gpu", "power",
           "reference_job", "render_markdown"]


def compare_designs(designs: list[Path], catalog: Path | None = None,
                    reference: ReferenceJob | None = DEFAULT_REFERENCE) -> Comparison:
    """Two or more specs or plan.json files side by side, each titled by its file name (the path
    where two names agree), with the reference job's simulated busbw unless `reference` is None."""
    if len(designs) < 2:
        raise UsageError(f"compare needs two or more designs (specs or plan.json files), got {len(designs)}")
    parts = load_catalog(catalog) if catalog is not None else None
    plans = [(name, plan_of(path)) for name, path in zip(_names(designs), designs, strict=True)]
    return compare_plans(plans, parts, reference)


def reference_job(collective: str, size: str, nodes: int) -> ReferenceJob:
    """The job each design's simulated busbw is shown for (as `gpunet sim` takes it); bad values exit 2."""
    job = ReferenceJob(nodes=nodes, options=SimOptions(collective=collective, sizes=parse_sizes(size)[-1:]))
    check_options(job.options)
    return job


def _names(paths: list[Path]) -> list[str]:
    stems = [p.stem for p in paths]
    return [stem if stems.count(stem) == 1 else str(path) for stem, path in zip(stems, paths, strict=True)]


def bom_units(plan: Plan) -> Counter[str]:
    """Units per kind of item in the bill of materials (switch, nic, cable, transceiver)."""
    units = Counter[str]()
    for line in plan.bom:
        units[line.item] += line.count
    return units


def headroom(plan: Plan) -> dict[str, int | None]:
    """Per plane, the nodes that can still be added before a cable moves (None: unknown)."""
    return plan_headroom(plan)


def failures(plan: Plan) -> tuple[PlaneFailures, ...]:
    """Per plane, the worst leaf, spine, core and cable lost."""
    return plan_failures(plan)
