"""Specs and plans: validate, design, write the plan's files, render every node's configuration,
the flows, the built-in examples (the spec's part from `specs`, which is all `gpunet validate`
imports)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from gpunet.api.specs import (
    DEFAULT_EXAMPLE,
    EXAMPLES,
    Flow,
    design_spec,
    example_text,
    flows,
    init_example,
    load,
    load_plan,
    management_addresses,
    plan_spec,
    validate_spec,
)
from gpunet.decide.catalog import Catalog, example_catalog_text, load_catalog
from gpunet.decide.cost import Costing, price_plan
from gpunet.errors import SpecProblem, UsageError
from gpunet.files.write import refuse_non_directory, write_files
from gpunet.fleet.groups import resolve_nodes
from gpunet.model.nodeset import describe
from gpunet.model.plan import Node, Plan
from gpunet.render import TARGETS, file_mode, render_all
from gpunet.render.plan_files import PLAN_FILES, render_bom_csv, render_summary_md, summary
from gpunet.render.plan_output import recover as recover_plan_output
from gpunet.render.plan_output import write_plan_set

__all__ = ["DEFAULT_EXAMPLE", "EXAMPLES", "TARGETS", "Catalog", "Costing", "Flow", "design_spec",
           "example_catalog_text", "example_text", "flows", "init_example", "load", "load_catalog", "load_plan",
           "management_addresses", "plan_into", "plan_spec", "refuse_non_directory", "render_plan", "summary",
           "validate_spec", "write_plan"]


def plan_into(spec_path: Path | None, out_dir: Path, *, fresh: bool, catalog: Catalog | None = None
              ) -> tuple[Plan, list[str], list[SpecProblem], Costing | None]:
    """`gpunet plan`: design against OUT/plan.json (unless fresh) and replace OUT's plan files as
    one set, the previous plan.json kept as plan.json.1; the changed files, the spec's warnings and,
    with a catalog, the priced bill of materials (in bom.csv and summary.md too)."""
    refuse_non_directory(out_dir)  # before the design, which can take seconds
    recover_plan_output(out_dir)  # a killed earlier run: its old or new set, before reading it
    plan, warnings = design_spec(spec_path, None if fresh else out_dir / "plan.json")
    costing = price_plan(plan, catalog) if catalog is not None else None
    return plan, write_plan(plan, out_dir, costing), warnings, costing


def render_plan(
    plan: Plan, out_dir: Path, nodes: str | None = None, targets: list[str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Render the chosen targets (all by default) for the chosen nodes (a NodeSet, all by
    default) under out_dir; returns every file rendered and those that changed on disk."""
    chosen = targets or list(TARGETS)
    unknown = [t for t in chosen if t not in TARGETS]
    if unknown:
        raise UsageError(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    files = render_all(plan, _pick_nodes(plan, nodes), chosen)
    return files, write_files(out_dir, files, file_mode)


def _pick_nodes(plan: Plan, nodes: str | None) -> list[Node]:
    if nodes is None:
        return list(plan.nodes)
    wanted = set(resolve_nodes(nodes, plan))
    missing = wanted - {n.name for n in plan.nodes}
    if missing:
        raise UsageError(f"not in the plan: {describe(sorted(missing))}")
    return [n for n in plan.nodes if n.name in wanted]


def write_plan(plan: Plan, out_dir: Path, costing: Costing | None = None) -> list[str]:
    """Write plan.json and the CSV/Markdown views (priced, given a costing); returns the files that changed."""
    renders = dict(PLAN_FILES)
    if costing is not None:
        renders |= {"bom.csv": partial(render_bom_csv, costing=costing),
                    "summary.md": partial(render_summary_md, costing=costing)}
    return write_plan_set(out_dir, {name: render(plan) for name, render in renders.items()})
