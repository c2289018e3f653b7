"""Specs on their own: read one, validate it, design its Plan, the built-in examples; without the
renderers, the parts catalog or the fleet, which `plans` adds. `gpunet validate` needs no more, and
its start-up is what it imports (the renderers alone bring networkx)."""

from __future__ import annotations

from pathlib import Path

from gpunet.errors import SpecProblem, UsageError
from gpunet.model.flows import Flow
from gpunet.model.io import read_plan
from gpunet.model.nodeset import describe
from gpunet.model.plan import Plan
from gpunet.spec.examples import ALL_EXAMPLES, DEFAULT_EXAMPLE, EXAMPLES, SCALE_EXAMPLES, example_text
from gpunet.spec.plan import design_loaded, load, plan_of

__all__ = ["ALL_EXAMPLES", "DEFAULT_EXAMPLE", "EXAMPLES", "SCALE_EXAMPLES", "Flow", "design_spec", "example_text",
           "flows", "init_example", "load",
           "load_plan", "management_addresses", "plan_spec", "validate_spec"]


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


def load_plan(source: Path | None) -> Plan:
    """A plan.json as it is, or the plan of a spec (the built-in example when None)."""
    return plan_of(source)


def flows(source: Path | None) -> tuple[Flow, ...]:
    return load_plan(source).flows


def init_example(name: str, out: Path, *, force: bool) -> None:
    """Write a built-in example spec to start from."""
    if name not in ALL_EXAMPLES:
        raise UsageError(f"no example {name!r}; known: {', '.join(ALL_EXAMPLES)}")
    if out.exists() and not force:
        raise UsageError(f"{out} exists (hint: --force to overwrite)")
    out.write_text(example_text(name))


def management_addresses(source: Path) -> dict[str, str]:
    """node -> management address (what fleet tools connect to)."""
    return {n.name: n.management_ip for n in load_plan(source).nodes if n.management_ip}
