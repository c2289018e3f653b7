from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gpunet.api import plan_spec
from gpunet.design import design
from gpunet.errors import PlanError
from gpunet.model import io
from gpunet.model.io import _located, read_plan
from gpunet.model.plan import Plan
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


def _bytes_verdict(raw: bytes) -> str:
    """What validating the bytes themselves reports first (read_plan's words before it parsed first)."""
    from pydantic import ValidationError  # noqa: PLC0415

    from gpunet.model.io import _first_in_file_order  # noqa: PLC0415
    from gpunet.model.plan import Plan  # noqa: PLC0415

    try:
        Plan.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        assert _first_in_file_order(errors) is first  # pydantic's JSON order needs no reordering
        return ".".join(str(p) for p in first["loc"]) + ": " + first["msg"]
    raise AssertionError("accepted")


@pytest.mark.parametrize("mutate", [
    lambda d: d["links"][0].update(zz=1, gbps="x"),  # an unknown key and a bad field in one object
    lambda d: d["nodes"][1]["interfaces"][0].update(mtu="big", extra=True),
    lambda d: d.update(surplus=1, nodes="x"),  # the outermost object's unknown key comes first
    lambda d: d.update(links={"a": 1}),  # an object for an array
    lambda d: d["links"].__setitem__(0, "cable"),  # a string for an object
    lambda d: d["planes"][0].update(nics=[1]),  # an array for an object
    lambda d: d["switches"][0].update(radix=-1),
])
def test_a_refusal_says_what_validating_the_bytes_says(tmp_path: Path, mutate: Any) -> None:
    """read_plan parses first and validates the parsed values (so a 1M-GPU plan's bytes and parse tree
    are not held beside its models); what it refuses, and the words and place it names first, are those
    of validating the file's bytes."""
    data = json.loads(render_plan_json(design(parse_spec(example_text("small-ethernet"))[0])))
    mutate(data)
    raw = json.dumps(data).encode()
    (tmp_path / "plan.json").write_bytes(raw)
    with pytest.raises(PlanError, match="not a valid plan") as refused:
        read_plan(tmp_path / "plan.json")
    said = str(refused.value).split(": not a valid plan: ", 1)[1]
    assert said.startswith(_bytes_verdict(raw)), (said, _bytes_verdict(raw))


def test_models_read_back_share_their_fields_sets(tmp_path: Path) -> None:
    """Every cable, port and interface read back holds its class's one set of field names (given
    in full in plan.json), not one of its own: half the memory of a large plan read back."""
    path = tmp_path / "plan.json"
    path.write_text(render_plan_json(design(parse_spec(example_text("small-ethernet"))[0])))
    plan = read_plan(path)
    sets = {id(m.__pydantic_fields_set__) for c in plan.links for m in (c, c.a, c.b)}
    sets |= {id(i.__pydantic_fields_set__) for n in plan.nodes for i in n.interfaces}
    assert len(sets) == 3  # Link's, Port's, Interface's
    assert plan.links[0].a.__pydantic_fields_set__ == {"device", "port"}


def _small_plan_dict() -> dict[str, Any]:
    return json.loads(render_plan_json(design(parse_spec(example_text("small-ethernet"))[0])))


@pytest.mark.parametrize("mutate", [
    lambda d: d["links"][-1]["a"].update(device="-bad"),  # in the last chunk of cables
    lambda d: d["links"][5].update(gbps="x", zz=1),
    lambda d: (d["nodes"][-1].update(gpus=-1), d["links"][3].update(zz=1)),  # a node's and a cable's: the node's first
    lambda d: d["nodes"][3]["interfaces"][0].update(address="10.0.0.1"),
    lambda d: d["links"][4]["b"].update(port="999"),  # valid alone: the Plan's cross-check refuses it
    lambda d: d["links"].__setitem__(7, [1]),
    lambda d: d.update(nodes={"a": 1}, links=[{"plane": "x"}]),
])
def test_a_plan_validated_in_chunks_is_refused_as_in_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         mutate: Any) -> None:
    """read_plan validates the nodes and cables ahead, a chunk at a time (their parsed values freed as
    they go); a plan whose bulk spans many chunks is refused with the words, place and count of
    problems of one validation of the whole."""
    data = _small_plan_dict()
    mutate(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValidationError) as whole:
        Plan.model_validate(json.loads(path.read_text()))
    monkeypatch.setattr(io, "CHUNK", 2)
    with pytest.raises(PlanError) as refused:
        read_plan(path)
    assert str(refused.value) == f"{path}: not a valid plan: {_located(whole.value)}"


def test_a_plan_read_in_chunks_is_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = design(parse_spec(example_text("small-ethernet"))[0])
    path = tmp_path / "plan.json"
    path.write_text(render_plan_json(plan))
    monkeypatch.setattr(io, "CHUNK", 3)
    assert len(plan.links) > 3 * 5 and read_plan(path) == plan
