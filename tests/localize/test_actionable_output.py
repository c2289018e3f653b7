"""What `gpunet localize` says is something a person can act on (issue 26): a second independent
fault reads as sure as the first; a runner-up says what its losses are instead of "explains 100 %";
the fix speaks the cable's technology (no ethtool on InfiniBand); notes are about the plane judged."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gpunet.api import plan_spec
from gpunet.fabric.counters import EthPortErrors
from gpunet.localize.report import cable_fix, probing_suspect
from gpunet.localize.run import on_planes
from gpunet.localize.tomography import blame
from gpunet.model.plan import Plan
from tests.localize.test_tomography import DOWNLINKS, UPLINKS, flows
from tests.render.rendered import example_plan

SMALL = Path(__file__).parent.parent / "fixtures" / "lab" / "small.yaml"


@pytest.fixture(scope="module")
def small() -> Plan:
    return plan_spec(SMALL)


def test_two_independent_faults_read_as_sure_as_each_other(small: Plan) -> None:
    ranked = blame(flows(random.Random(3), {UPLINKS[0]: 0.03, DOWNLINKS[6]: 0.02}, count=400))
    named = [probing_suspect(small, "compute", b) for b in ranked if b.taken]
    assert len(named) == 2 and all(s.confidence >= 0.95 for s in named), [s.confidence for s in named]
    alone = probing_suspect(small, "compute", blame(flows(random.Random(1), {UPLINKS[3]: 0.03}))[0])
    assert abs(alone.confidence - named[1].confidence) < 0.05


def test_a_runner_up_says_what_its_losses_are(small: Plan) -> None:
    ranked = blame(flows(random.Random(1), {UPLINKS[3]: 0.03}))
    runners = [probing_suspect(small, "compute", b) for b in ranked if not b.taken]
    assert runners, "a lossy fabric lists runners-up"
    for runner in runners:
        said = " ".join(runner.evidence)
        assert "explains 100" not in said and "of all lost packets" not in said
        assert f"also cross {UPLINKS[3]}, which explains them" in said
        assert runner.confidence < 0.5 and not runner.named


def test_the_fix_speaks_the_cables_technology(small: Plan) -> None:
    infiniband = example_plan("scalable-unit")
    hca = next(link for link in infiniband.links if link.plane == "compute" and link.tier == "node_leaf")
    cable = f"{hca.a.device}:{hca.a.port} {hca.b.device}:{hca.b.port}"
    assert "ethtool" not in cable_fix(infiniband, cable) and "perfquery" in cable_fix(infiniband, cable)
    nic = next(link for link in small.links if link.plane == "compute" and link.tier == "node_leaf")
    assert "ethtool -S" in cable_fix(small, f"{nic.a.device}:{nic.a.port} {nic.b.device}:{nic.b.port}")


def test_only_the_judged_planes_switch_ports_are_read(small: Plan) -> None:
    ports = [EthPortErrors(device="mgmt-leaf001", interface="p1", counters={"rx_dropped": 16}),
             EthPortErrors(device="comp-leaf001", interface="p5", counters={"rx_errors": 3})]
    assert [p.device for p in on_planes(small, ports, ["compute"])] == ["comp-leaf001"]
