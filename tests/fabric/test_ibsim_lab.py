"""The Plan's InfiniBand plane in ibsim with opensm, read by the unmodified infiniband-diags tools:
the default example healthy, 20 seeded single faults each found exactly, rates and moves on a
small fabric, opensm's fat-tree routing on the rail-optimized examples, nothing left running."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpunet.api import plan_spec
from gpunet.api.fabric import CablingSource, cabling_check
from gpunet.fabric.cabling import CablingReport, cable_name
from gpunet.lab.ibsim import apply_fault, heal, ibsim_down, ibsim_up, missing_tools, routing_used, run_tool, sim_plan
from gpunet.lab.ibsim_state import IbFault, IbsimState, read_sim, sim_dir
from gpunet.lab.slice import slice_plan
from gpunet.model.plan import Link, Plan
from tests.render.rendered import example_plan

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(bool(missing_tools()), reason=f"needs {', '.join(missing_tools())} (.ci/run installs "
                                                               "them)")]
TINY = Path(__file__).parent.parent / "fixtures" / "ibnetdiscover" / "ibsim-0.10-tiny-hdr-healthy" / "spec.yaml"


@pytest.fixture(scope="module")
def default_sim() -> Iterator[IbsimState]:
    """The default example: 32 servers x 8 HCAs, 8 leaves, 4 spines (512 cables)."""
    try:
        yield ibsim_up(example_plan("scalable-unit"), "zi")
    finally:
        ibsim_down("zi")


@pytest.fixture(scope="module")
def tiny_sim() -> Iterator[IbsimState]:
    """Four 2-HCA servers on 4 leaves of radix 8: free ports to move a cable into."""
    try:
        yield ibsim_up(plan_spec(TINY), "zj")
    finally:
        ibsim_down("zj")


def check(sim_id: str) -> CablingReport:
    return cabling_check(CablingSource(ibsim=sim_id), None, [])


def end(link: Link, side: str = "a") -> str:
    port = link.a if side == "a" else link.b
    return f"{port.device}:{port.port}"


def test_the_default_example_is_healthy_and_routed_as_a_fat_tree(default_sim: IbsimState) -> None:
    report = check("zi")
    assert report.findings == ()
    assert report.counts == {"ok": 512}
    assert routing_used(default_sim) == "ftree"


@pytest.mark.parametrize("tool", [["iblinkinfo"], ["ibqueryerrors"], ["perfquery"], ["ibnetdiscover", "-p"],
                                  ["ibtracert", "1", "2"]])
def test_the_unmodified_diagnostic_tools_run_against_it(default_sim: IbsimState, tool: list[str]) -> None:
    done = run_tool(default_sim.sim_id, tool, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()


def test_a_port_counter_set_in_the_simulator_shows_in_ibqueryerrors(default_sim: IbsimState) -> None:
    plan = sim_plan("zi")
    uplink = next(link for link in plan.links if link.tier == "leaf_spine" and link.plane == "compute")
    apply_fault("zi", IbFault(kind="counter", end=end(uplink), value="PortCounters.SymbolErrorCounter=100"))
    try:
        done = run_tool("zi", ["ibqueryerrors"])
        errors = done.stdout
        assert f'"{uplink.a.device}"' in errors and "SymbolErrorCounter == 100" in errors, (done.returncode,
                                                                                           done.stderr, errors)
    finally:
        heal("zi")


def random_fault(plan: Plan, rng: random.Random) -> tuple[IbFault, str, set[str]]:
    """A pulled cable, a rail cable in the wrong leaf (a server's two HCA cables exchanged), or two
    cables of one tier swapped; with the finding it must give."""
    links = [link for link in plan.links if link.plane == "compute"]
    kind = rng.choice(["unplug", "miswire", "swap"])
    first = rng.choice(links)
    if kind == "unplug":
        return IbFault(kind="unplug", end=end(first, rng.choice("ab"))), "missing", {cable_name(first)}
    if kind == "miswire":
        first = rng.choice([link for link in links if link.tier == "node_leaf"])
        second = rng.choice([link for link in links if link.tier == "node_leaf" and link.a.device == first.a.device
                             and link is not first])
    else:
        second = rng.choice([link for link in links if link.tier == first.tier and link is not first
                             and link.b.device != first.b.device])
    side = "a" if kind == "miswire" else rng.choice("ab")
    return (IbFault(kind="swap", end=end(first, side), other=end(second, side)), "swapped",
            {cable_name(first), cable_name(second)})


@pytest.mark.slow
def test_twenty_random_single_faults_each_give_exactly_the_right_finding(default_sim: IbsimState) -> None:
    plan = sim_plan("zi")
    rng = random.Random(2026)
    found = 0
    for _ in range(20):
        fault, kind, cables = random_fault(plan, rng)
        apply_fault("zi", fault)
        try:
            report = check("zi")
        finally:
            heal("zi")
        assert [(f.kind, set(f.cables)) for f in report.findings] == [(kind, cables)], fault
        found += 1
    assert found == 20


def test_a_cable_in_a_free_port_is_told_as_a_move(tiny_sim: IbsimState) -> None:
    plan = sim_plan("zj")
    server = next(link for link in plan.links if link.tier == "node_leaf" and link.plane == "compute")
    leaf = server.b.device
    used = {int(p.port) for link in plan.links for p in (link.a, link.b) if p.device == leaf}
    free = f"{leaf}:{min(set(range(1, 9)) - used)}"
    apply_fault("zj", IbFault(kind="move", end=end(server), other=free))
    try:
        report = check("zj")
    finally:
        heal("zj")
    fix = f"move the cable in {free} to {end(server, 'b')}"
    assert [(f.kind, f.fix) for f in report.findings] == [("miswired", fix)], [f.model_dump() for f in report.findings]


@pytest.mark.parametrize(("rate", "kind", "shown"), [("2xHDR", "width", "2xHDR, planned 4xHDR"),
                                                     ("4xEDR", "speed", "4xEDR, planned 4xHDR")])
def test_a_degraded_cable_is_found(tiny_sim: IbsimState, rate: str, kind: str, shown: str) -> None:
    plan = sim_plan("zj")
    uplink = next(link for link in plan.links if link.tier == "leaf_spine" and link.plane == "compute")
    apply_fault("zj", IbFault(kind="rate", end=end(uplink, "b"), value=rate))
    try:
        report = check("zj")
    finally:
        heal("zj")
    assert [(f.kind, f.cables, f.observed) for f in report.findings] == [(kind, (cable_name(uplink),), shown)]


def test_opensm_routes_the_large_examples_slice_as_a_fat_tree() -> None:
    """multi-unit-large is over ibsim's limits: the slice keeps the same leaf groups in the first
    and last pod, and ftree accepts it."""
    try:
        state = ibsim_up(example_plan("multi-unit-large"), "zk")
        assert routing_used(state) == "ftree"
        assert any("slice of 192 servers" in note for note in state.notes), state.notes
    finally:
        ibsim_down("zk")


def test_an_uneven_slice_is_refused_by_ftree_and_the_reason_is_said() -> None:
    """Two leaf groups in one pod and one in another: spines of one rank with 16 and 8 downward
    port groups. opensm falls back to minhop; gpunet says why."""
    uneven = slice_plan(example_plan("multi-unit-large"), 97)
    try:
        state = ibsim_up(uneven, "zl")
        used = routing_used(state)
        assert used.startswith("minhop (ftree refused: Different number of downward port groups"), used
    finally:
        ibsim_down("zl")


def test_down_leaves_no_process_and_no_files() -> None:
    state = ibsim_up(example_plan("scalable-unit"), "zm")
    pids = [pid for pid in (state.ibsim_pid, state.opensm_pid) if pid]
    assert len(pids) == 2 and all(Path(f"/proc/{pid}").exists() for pid in pids)
    assert ibsim_down("zm")
    assert not any(Path(f"/proc/{pid}").exists() and _not_zombie(pid) for pid in pids)
    assert read_sim("zm") is None and not sim_dir("zm").exists()
    assert not list(Path(os.getcwd()).glob("sys-*")), "libumad2sim's sysfs left in the working directory"


def _not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False
