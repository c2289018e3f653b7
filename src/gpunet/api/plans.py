"""Specs and plans: validate, design, write the plan's files, render every node's configuration,
the flows, the built-in examples."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from gpunet.decide.catalog import Catalog, example_catalog_text, load_catalog
from gpunet.decide.cost import Costing, price_plan
from gpunet.errors import SpecProblem, UsageError
from gpunet.files.write import write_files
from gpunet.fleet.groups import resolve_nodes
from gpunet.model.flows import Flow
from gpunet.model.io import read_plan
from gpunet.model.nodeset import describe
from gpunet.model.plan import Node, Plan
from gpunet.render import TARGETS, file_mode, render_all
from gpunet.render.plan_files import PLAN_FILES, render_bom_csv, render_summary_md, summary
from gpunet.render.plan_output import recover as recover_plan_output
from gpunet.render.plan_output import write_plan_set
from gpunet.spec.examples import DEFAULT_EXAMPLE, EXAMPLES, example_text
from gpunet.spec.plan import design_loaded, load, plan_of

__all__ = ["DEFAULT_EXAMPLE", "EXAMPLES", "TARGETS", "Catalog", "Costing", "Flow", "design_spec",
           "example_catalog_text", "example_text", "flows", "init_example", "load", "load_catalog", "load_plan",
           "management_addresses", "plan_into", "plan_spec", "render_plan", "summary", "validate_spec", "write_plan"]


def validate_spec(spec_path: Path) -> tuple[Plan, list[SpecProblem]]:
    """Full validation: schema, cross-field checks and a design attempt (radix, subnet fit); and
    the warnings of what a running cluster would miss (monitoring, NTP, a scheduler)."""
    return design_spec(spec_path)


def plan_spec(spec_path: Path | None, previous: Path | None = None) -> Plan:
    """Design the plan of a spec; with `previous` (an earlier plan.json), keep its assignments."""
    return design_spec(spec_path, previous)[0]


def design_spec(spec_path: Path | None, previous: Path | None = None) -> tuple[Plan, list[SpecProblem]]:
    """plan_spec, with the spec's located warnings; a previous plan of another site, or one whose
    nodes the spec drops, is refused (the way out: --fresh)."""
    baseline = read_plan(previous) if previous is not None and previous.exists() else None
    spec, source = load(spec_path)
    if baseline is not None and baseline.site.name != spec.site.name:
        raise UsageError(f"{previous} is the plan of site {baseline.site.name!r} ({len(baseline.nodes)} nodes) and "
                         f"this spec is site {spec.site.name!r}: write to another directory (-o), or give --fresh "
                         "to replace it (the old plan is kept as plan.json.1)")
    plan, warnings = design_loaded(spec, source, baseline)
    if baseline is not None:
        _refuse_dropped_nodes(baseline, plan, previous)
    return plan, warnings


def _refuse_dropped_nodes(baseline: Plan, plan: Plan, previous: Path | None) -> None:
    dropped = [n.name for n in baseline.nodes if plan.node(n.name) is None]
    if dropped:
        raise UsageError(f"this spec drops {len(dropped)} node(s) that {previous} has: {describe(dropped)}; "
                         "give --fresh to accept (the old plan is kept as plan.json.1)")


def plan_into(spec_path: Path | None, out_dir: Path, *, fresh: bool, catalog: Catalog | None = None
              ) -> tuple[Plan, list[str], list[SpecProblem], Costing | None]:
    """`gpunet plan`: design against OUT/plan.json (unless fresh) and replace OUT's plan files as
    one set, the previous plan.json kept as plan.json.1; the changed files, the spec's warnings and,
    with a catalog, the priced bill of materials (in bom.csv and summary.md too)."""
    recover_plan_output(out_dir)  # a killed earlier run: its old or new set, before reading it
    plan, warnings = design_spec(spec_path, None if fresh else out_dir / "plan.json")
    costing = price_plan(plan, catalog) if catalog is not None else None
    return plan, write_plan(plan, out_dir, costing), warnings, costing


def load_plan(source: Path | None) -> Plan:
    """A plan.json as it is, or the plan of a spec (the built-in example when None)."""
    return plan_of(source)


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


def flows(source: Path | None) -> tuple[Flow, ...]:
    return load_plan(source).flows


def init_example(name: str, out: Path, *, force: bool) -> None:
    """Write a built-in example spec to start from."""
    if name not in EXAMPLES:
        raise UsageError(f"no example {name!r}; known: {', '.join(EXAMPLES)}")
    if out.exists() and not force:
        raise UsageError(f"{out} exists (hint: --force to overwrite)")
    out.write_text(example_text(name))


def management_addresses(source: Path) -> dict[str, str]:
    """node -> management address (what fleet tools connect to)."""
    return {n.name: n.management_ip for n in load_plan(source).nodes if n.management_ip}


def write_plan(plan: Plan, out_dir: Path, costing: Costing | None = None) -> list[str]:
    """Write plan.json and the CSV/Markdown views (priced, given a costing); returns the files that changed."""
    renders = dict(PLAN_FILES)
    if costing is not None:
        renders |= {"bom.csv": partial(render_bom_csv, costing=costing),
                    "summary.md": partial(render_summary_md, costing=costing)}
    return write_plan_set(out_dir, {name: render(plan) for name, render in renders.items()})
