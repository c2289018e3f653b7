"""A bench run read for the report: a cell per pair (a pair measured one way in both cells), blocks
of nodes past 64 a side with the worst pair of each, inconclusive pairs apart with their reason; the
SVG on bench's own scale, every cell in it."""

from __future__ import annotations

import re
from pathlib import Path

from gpunet.bench.heatmap import STATUS_RANK
from gpunet.bench.store import Measurement, add_measurements, start_run
from gpunet.design import design
from gpunet.model.nodeset import fold
from gpunet.model.plan import Plan
from gpunet.report.bench import load_bench
from gpunet.report.heatsvg import FAILED, INCONCLUSIVE, heatmap_svg, scale_colour
from gpunet.report.model import plan_digest
from gpunet.report.sections import bench_section
from tests.specs import rail_spec


def test_the_seeded_run_draws_a_cell_per_pair(su_plan: Plan, seeded: dict[str, Path]) -> None:
    result = load_bench(seeded["bench"], su_plan, plan_digest(su_plan))
    assert result.names == tuple(f"gpu{n:03d}" for n in range(1, 9)) and result.block == 1
    assert len(result.cells) == 8 * 7 and result.plan_matches
    by_pair = {(result.names[c.row], result.names[c.column]): c for c in result.cells}
    assert by_pair["gpu002", "gpu005"].status == by_pair["gpu005", "gpu002"].status == "low"
    assert by_pair["gpu006", "gpu003"].status == "inconclusive"
    assert sorted(m.status for m in result.worst) == ["inconclusive", "low"]
    assert next(m for m in result.worst if m.status == "inconclusive").reason == "gpu006 saturated: CPU pressure 0.62"
    svg = heatmap_svg(result)
    assert svg.count('class="gn-heat-inconclusive"') == 2 and svg.count('class="gn-heat-low"') == 2
    assert svg.count("<title>") == 56 and "gpu006 → gpu003: inconclusive" in svg
    section = bench_section(result)
    apart = section.split("Inconclusive, not judged", 1)[1]
    assert "gpu006 saturated" in apart and "gpu006 saturated" not in section.split("Inconclusive", 1)[0]


def test_a_large_run_draws_blocks_with_the_worst_pair_of_each(tmp_path: Path) -> None:
    plan = design(rail_spec(100, radix=32, rails=1))
    nodes = [n.name for n in plan.nodes]
    db = tmp_path / "bench.sqlite"
    run = start_run(db, plan_hash=plan_digest(plan), tool="iperf3", pattern="all-pairs", arguments="plane=compute")
    worst = (nodes[10], nodes[77])
    add_measurements(db, run, [Measurement(source=a, destination=b, plane="compute", metric="throughput",
                                           value=120.0 if (a, b) == worst else 396.0, unit="Gb/s", expected=396.0,
                                           status="failed" if (a, b) == worst else "ok")
                               for i, a in enumerate(nodes) for b in nodes[i + 1:]])
    result = load_bench(db, plan, plan_digest(plan))
    assert result.block == 2 and len(result.names) == 50 and result.names[0] == fold(nodes[:2])
    failed = [c for c in result.cells if c.status == "failed"]
    assert {(c.row, c.column) for c in failed} == {(5, 38), (38, 5)}
    assert all(STATUS_RANK[c.status] <= STATUS_RANK["failed"] for c in result.cells)
    assert len(result.cells) == 50 * 50  # the diagonal blocks hold pairs inside a block
    svg = heatmap_svg(result)
    assert len(re.findall(r'<rect x=[^>]*class="gn-heat-', svg)) == 2500 and f'fill="{FAILED}"' in svg


def test_the_scale_is_benchs_own() -> None:
    assert scale_colour(100) == "#006837" and scale_colour(0) == "#a50026" and scale_colour(85) == "#ffffbf"
    assert scale_colour(100.4) == scale_colour(99.6)  # the whole percent written in the cell decides
    assert scale_colour(101) == "#2b6cb0" and INCONCLUSIVE == "#9f7aea"
