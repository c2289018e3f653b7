"""Reading plan.json back into a Plan, and the short digest that names a Plan (labs, bench runs)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from pydantic import ValidationError

from gpunet.errors import PlanError
from gpunet.model.base import bulk_objects
from gpunet.model.plan import PLAN_SCHEMA_VERSION, Plan

MAX_PLAN_BYTES = 1 << 30  # a 12 500-node (100k-GPU) plan.json is 129 MB


def plan_digest(plan: Plan) -> str:
    """16 hex digits of the plan's JSON: the same plan, the same digest."""
    return hashlib.sha256(plan.model_dump_json().encode()).hexdigest()[:16]


def read_plan(path: Path) -> Plan:
    """A plan.json, validated (it is input: names in it reach `ip` commands)."""
    text = _read_regular(path)
    try:
        with bulk_objects():
            plan = Plan.model_validate_json(text)  # parsed and validated in pydantic's core
    except ValidationError as exc:
        _check_version(path, text)
        raise PlanError(f"{path}: not a valid plan: {_located(exc)}") from None
    _check_version(path, text, plan.schema_version)
    return plan


def _read_regular(path: Path) -> str:
    """The file's text: a regular file (not a FIFO or /dev/zero) under the size limit, UTF-8."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PlanError(f"{path}: cannot read plan: not a regular file")
        if info.st_size > MAX_PLAN_BYTES:
            raise PlanError(f"{path}: cannot read plan: {info.st_size} bytes is over the limit of {MAX_PLAN_BYTES}")
        raw = handle.read(MAX_PLAN_BYTES + 1)
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise PlanError(f"{path}: cannot read plan: not UTF-8 text at byte {exc.start}") from None


def _check_version(path: Path, text: str, version: object = None) -> None:
    if version is None:
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
            raise PlanError(f"{path}: cannot read plan: {str(exc)[:200]}") from None
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
