from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpunet.api import plan_spec
from gpunet.design import design
from gpunet.errors import PlanError
from gpunet.model.io import read_plan
from gpunet.render.plan_files import render_plan_json
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec


def test_plan_json_round_trips(tmp_path: Path) -> None:
    plan = design(parse_spec(example_text("small-ethernet"))[0])
    path = tmp_path / "plan.json"
    path.write_text(render_plan_json(plan))
    assert read_plan(path) == plan


def test_other_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(PlanError, match="schema version 99"):
        read_plan(path)


def test_invalid_plan_names_the_first_problem(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"schema_version": 1, "nodes": "x"}))
    with pytest.raises(PlanError, match="not a valid plan"):
        read_plan(path)


def test_the_node_index_follows_a_copy_with_other_nodes() -> None:
    plan = plan_spec(None)
    assert plan.node("gpu002") is plan.nodes_by_name["gpu002"]  # the index is built
    fewer = plan.model_copy(update={"nodes": plan.nodes[:1]})
    assert fewer.node("gpu002") is None and fewer.node("gpu001") == plan.nodes[0]
    assert plan.node(None) is None and "nodes_by_name" not in plan.model_dump()
