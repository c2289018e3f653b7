"""bench's default pattern in the default example's lab (8 servers: 6 on the 8-rail compute plane,
one leaf a rail under 2 spines, 8 cables from each leaf to each spine), through the CLI's JSON
(root; `lab` marker)."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.bench import Fabric
from gpunet.cli.main import app
from gpunet.lab.faults import apply_fault, heal
from gpunet.lab.state import LabState
from gpunet.reach import Reach
from tests.labs import shared_lab, shared_lab_id

pytestmark = [pytest.mark.lab, pytest.mark.slow]
LAB = shared_lab_id("default8")
SLOW_LEAF, SLOW_SPINE = "comp-leaf001", "comp-spine001"

lab = shared_lab("default8")


def test_default_bench_covers_every_rail_and_leaf_pair_and_a_slow_leaf_spine_group_flags_its_pairs(
        lab: LabState, tmp_path: Path) -> None:
    """Every cable between comp-leaf001 and comp-spine001 shaped to 2 Mbit/s (0.5 % of the 400 Mbit/s
    line): a crossing pair through leaf001 hashes about half its 32 streams onto that spine, so
    its own streams fall far below their siblings (the NIC's rate is still reached over the other
    spine). One cable alone of leaf001's 16 would miss a pair's 32 streams 1 time in 8. Pairs
    through leaf001's uplinks are low, or inconclusive for a saturated end (said, with its figure),
    never ok; no other pair is ever low. How many are judged depends on the host's load: on the
    2-core build host, loaded, all 7 were inconclusive, naming the slow path (13-18 of 32 streams
    under 25 % of their mean) beside the saturation."""
    plan = Reach.of_lab(LAB).plan()
    assert plan is not None
    fabric = Fabric.of(plan, "compute")
    group = [c for c in plan.links if c.tier == "leaf_spine" and (c.a.device, c.b.device) == (SLOW_LEAF, SLOW_SPINE)]
    assert len(group) == 8
    for cable in group:
        apply_fault(LAB, f"{cable.a.device}:{cable.a.port}", "rate", "2mbit")
    try:
        # no measuring again one pair at a time: what is inconclusive stays so (and is judged so
        # below); on a loaded host the retries were minutes of this suite's longest test
        result = CliRunner().invoke(app, ["bench", "run", "--lab", LAB, "--duration", "2", "--json",
                                          "--retry-inconclusive", "0", "--db", str(tmp_path / "b.sqlite")])
    finally:
        heal(LAB)
    assert result.exit_code in (0, 1), result.output
    rows = json.loads(result.stdout)["measurements"]
    shown = sorted((r["status"], r["path"], r["source"], r["rail"], r["destination"], r["to_rail"],
                    round(r["percent_of_expected"] or 0), r["reason"] or "") for r in rows)
    print("\n".join(map(str, shown)))  # shown with -s
    ends = [((r["source"], r["rail"]), (r["destination"], r["rail"] if r["to_rail"] is None else r["to_rail"]))
            for r in rows]
    assert {rail for pair in ends for _, rail in pair} == set(range(8))
    assert {r["path"] for r in rows} == {"same-leaf", "cross-leaf"}
    leaves = sorted({n.leaf for n in fabric.nics})
    crossed = {frozenset(fabric.leaf_of[end] for end in pair) for pair, r in zip(ends, rows, strict=True)
               if r["path"] == "cross-leaf"}
    assert len(leaves) == 8 and crossed == {frozenset(two) for two in combinations(leaves, 2)}
    for pair, r in zip(ends, rows, strict=True):
        through = r["path"] == "cross-leaf" and SLOW_LEAF in {fabric.leaf_of[end] for end in pair}
        if through:  # low, or not judged for a saturated end
            assert r["status"] == "low" or (r["status"] == "inconclusive" and _saturation_said(r)), shown
        else:  # never blamed on the slow group
            assert r["status"] != "low", shown


def _saturation_said(row: dict[str, object]) -> bool:
    """The reason names an end's saturation with its figure."""
    return any(str(row["reason"] or "").startswith(f"{role} ") or f"; {role} " in str(row["reason"] or "")
               for role in ("client", "server"))
