"""What-ifs side by side, and the readers of sizes and pattern files."""

from __future__ import annotations

import pytest

from gpunet.api.plans import load, load_plan
from gpunet.errors import UsageError
from gpunet.sim import SimOptions
from gpunet.sim.whatif import Scenario, oversubscribed, parse_pattern, parse_sizes, side_by_side


def test_sizes_read_as_nccl_tests_writes_them() -> None:
    assert parse_sizes("8M, 1G,512,1k,8MB,2GiB") == (512, 1024, 8 << 20, 1 << 30, 2 << 30)
    for bad in ("", "8X", "1.5G", "-1M", "2T"):
        with pytest.raises(UsageError):
            parse_sizes(bad)


def test_patterns_are_pairs_of_nodes() -> None:
    assert parse_pattern("# comment\ngpu1 gpu2\n\ngpu2 gpu3 4  # rail 4\n") == (("gpu1", "gpu2", None),
                                                                             ("gpu2", "gpu3", 4))
    for bad in ("gpu1\n", "gpu1 gpu1\n", "gpu1 gpu2 x\n", "a b 1 2\n", "# nothing\n"):
        with pytest.raises(UsageError):
            parse_pattern(bad)


def test_scenarios_keep_the_job_and_change_one_thing() -> None:
    plan = load_plan(None)
    spec = load(None)[0]
    again = oversubscribed(spec, "compute", 2)
    assert next(c for c in again.capacity if c.plane == "compute").oversubscription["leaf"] == 2
    reports = side_by_side(plan, None, SimOptions(sizes=(1 << 30,)), [
        Scenario(name="leaf down", down=("comp-leaf003",)), Scenario(name="16", nodes=tuple(f"gpu{i:03d}" for i in
                                                                                            range(1, 17))),
        Scenario(name="2:1", plan=again)])
    assert [r.scenario for r in reports] == ["as planned", "leaf down", "16", "2:1"]
    assert reports[1].down == ("comp-leaf003",) and reports[1].busbw < reports[0].busbw
    assert reports[2].nodes == 16 and reports[3].busbw == pytest.approx(reports[0].busbw)
    with pytest.raises(UsageError, match="compute"):
        oversubscribed(spec, "fabric", 2)
