"""Reading plan.json back into a Plan."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from gpunet.errors import PlanError
from gpunet.model.plan import PLAN_SCHEMA_VERSION, Plan


def read_plan(path: Path) -> Plan:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise PlanError(f"{path}: cannot read plan: {exc}") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != PLAN_SCHEMA_VERSION:
        raise PlanError(f"{path}: plan schema version {version!r}, this gpunet reads "
                        f"{PLAN_SCHEMA_VERSION}; re-run `gpunet plan` on the spec")
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanError(f"{path}: not a valid plan: {exc.error_count()} problem(s), first: "
                        f"{exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}") from None
