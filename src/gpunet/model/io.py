"""Reading plan.json back into a Plan, and the short digest that names a Plan (labs, bench runs)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails, from_json, to_json

from gpunet.errors import PlanError, UsageError
from gpunet.files.inputs import read_bytes
from gpunet.model.base import bulk_objects
from gpunet.model.plan import PLAN_SCHEMA_VERSION, Link, Node, Plan

MAX_PLAN_BYTES = 4 << 30  # a 12 500-node (100k-GPU) plan.json is 129 MB, a 125 000-node (1M-GPU) one 1.4 GB


def plan_digest(plan: Plan) -> str:
    """16 hex digits of the plan's JSON: the same plan, the same digest."""
    return hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:16]


class _Versioned(BaseModel):
    """Only the schema version of a plan.json (the rest is skipped by pydantic's parser, unbuilt)."""

    schema_version: object = None


def read_plan(path: Path) -> Plan:
    """A plan.json, validated (it is input: names in it reach `ip` commands).

    Parsed to Python values first (pydantic's own JSON parser), the bytes dropped, then those
    validated: the same validation as of the bytes, for values JSON can hold, but model_validate_json
    holds its parse tree of the whole file (5x the file: 7 GB of a 1M-GPU plan's 1.4 GB) beside the
    models it builds, and the Python values are a little over half of that, given back as the nodes
    and cables are validated, a chunk at a time (_validated). The collector is paused for both
    (bulk_objects): parsing makes millions of containers too."""
    try:
        raw = read_bytes(path, MAX_PLAN_BYTES, "plan")
    except UsageError as exc:
        why = str(exc).removeprefix(f"{path}: ").removeprefix("cannot read: ")
        raise PlanError(f"{path}: cannot read plan: {why}") from None
    with bulk_objects():
        try:
            data = from_json(raw)
        except ValueError as exc:  # not JSON: said in the words pydantic's validator has for it
            _check_version(path, raw)
            raise PlanError(f"{path}: cannot read plan: Invalid JSON: {exc}") from None
        del raw
        try:
            plan = _validated(data)
        except ValidationError as exc:
            _check_version(path, data)
            raise PlanError(f"{path}: not a valid plan: {_located(exc)}") from None
        del data  # before the survivors are frozen
    _check_version(path, None, plan.schema_version)
    return plan


# The plan's bulk, validated ahead in chunks of this many (see _validated).
CHUNK = 20_000
_AHEAD: dict[str, TypeAdapter[list[Any]]] = {"nodes": TypeAdapter(list[Node]), "links": TypeAdapter(list[Link])}


def _validated(data: object) -> Plan:
    """Plan.model_validate(data), its nodes and cables validated ahead, a chunk at a time, each
    chunk's parsed values replaced by its models as they are made: those values are freed as the
    models are built (their memory reused for the models instead of new pages: a 1M-GPU plan's 2.35
    million cables are 7 million dicts), not held beside every model to the end. Each model's
    validation is its own, whatever holds it, and the Plan's takes a model as it is (pydantic does
    not validate an instance again), so the Plan, its cross-checks and what they accept are the
    same. A chunk with a problem is left as it was read, and the rest too: the Plan's validation
    then reports every problem, in the file's order, as without this."""
    if isinstance(data, dict):
        for key, adapter in _AHEAD.items():
            items = data.get(key)
            if isinstance(items, list) and not _ahead(items, adapter):
                break
    return Plan.model_validate(data)


def _ahead(items: list[object], adapter: TypeAdapter[list[Any]]) -> bool:
    """Replace each chunk of `items` by its models while every chunk is valid; False at the first
    that is not."""
    for start in range(0, len(items), CHUNK):
        try:
            items[start:start + CHUNK] = adapter.validate_python(items[start:start + CHUNK])
        except ValidationError:
            return False
    return True


def _check_version(path: Path, content: bytes | object, version: object = None) -> None:
    """Refuse a plan of another schema version; `content` the file's bytes, or the JSON values
    parsed from them."""
    if version is None:
        if isinstance(content, dict):
            version = content.get("schema_version")
        else:
            raw = content if isinstance(content, bytes) else to_json(content)
            try:
                version = _Versioned.model_validate_json(raw).schema_version
            except ValidationError as exc:  # not JSON at all, not an object, or nested past the parser's limit
                raise PlanError(f"{path}: cannot read plan: {exc.errors()[0]['msg']}") from None
    if version != PLAN_SCHEMA_VERSION:
        raise PlanError(f"{path}: plan schema version {version!r}, this gpunet reads {PLAN_SCHEMA_VERSION}; "
                        "re-plan with `gpunet plan --fresh` (addresses and cables are assigned anew)")


# What pydantic says of a JSON value of the wrong shape, where the Python value parsed from it is
# called by its Python type: a plan.json's reader is told of arrays and objects.
JSON_WORDS = {"tuple_type": "Input should be a valid array", "list_type": "Input should be a valid array",
              "dict_type": "Input should be an object", "model_type": "Input should be an object"}


def _located(exc: ValidationError) -> str:
    """The first problem as `key.path: message (value)`, and how many more there are."""
    errors = exc.errors()
    first = _first_in_file_order(errors)
    where = ".".join(str(p) for p in first["loc"]) or "plan"
    value = first.get("input")
    shown = f" (value {value!r:.80})" if isinstance(value, str | int | float) else ""
    more = f"; and {len(errors) - 1} more problem(s)" if len(errors) > 1 else ""
    message = JSON_WORDS.get(first["type"], first["msg"])
    return f"{where}: {message.removeprefix('Value error, ')}{shown}{more}"


def _first_in_file_order(errors: list[ErrorDetails]) -> ErrorDetails:
    """The problem validating the file's bytes reports first: there an object's unknown keys come
    before its fields' problems, validating the parsed values they come after them. Fields and
    items are in the same order either way, so the first problem's path leads to it: the first
    unknown key of the outermost object on that path that has one, else that problem itself."""
    first = errors[0]
    for depth in range(len(first["loc"])):
        parent = first["loc"][:depth]
        extra = next((e for e in errors if e["type"] == "extra_forbidden" and e["loc"][:-1] == parent), None)
        if extra is not None:
            return extra
    return first
