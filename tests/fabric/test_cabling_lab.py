"""`cabling check --lab` against real lldpd in every namespace of an 8-server small-ethernet lab:
healthy gives nothing; each cable fault made with real veths gives exactly the one right finding;
healed gives nothing again."""

from __future__ import annotations

import shutil
import time

import pytest

from gpunet.api.fabric import CablingSource, cabling_check
from gpunet.fabric.cabling import CablingReport, cable_name
from gpunet.lab.faults import apply_fault, apply_miswire, heal
from gpunet.lab.state import LabState
from gpunet.model.plan import Link, Plan
from tests.labs import shared_lab, shared_lab_id, shared_lab_plan

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(shutil.which("lldpd") is None, reason="needs lldpd (Debian package lldpd; .ci/run "
                                                                       "installs it)")]
LAB = shared_lab_id("ethernet8")


lab = shared_lab("ethernet8")

plan = shared_lab_plan()  # the lab's own plan; conftest heals the lab after every test


def check() -> CablingReport:
    return cabling_check(CablingSource(lab=LAB), None, [])


def findings(report: CablingReport) -> list[tuple[str, set[str]]]:
    return [(f.kind, set(f.cables)) for f in report.findings]


def server_cables(plan: Plan, plane: str) -> list[Link]:
    return [link for link in plan.links if link.plane == plane and link.tier == "node_leaf"]


def leaf_of(link: Link) -> str:
    return link.b.device


def test_a_healthy_lab_has_every_cable_ok(lab: LabState, plan: Plan) -> None:
    report = check()
    assert report.findings == ()
    assert set(report.planes) == {"compute", "management", "storage"}
    assert report.counts == {"ok": sum(1 for link in plan.links if link.plane in report.planes)}


def test_two_server_cables_swapped_on_one_leaf(lab: LabState, plan: Plan) -> None:
    first = server_cables(plan, "compute")[0]
    second = next(link for link in server_cables(plan, "compute")[1:] if leaf_of(link) == leaf_of(first))
    apply_miswire(lab.lab_id, f"{first.a.device}:{first.a.port}", f"{second.a.device}:{second.a.port}")
    assert findings(check()) == [("swapped", {cable_name(first), cable_name(second)})]


def test_two_server_cables_swapped_across_leaves(lab: LabState, plan: Plan) -> None:
    first = server_cables(plan, "storage")[0]
    second = next(link for link in server_cables(plan, "storage") if leaf_of(link) != leaf_of(first))
    apply_miswire(lab.lab_id, f"{first.b.device}:{first.b.port}", f"{second.b.device}:{second.b.port}")
    report = check()
    assert findings(report) == [("swapped", {cable_name(first), cable_name(second)})]
    assert f"{first.b.device}:{first.b.port}" in report.findings[0].fix


def test_two_uplinks_of_a_leaf_swapped(lab: LabState, plan: Plan) -> None:
    uplinks = [link for link in plan.links if link.plane == "compute" and link.tier == "leaf_spine"]
    first = uplinks[0]
    second = next(link for link in uplinks if link.a.device == first.a.device and link.b.device != first.b.device)
    apply_miswire(lab.lab_id, f"{first.a.device}:{first.a.port}", f"{second.a.device}:{second.a.port}")
    assert findings(check()) == [("swapped", {cable_name(first), cable_name(second)})]


def test_a_cable_down_is_missing(lab: LabState, plan: Plan) -> None:
    link = server_cables(plan, "compute")[-1]
    apply_fault(lab.lab_id, f"{link.a.device}:{link.a.port}", "down")
    deadline = time.monotonic() + 60  # lldpd drops a neighbour when its port goes down; give it a moment
    while (found := findings(check())) == [] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert found == [("missing", {cable_name(link)})]


def test_after_heal_the_lab_is_clean_again(lab: LabState, plan: Plan) -> None:
    uplinks = [link for link in plan.links if link.plane == "storage" and link.tier == "leaf_spine"]
    first, last = (f"{link.b.device}:{link.b.port}" for link in (uplinks[0], uplinks[-1]))
    apply_miswire(lab.lab_id, first, last)
    assert len(check().findings) == 1
    heal(lab.lab_id)  # returns once LLDP shows the planned wiring again
    assert check().findings == ()
