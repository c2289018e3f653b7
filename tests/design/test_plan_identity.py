"""Every built-in example's plan, byte for byte: the SHA-256 of plan.json and of every file `gpunet
plan` writes beside it (fresh, re-planned from its own plan.json, and priced from the shipped
catalog), against hashes taken before the scale work (issue 31). A speed-up that changes one byte
of any plan fails here. Regenerate only for an intended change, with GPUNET_UPDATE_GOLDEN=1, and
say in the commit which field changed and why."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from gpunet.decide.catalog import load_catalog
from gpunet.decide.cost import price_plan
from gpunet.design import design
from gpunet.model.io import read_plan
from gpunet.model.plan import Plan
from gpunet.render.plan_files import PLAN_FILES, render_bom_csv, render_summary_md
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec

GOLDEN = Path(__file__).parents[1] / "fixtures" / "plan_identity"


def digests(plan: Plan) -> dict[str, str]:
    return {name: hashlib.sha256(render(plan).encode()).hexdigest() for name, render in PLAN_FILES.items()}


def example_digests(name: str, tmp_path: Path) -> dict[str, dict[str, str]]:
    spec, _ = parse_spec(example_text(name), f"<example {name}>")
    plan = design(spec)
    fresh = digests(plan)
    written = tmp_path / "plan.json"
    written.write_text(PLAN_FILES["plan.json"](plan))
    replanned = digests(design(spec, read_plan(written)))
    costing = price_plan(plan, load_catalog(Path("example")))
    priced = {"bom.csv": hashlib.sha256(render_bom_csv(plan, costing).encode()).hexdigest(),
              "summary.md": hashlib.sha256(render_summary_md(plan, costing).encode()).hexdigest()}
    return {"fresh": fresh, "replanned": replanned, "priced": priced}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_plan_files_are_byte_identical(name: str, tmp_path: Path) -> None:
    got = example_digests(name, tmp_path)
    golden = GOLDEN / f"{name}.json"
    if os.environ.get("GPUNET_UPDATE_GOLDEN"):
        golden.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert golden.exists(), f"no golden file {golden}; run with GPUNET_UPDATE_GOLDEN=1"
    assert got == json.loads(golden.read_text())
    assert got["replanned"] == got["fresh"], "re-planning a plan from its own plan.json changed it"
