"""Rendered files of the built-in examples, one node of every group (each role and NIC layout)."""

from __future__ import annotations

from functools import cache

from gpunet.design import design
from gpunet.model.plan import Node, Plan
from gpunet.render import TARGETS, render_all
from gpunet.render.switch import SWITCH_RENDERERS
from gpunet.spec.examples import DEFAULT_EXAMPLE, EXAMPLES, example_text
from gpunet.spec.loader import parse_spec


@cache
def example_plan(name: str) -> Plan:
    return design(parse_spec(example_text(name))[0])


def one_per_group(plan: Plan) -> list[Node]:
    return list({n.group: n for n in reversed(plan.nodes)}.values())


def targets_of(name: str) -> list[str]:
    """Every target; the switch targets (every switch of the plan, not one per group) for the
    default example only, so golden files stay reviewable."""
    return [t for t in TARGETS if name == DEFAULT_EXAMPLE or t not in SWITCH_RENDERERS]


@cache
def rendered(name: str) -> dict[str, str]:
    plan = example_plan(name)
    return render_all(plan, one_per_group(plan), targets_of(name))


def all_rendered() -> list[tuple[str, str, str]]:
    """(example, path, text) for every example."""
    return [(name, path, text) for name in EXAMPLES for path, text in rendered(name).items()]


def files_matching(suffix: str) -> list[tuple[str, str, str]]:
    return [f for f in all_rendered() if f[1].endswith(suffix) or f"/{suffix}" in f[1]]
