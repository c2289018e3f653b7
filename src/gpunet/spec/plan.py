"""A Plan from a file: plan.json read as it is (and validated like a spec), or a spec designed,
its design problems located in its YAML. The built-in example when no file is named."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from gpunet.design import design
from gpunet.errors import DesignError, SpecProblem
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.spec.checks import spec_warnings
from gpunet.spec.examples import DEFAULT_EXAMPLE, example_text
from gpunet.spec.loader import SourceMap, load_spec, parse_spec


def load(spec_path: Path | None) -> tuple[Spec, SourceMap]:
    """A spec file, or the default built-in example when no path is given."""
    if spec_path is None:
        return parse_spec(example_text(DEFAULT_EXAMPLE), f"<example {DEFAULT_EXAMPLE}>")
    return load_spec(spec_path)


def design_file(spec_path: Path | None, baseline: Plan | None = None) -> tuple[Plan, list[SpecProblem]]:
    """The spec's Plan (keeping a previous plan's assignments) and its located warnings."""
    return design_loaded(*load(spec_path), baseline)


def design_loaded(spec: Spec, source: SourceMap, baseline: Plan | None = None) -> tuple[Plan, list[SpecProblem]]:
    """design_file for a spec already read."""
    try:
        plan = design(spec, baseline)
    except DesignError as exc:
        raise DesignError([source.locate(p) for p in exc.problems]) from None
    return plan, once(source.locate(w) for w in spec_warnings(spec))


def once(problems: Iterable[SpecProblem]) -> list[SpecProblem]:
    """Each problem once, in the order first found: two checks, or one check over planes that share
    a key path, may find the same thing at the same place, and `validate`/`plan` print each one."""
    return list(dict.fromkeys(problems))


def plan_of(source: Path | None) -> Plan:
    """A plan.json as it is, or the plan of a spec (the built-in example when None)."""
    if source is not None and source.suffix == ".json":
        return read_plan(source)
    return design_file(source)[0]
