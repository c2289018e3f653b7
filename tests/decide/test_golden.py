"""Golden files: every example's bill of materials, one priced from the shipped catalog, and two
design reviews of the scalable-unit example (InfiniBand against RoCE, 1:1 against 2:1 leaves).
Regenerate after an intended change with GPUNET_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpunet.decide.catalog import load_catalog
from gpunet.decide.compare import compare, render_markdown
from gpunet.decide.cost import price_plan
from gpunet.render.plan_files import render_bom_csv
from gpunet.spec.examples import EXAMPLES
from tests.decide.examples import FIXTURES, example_plan, fixture_plan


def matches_golden(path: Path, text: str) -> None:
    if os.environ.get("GPUNET_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with GPUNET_UPDATE_GOLDEN=1"
    assert text == path.read_text()


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_bom_matches_golden(name: str) -> None:
    matches_golden(FIXTURES / "bom" / f"{name}.csv", render_bom_csv(example_plan(name)))


def test_priced_bom_matches_golden() -> None:
    plan = example_plan("scalable-unit")
    costing = price_plan(plan, load_catalog(Path("example")))
    matches_golden(FIXTURES / "bom" / "scalable-unit-priced.csv", render_bom_csv(plan, costing))


@pytest.mark.parametrize(("golden", "designs"), [
    ("infiniband-vs-roce.md", (("infiniband", "scalable-unit"), ("roce", "su-roce"))),
    ("1to1-vs-2to1.md", (("1:1", "scalable-unit"), ("2:1", "su-2to1"))),
])
def test_compare_matches_golden(golden: str, designs: tuple[tuple[str, str], ...]) -> None:
    plans = [(label, example_plan(name) if name in EXAMPLES else fixture_plan(name)) for label, name in designs]
    matches_golden(FIXTURES / "compare" / golden, render_markdown(compare(plans, load_catalog(Path("example")))))
