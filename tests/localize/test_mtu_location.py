"""A path-MTU refusal located on the Plan's cables (issue 26): the hop's address mapped through the
cables' /31s (the exact cable) or the switches' loopbacks (the switch, the cable inferred from the
next hop and said so); localize's sweep turns a refusal on a learned path into the cable it could
not be sent into, ranked above any statistical suspect."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunet.api import plan_spec
from gpunet.checks.peers import located_refusal
from gpunet.fabric.cabling import cable_name
from gpunet.localize.probing import egress
from gpunet.localize.report import Suspect, merge, mtu_suspect
from gpunet.model.hops import PlanAddresses
from gpunet.model.plan import Plan
from gpunet.probe.peers import Refusal

SMALL = Path(__file__).parent.parent / "fixtures" / "lab" / "small.yaml"
LEAF1, LEAF2, SPINE1 = "10.255.64.1", "10.255.64.2", "10.255.64.3"  # loopbacks
SPINE1_FROM_LEAF1 = "10.200.0.1"  # comp-spine001:1's end of 10.200.0.0/31 (comp-leaf001:5)
LEAF2_FROM_SPINE1 = "10.200.0.8"  # comp-leaf002:5's end of 10.200.0.8/31 (comp-spine001:3)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_spec(SMALL)


def target(plan: Plan, leaf: str) -> str:
    """The compute address of the first node under `leaf`."""
    node = next(link.a.device for link in plan.links if link.b.device == leaf and link.tier == "node_leaf")
    found = plan.node(node)
    assert found is not None
    return next(i.address for i in found.interfaces if i.plane == "compute" and i.address).split("/")[0]


@pytest.mark.parametrize(("refusal", "said"), [
    # the source's leaf refuses (answering from its loopback): the next hop's /31 is on the cable
    (Refusal(LEAF1, 1500, (LEAF1, SPINE1_FROM_LEAF1, LEAF2_FROM_SPINE1)),
     "cable comp-leaf001:5 <-> comp-spine001:1 (next-hop MTU 1500: comp-leaf001 cannot send the plane MTU into it)"),
    # the spine refuses, answering from its inbound /31: the next hop names the cable down
    (Refusal(SPINE1_FROM_LEAF1, 1500, (LEAF1, SPINE1_FROM_LEAF1, LEAF2_FROM_SPINE1)),
     "cable comp-leaf002:5 <-> comp-spine001:3 (next-hop MTU 1500: comp-spine001 cannot send the plane MTU into it)"),
    # the next hop answered from its loopback: two cables join the spine and that leaf
    (Refusal(SPINE1, 1500, (LEAF1, SPINE1, LEAF2)),
     "at comp-spine001 (next-hop MTU 1500): inferred from the next hop, cable comp-leaf002:5 <-> comp-spine001:3 "
     "or comp-leaf002:6 <-> comp-spine001:4"),
    (Refusal(SPINE1, 1500, ()),
     "at comp-spine001 (next-hop MTU 1500): one of its cables toward TARGET (the path past it was not learned)"),
    (Refusal("192.0.2.7", 1400, ()), "192.0.2.7 is no address of the plan (next-hop MTU 1400)"),
])
def test_a_refusing_hop_is_said_as_the_plans_cable(plan: Plan, refusal: Refusal, said: str) -> None:
    far = target(plan, "comp-leaf002")
    assert located_refusal(PlanAddresses(plan), refusal, far) == said.replace("TARGET", far)


def test_the_last_leaf_refusing_names_the_targets_own_cable(plan: Plan) -> None:
    far = target(plan, "comp-leaf002")
    said = located_refusal(PlanAddresses(plan), Refusal(LEAF2_FROM_SPINE1, 1500, (LEAF1, SPINE1_FROM_LEAF1,
                                                                                  LEAF2_FROM_SPINE1)), far)
    node_cable = next(link for link in plan.links if link.b.device == "comp-leaf002" and link.tier == "node_leaf")
    assert said.startswith(f"cable {cable_name(node_cable).replace(' ', ' <-> ')} (next-hop MTU 1500")


def test_the_egress_of_a_device_on_a_learned_path(plan: Plan) -> None:
    links = {cable_name(link): link for link in plan.links}
    path = ("gpu1:ens1 comp-leaf001:1", "comp-leaf001:5 comp-spine001:1", "comp-leaf002:5 comp-spine001:3",
            "gpu5:ens1 comp-leaf002:1")
    assert all(name in links for name in path), sorted(links)
    assert egress(links, path, "gpu1", "comp-leaf001") == "comp-leaf001:5 comp-spine001:1"
    assert egress(links, path, "gpu1", "comp-spine001") == "comp-leaf002:5 comp-spine001:3"
    assert egress(links, path, "gpu1", "comp-leaf002") == "gpu5:ens1 comp-leaf002:1"
    assert egress(links, path, "gpu1", "comp-spine002") is None


def test_an_mtu_refusal_ranks_above_a_probing_suspect() -> None:
    guess = Suspect(cable="a:1 b:1", plane="compute", source="probing", confidence=0.6, evidence=("x",), fix="f")
    refused = mtu_suspect("compute", "c:2 d:2", ["d refused"], 4092)
    ranked = merge([guess], [refused])
    assert [s.cable for s in ranked] == ["c:2 d:2", "a:1 b:1"]
    assert ranked[0].fix.startswith("set MTU 4092 (the plane's) on both ends of the cable c:2 <-> d:2")
    both = merge([guess], [mtu_suspect("compute", "a:1 b:1", ["b refused"], 4092)])
    assert both[0].source == "probing+path-mtu" and both[0].fix.startswith("set MTU 4092")
