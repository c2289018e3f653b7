"""Reading plan.json back into a Plan, and the short digest that names a Plan (labs, bench runs)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ValidationError

from gpunet.errors import PlanError, UsageError
from gpunet.files.inputs import read_bytes
from gpunet.model.base import bulk_objects
from gpunet.model.plan import PLAN_SCHEMA_VERSION, Plan

MAX_PLAN_BYTES = 4 << 30  # a 12 500-node (100k-GPU) plan.json is 129 MB, a 125 000-node (1M-GPU) one 1.4 GB


def plan_digest(plan: Plan) -> str:
    """16 hex digits of the plan's JSON: the same plan, the same digest."""
    return hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:16]


class _Versioned(BaseModel):
    """Only the schema version of a plan.json (the rest is skipped by pydantic's parser, unbuilt)."""

    schema_version: object = None


def read_plan(path: Path) -> Plan:
    """A plan.json, validated (it is input: names in it reach `ip` commands)."""
    try:
        raw = read_bytes(path, MAX_PLAN_BYTES, "plan")
    except UsageError as exc:
        why = str(exc).removeprefix(f"{path}: ").removeprefix("cannot read: ")
        raise PlanError(f"{path}: cannot read plan: {why}") from None
    try:
        with bulk_objects():
            plan = Plan.model_validate_json(raw)  # parsed, UTF-8 checked and validated in pydantic's core
    except ValidationError as exc:
        _check_version(path, raw)
        raise PlanError(f"{path}: not a valid plan: {_located(exc)}") from None
    _check_version(path, raw, plan.schema_version)
    return plan


def _check_version(path: Path, raw: bytes, version: object = None) -> None:
    if version is None:
        try:
            version = _Versioned.model_validate_json(raw).schema_version
        except ValidationError as exc:  # not JSON at all, or nested past pydantic's parser's limit
            raise PlanError(f"{path}: cannot read plan: {exc.errors()[0]['msg']}") from None
    if version != PLAN_SCHEMA_VERSION:
        raise PlanError(f"{path}: plan schema version {version!r}, this gpunet reads {PLAN_SCHEMA_VERSION}; "
                        "re-plan with `gpunet plan --fresh` (addresses and cables are assigned anew)")


def _located(exc: ValidationError) -> str:
    """The first problem as `key.path: message (value)`, and how many more there are."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "plan"
    value = first.get("input")
    shown = f" (value {value!r:.80})" if isinstance(value, str | int | float) else ""
    more = f"; and {exc.error_count() - 1} more problem(s)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg'].removeprefix('Value error, ')}{shown}{more}"
