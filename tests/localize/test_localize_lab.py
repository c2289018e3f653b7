"""The incident as a lab test: the default example's 8 servers, one leaf-spine cable dropping 3 %
of packets; `gpunet localize` names that cable first, on this 2-core machine, in under 60 s."""

from __future__ import annotations

import json
import random
import sys
import time

import pytest
from typer.testing import CliRunner

from gpunet.api.fabric import LocalizeSource, localize
from gpunet.cli.main import app
from gpunet.fabric.cabling import cable_name
from gpunet.lab.build import LAB_PLAN
from gpunet.lab.faults import apply_fault
from gpunet.lab.state import LabState, lab_dir
from gpunet.model.hops import shown
from gpunet.model.plan import Link, Plan
from tests.lab.helpers import run_in
from tests.labs import shared_lab, shared_lab_id, shared_lab_plan

pytestmark = [pytest.mark.lab, pytest.mark.slow]
LAB = shared_lab_id("default8")
runner = CliRunner()


lab = shared_lab("default8")

plan = shared_lab_plan()  # the lab's own plan; conftest heals the lab after every test


def faulty(link: Link) -> str:
    return f"{link.a.device}:{link.a.port}"


def test_a_healthy_lab_names_no_suspect(lab: LabState) -> None:
    result = runner.invoke(app, ["localize", "--lab", LAB, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [s for s in report["suspects"] if s["named"]] == []
    compute = next(p for p in report["planes"] if p["plane"] == "compute")
    assert compute["learned"] == compute["flows"] > 0 and compute["covered"] == compute["cables"]
    # notes about the planes judged only: the management bridge's drops are no evidence here
    assert not [n for n in report["notes"] if "dropped packets" in n or "mgmt-" in n], report["notes"]


def test_three_percent_loss_on_one_uplink_is_named_first(lab: LabState, plan: Plan) -> None:
    """Named first, and alone. How long it took is printed, not asserted: on a loaded 2-core host
    the probes' wall time is the load's (benchmarks/localize_accuracy.py measures it)."""
    uplinks = [link for link in plan.links if link.plane == "compute" and link.tier == "leaf_spine"]
    link = random.Random(14).choice(uplinks)
    apply_fault(lab.lab_id, faulty(link), "loss", "3")
    started = time.monotonic()
    report = localize(LocalizeSource(lab=LAB))
    took = time.monotonic() - started
    assert report.suspects[0].cable == cable_name(link) and report.suspects[0].named
    assert [s.cable for s in report.named] == [cable_name(link)]
    print(f"named in {took:.1f} s")  # shown with -s


def test_loss_on_a_server_cable_is_named_first(lab: LabState, plan: Plan) -> None:
    link = next(link for link in plan.links if link.plane == "compute" and link.tier == "node_leaf"
                and link.a.device == "gpu003" and link.a.port == "ib5")
    apply_fault(lab.lab_id, faulty(link), "loss", "3")
    result = runner.invoke(app, ["localize", "--lab", LAB, "--plane", "compute", "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["suspects"][0]["cable"] == cable_name(link)


def test_an_mtu_drop_on_one_uplink_is_found_by_doctors_path_mtu_check(lab: LabState, plan: Plan) -> None:
    """One of gpu001:ib0's leaf's 16 uplinks at MTU 1500 on a 4092 plane: a ping takes one path
    (and passes, as it did before), the multi-path probe finds the hop that refuses, with its MTU,
    and names the cable (the refusing leaf's next hop on that 5-tuple answers from the cable's
    /31); localize's path-MTU sweep names the same cable first."""
    leaf = next(link.b.device for link in plan.links if link.a.device == "gpu001" and link.a.port == "ib0")
    uplink = next(link for link in plan.links if link.tier == "leaf_spine" and link.a.device == leaf)
    apply_fault(lab.lab_id, f"{uplink.a.device}:{uplink.a.port}", "mtu", "1500")
    done = run_in(LAB, "gpu001", sys.executable, "-m", "gpunet", "doctor", "--plan", str(lab_dir(LAB) / LAB_PLAN),
                  "--peers", "--interval", "0.5", "--json", timeout=300)
    failed = [f for f in json.loads(done.stdout)["findings"] if f["verdict"] == "fail"]
    assert failed and {f["check"] for f in failed} == {"GN-MTU-02"}, failed
    assert all(f["subject"].split()[1] == "compute" for f in failed)
    assert all("refused 4092-byte packets: fragmentation needed at" in f["observed"] and "next-hop MTU 1500"
               in f["observed"] for f in failed), failed
    # The fault sits on one end; the spine refuses on the way down (answering from the /31 it was
    # reached on), the leaf's drop on the way up is silent: either way the cable is the one named.
    named = f"cable {shown(uplink)} (next-hop MTU 1500: "
    assert all(named in f["observed"] and f["observed"].count("cable ") == 1 for f in failed), \
        [f["observed"] for f in failed]  # the words themselves: pytest cuts a list of findings short
    report = localize(LocalizeSource(lab=LAB), planes=["compute"])
    assert report.suspects[0].cable == cable_name(uplink) and report.suspects[0].source.endswith("path-mtu")
    assert [s.cable for s in report.named] == [cable_name(uplink)]
