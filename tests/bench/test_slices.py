"""The fabric's cover cut into slices for regular runs: every slice part of the cover and the
slices together the whole of it, each within its size; the rotation's next slice read back from
the database; the coverage report's claim against the slices' own pairs."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet
from typer.testing import CliRunner

from gpunet.bench import Fabric, bench_nodes, fabric_rounds
from gpunet.bench.schedule import RailPair
from gpunet.bench.slices import (
    OMIT_S,
    ROUND_OVERHEAD_S,
    SliceChoice,
    SliceSize,
    cover,
    coverage_report,
    crossed_by,
    pair_class,
    parse_hours,
)
from gpunet.bench.store import last_slice, start_run
from gpunet.cli.main import app
from gpunet.errors import UsageError
from tests.render.rendered import example_plan

PLAN = example_plan("scalable-unit")
FABRIC = Fabric.of(PLAN, "compute")
NODES = bench_nodes(PLAN, "compute", None)
WHOLE = [p for r in fabric_rounds(FABRIC, NODES) for p in r]


def _key(pair: RailPair) -> tuple[str, str, int, int]:
    return pair[0], pair[1], pair.rail or 0, pair.to_rail or 0


@pytest.mark.parametrize("size", ["class", "7", "1", "20s", "2m", "1h"])
def test_the_slices_are_the_cover_cut_without_loss_or_repeat(size: str) -> None:
    found = cover(FABRIC, "compute", NODES, SliceSize.parse(size), 3)
    cut = [p for s in found.slices for p in s.pairs]
    assert sorted(cut, key=_key) == sorted(WHOLE, key=_key) and len(cut) == len(set(cut))
    assert [s.index for s in found.slices] == list(range(1, len(found.slices) + 1))
    for s in found.slices:
        assert sorted((p for r in s.rounds for p in r), key=_key) == sorted(s.pairs, key=_key)


def test_a_class_slice_holds_one_pair_class_and_every_class_has_one() -> None:
    found = cover(FABRIC, "compute", NODES, SliceSize.parse("class"), 3)
    classes = [{pair_class("compute", p) for p in s.pairs} for s in found.slices]
    assert all(len(c) == 1 for c in classes)
    assert len(found.slices) == len({pair_class("compute", p) for p in WHOLE}) == 16  # 2 path classes x 8 rails


def test_pair_and_time_slices_keep_to_their_size() -> None:
    by_pairs = cover(FABRIC, "compute", NODES, SliceSize.parse("7"), 3)
    assert max(len(s.pairs) for s in by_pairs.slices) == 7
    budget = 60
    by_time = cover(FABRIC, "compute", NODES, SliceSize.parse(f"{budget}s"), 3)
    round_s = 3 + OMIT_S + ROUND_OVERHEAD_S
    assert all(s.seconds <= budget or len(s.pairs) == 1 for s in by_time.slices)
    assert all(s.seconds == len(s.rounds) * round_s for s in by_time.slices)
    assert len(by_time.slices) < len(by_pairs.slices)  # rounds run pairs at once: a minute holds more than 7


def test_the_whole_cover_crosses_every_rail_leaf_pair_and_leaf_spine_group() -> None:
    whole = cover(FABRIC, "compute", NODES, SliceSize.parse("class"), 3).whole
    leaves = sorted({n.leaf for n in FABRIC.nics})
    assert whole.rails == set(range(8))
    assert whole.leaf_pairs == {tuple(two) for two in combinations(leaves, 2)}
    assert whole.groups == {(leaf, spine) for leaf in leaves for spine in FABRIC.spines[leaf]}


def test_coverage_report_claims_what_the_slices_cross_and_says_when_a_period_is_too_short() -> None:
    found = cover(FABRIC, "compute", NODES, SliceSize.parse("class"), 3)
    report = coverage_report(found, [1, 3], "week")  # 14 runs a week, 16 slices
    assert report["runs_per_period"] == 14 and report["covered_within_period"] is False
    assert coverage_report(found, [1, 3, 5], "week")["covered_within_period"] is True
    rows = report["rotation"]
    assert [r["when"] for r in rows[:3]] == ["day 1 01:00", "day 1 03:00", "day 2 01:00"]
    assert rows[-1]["when"] is None  # the 16th run falls in the next week
    assert rows[-1]["cumulative"] == found.whole.counts()
    for row, s in zip(rows, found.slices, strict=True):
        assert row["crosses"] == crossed_by(FABRIC, "compute", s.pairs).counts()
    assert coverage_report(found, [0, 6, 12, 18], "day")["covered_within_period"] is False


def test_slice_choice_and_rotation() -> None:
    assert SliceChoice.parse("3/16") == SliceChoice(3, 16)
    assert SliceChoice.parse("next/16").resolve(None) == 1
    assert SliceChoice.parse("next/16").resolve(7) == 8
    assert SliceChoice.parse("next/16").resolve(16) == 1
    for bad in ("0/4", "5/4", "next/0", "1/4\n", "a/b", "1/4;rm", "next"):
        with pytest.raises(UsageError):
            SliceChoice.parse(bad)


@pytest.mark.parametrize("bad", ["0", "class;x", "10d", "-3", "1 h", "", "9999999999"])
def test_slice_size_refuses_what_it_cannot_read(bad: str) -> None:
    with pytest.raises(UsageError):
        SliceSize.parse(bad)


def test_hours_are_read_in_order_once() -> None:
    assert parse_hours("3,1,3") == [1, 3]
    for bad in ("24", "", "1;2", "-1", "01:00"):
        with pytest.raises(UsageError):
            parse_hours(bad)


def test_last_slice_reads_this_rotation_only(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    assert last_slice(db, "compute", 16, "class") is None
    for arguments in ("plane=compute seconds=3 nodes=all slice=4/16 slice_size=class",
                      "plane=compute seconds=3 nodes=all slice=2/9 slice_size=class",  # another rotation
                      "plane=storage seconds=3 nodes=all slice=1/16 slice_size=class",
                      "plane=compute seconds=3 nodes=all slice=3/16 slice_size=60s",
                      "plane=compute seconds=3 nodes=all"):
        start_run(db, plan_hash="x", tool="iperf3", pattern="fabric", arguments=arguments)
    assert last_slice(db, "compute", 16, "class") == 4
    assert last_slice(db, "compute", 16, "60s") == 3
    assert last_slice(db, "storage", 16, "class") == 1
    assert last_slice(db, "compute", 5, "class") is None


SPEC = str(Path(__file__).parents[2] / "src/gpunet/spec/examples/scalable-unit.yaml")


@pytest.mark.parametrize("extra", [["--slice", "1/16", "--rail", "0"], ["--slice", "1/16", "--pattern", "topo"],
                                   ["--slice", "1/16", "--pairs", "3"], ["gpu[001-004]", "--slice", "1/16"],
                                   ["--slice", "1/5"], ["--slice", "17/16"],
                                   ["--slice", "next/16", "--slice-size", "x"]])
def test_bench_run_refuses_a_slice_it_cannot_cut(tmp_path: Path, extra: list[str]) -> None:
    """Refused before any node is reached or any run stored (a stale N: the Plan changed since the
    schedule was rendered)."""
    result = CliRunner().invoke(app, ["bench", "run", "--plan", SPEC, "--db", str(tmp_path / "b.sqlite"), *extra])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "b.sqlite").exists()


def test_schedule_next_names_the_slice_after_the_last_and_its_nodes(tmp_path: Path) -> None:
    db = tmp_path / "b.sqlite"
    argv = ["bench", "schedule", "--next", "--plan", SPEC, "--slices", "16", "--db", str(db)]
    first = CliRunner().invoke(app, argv)
    assert first.exit_code == 0 and first.stdout.split()[0] == "1/16", first.output
    start_run(db, plan_hash="x", tool="iperf3", pattern="fabric",
              arguments="plane=compute seconds=3 nodes=all congestion=cubic slice=1/16 slice_size=class")
    second = CliRunner().invoke(app, argv).stdout.split()
    found = cover(FABRIC, "compute", NODES, SliceSize.parse("class"), 3).slices[1]
    assert second[0] == "2/16" and NodeSet(second[1]) == NodeSet.fromlist([n for p in found.pairs for n in p[:2]])
    stale = CliRunner().invoke(app, [*argv[:-4], "--slices", "9", "--db", str(db)])
    assert stale.exit_code == 2 and "render the schedule again" in stale.output
