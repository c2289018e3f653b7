"""Library entry points the CLI calls: one function per command, no printing."""

from __future__ import annotations

from pathlib import Path

from gpunet.design import design
from gpunet.errors import DesignError, SpecError
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.render.plan_files import PLAN_FILES
from gpunet.render.write import write_files
from gpunet.spec.examples import DEFAULT_EXAMPLE, example_text
from gpunet.spec.loader import SourceMap, load_spec, parse_spec


def load(spec_path: Path | None) -> tuple[Spec, SourceMap]:
    """A spec file, or the default built-in example when no path is given."""
    if spec_path is None:
        return parse_spec(example_text(DEFAULT_EXAMPLE), f"<example {DEFAULT_EXAMPLE}>")
    return load_spec(spec_path)


def validate_spec(spec_path: Path) -> Plan:
    """Full validation: schema, cross-field checks and a design attempt (radix, subnet fit)."""
    return plan_spec(spec_path)


def plan_spec(spec_path: Path | None, previous: Path | None = None) -> Plan:
    """Design the plan of a spec; with `previous` (an earlier plan.json), keep its assignments."""
    spec, source = load(spec_path)
    baseline = read_plan(previous) if previous is not None and previous.exists() else None
    try:
        return design(spec, baseline)
    except DesignError as exc:
        raise DesignError([source.locate(p) for p in exc.problems]) from None


def write_plan(plan: Plan, out_dir: Path) -> list[str]:
    """Write plan.json and the CSV/Markdown views; returns the files that changed."""
    return write_files(out_dir, {name: render(plan) for name, render in PLAN_FILES.items()})


__all__ = ["DesignError", "SpecError", "load", "plan_spec", "validate_spec", "write_plan"]
