"""Reading plan.json back into a Plan."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from gpunet.errors import PlanError
from gpunet.model.base import bulk_objects
from gpunet.model.plan import PLAN_SCHEMA_VERSION, Plan


def read_plan(path: Path) -> Plan:
    """A plan.json, validated (it is input: names in it reach `ip` commands)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan: {exc.strerror}") from None
    try:
        with bulk_objects():
            plan = Plan.model_validate_json(text)  # parsed and validated in pydantic's core
    except ValidationError as exc:
        _check_version(path, text)
        raise PlanError(f"{path}: not a valid plan: {_located(exc)}") from None
    _check_version(path, text, plan.schema_version)
    return plan


def _check_version(path: Path, text: str, version: object = None) -> None:
    if version is None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"{path}: cannot read plan: {exc}") from None
        version = data.get("schema_version") if isinstance(data, dict) else None
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
