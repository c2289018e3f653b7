"""The built-in examples' plans, designed once per test session (multi-unit-large takes a second)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from gpunet.design import design
from gpunet.model.plan import Plan
from gpunet.spec.loader import load_spec
from tests.render import rendered

FIXTURES = Path(__file__).parent.parent / "fixtures"


def example_plan(name: str) -> Plan:
    return rendered.example_plan(name)  # one cache for every module of the process


@cache
def fixture_plan(name: str) -> Plan:
    """A spec of tests/fixtures/compare/ (the scalable-unit example varied), designed."""
    return design(load_spec(FIXTURES / "compare" / f"{name}.yaml")[0])
