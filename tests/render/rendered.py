"""Rendered files of the built-in examples, one node of every group (each role and NIC layout).

Tests are parametrised from a manifest (rendered_manifest.json: example -> path -> tags) so that
collecting them designs and renders nothing; a test's file is rendered when it runs (`text_of`, or
the `text` fixture of tests/render/conftest.py), once per example per process.
`test_the_manifest_lists_exactly_what_renders` keeps the manifest true; regenerate it after an
intended change with GPUNET_UPDATE_GOLDEN=1, as the golden files."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

from gpunet.design import design
from gpunet.model.plan import Node, Plan
from gpunet.render import TARGETS, render_all
from gpunet.render.switch import SWITCH_RENDERERS
from gpunet.spec.examples import DEFAULT_EXAMPLE, EXAMPLES, example_text
from gpunet.spec.loader import parse_spec

MANIFEST = Path(__file__).parent / "rendered_manifest.json"
# What a test selects files by beyond their path: tag -> predicate on the file's text.
TAGS: dict[str, Callable[[str], bool]] = {"switches": lambda text: "SwitchName=" in text}
Manifest = dict[str, dict[str, list[str]]]


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


def text_of(example: str, path: str) -> str:
    return rendered(example)[path]


def actual_manifest() -> Manifest:
    return {name: {path: sorted(tag for tag, holds in TAGS.items() if holds(text))
                   for path, text in sorted(rendered(name).items())} for name in EXAMPLES}


@cache
def manifest() -> Manifest:
    loaded: Manifest = json.loads(MANIFEST.read_text())
    return loaded


def files_matching(suffix: str, tag: str | None = None) -> list[tuple[str, str]]:
    """(example, path) of every rendered file whose path ends in or holds `suffix`, from the manifest."""
    return [(example, path) for example, files in manifest().items() for path, tags in files.items()
            if (path.endswith(suffix) or f"/{suffix}" in path) and (tag is None or tag in tags)]


def by_node(suffix: str) -> list[tuple[str, str]]:
    """(example, node) of every node with rendered files under `suffix`."""
    return sorted({(example, path.split("/")[1]) for example, path in files_matching(suffix)})


def node_files(example: str, node: str, suffix: str) -> dict[str, str]:
    """That node's files under `suffix`, rendered."""
    return {path: text_of(example, path) for e, path in files_matching(suffix)
            if e == example and path.split("/")[1] == node}
