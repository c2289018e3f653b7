"""The Plan's cross-checks (model/consistency.py): each rule's words, and the order the problems are
told in, which read_plan reports the first of (one walk over the interfaces and one over the cables
gathers what every check needs)."""

from __future__ import annotations

from typing import Any

import pytest

from gpunet.design import design
from gpunet.model.consistency import cross_reference_problems
from gpunet.model.plan import Plan
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec


@pytest.fixture(scope="module")
def plan() -> Plan:
    return design(parse_spec(example_text("small-ethernet"))[0])


def _with_link(plan: Plan, index: int, **update: Any) -> Plan:
    links = list(plan.links)
    links[index] = links[index].model_copy(update=update)
    return plan.model_copy(update={"links": tuple(links)})


def _with_interface(plan: Plan, node: int, **update: Any) -> Plan:
    nodes = list(plan.nodes)
    interfaces = list(nodes[node].interfaces)
    interfaces[0] = interfaces[0].model_copy(update=update)
    nodes[node] = nodes[node].model_copy(update={"interfaces": tuple(interfaces)})
    return plan.model_copy(update={"nodes": tuple(nodes)})


def _end(plan: Plan, index: int, side: str, **update: Any) -> Plan:
    return _with_link(plan, index, **{side: getattr(plan.links[index], side).model_copy(update=update)})


def test_a_plan_as_designed_has_no_problem(plan: Plan) -> None:
    assert list(cross_reference_problems(plan)) == []


def test_cable_ends_are_ports_of_their_device(plan: Plan) -> None:
    to_switch = next(i for i, link in enumerate(plan.links) if link.b.device in {s.name for s in plan.switches})
    switch = plan.links[to_switch].b.device
    radix = next(s.radix for s in plan.switches if s.name == switch)
    assert list(cross_reference_problems(_end(plan, to_switch, "b", port=f"0{radix}"))) == []  # "064" is port 64
    for port in (str(radix + 1), "0", "x1"):
        assert list(cross_reference_problems(_end(plan, to_switch, "b", port=port))) == [
            f"cable end {switch}:{port} is not a port of that switch"]
    node = plan.links[0].a.device
    assert list(cross_reference_problems(_end(plan, 0, "a", port="eth9"))) == [
        f"cable end {node}:eth9 is not an interface of a node or a switch of the plan"]


def test_problems_are_told_in_the_order_of_the_checks(plan: Plan) -> None:
    """A /31 problem is met on the walk over the cables but told after the addresses'; a cable's
    after a hostname given twice; a node's address after the cables'."""
    routed = next(i for i, link in enumerate(plan.links) if link.p2p is not None)
    broken = _with_link(plan, routed, p2p="10.99.0.0/30")
    broken = _end(broken, 0, "a", port="eth9")
    broken = _with_interface(broken, 1, address="203.0.113.5/24")
    broken = _with_interface(broken, 2, hostname=plan.nodes[3].interfaces[0].hostname)
    node1, node2 = broken.nodes[1], broken.nodes[2]
    assert list(cross_reference_problems(broken)) == [
        f"hostname {node2.interfaces[0].hostname!r} is given twice",
        f"cable end {plan.links[0].a.device}:eth9 is not an interface of a node or a switch of the plan",
        f"{node1.name}/{node1.interfaces[0].name}: address 203.0.113.5/24 is outside plane "
        f"{node1.interfaces[0].plane}'s {next(p.subnet for p in plan.planes if p.name == node1.interfaces[0].plane)}",
        f"cable {plan.links[routed].a.device}:{plan.links[routed].a.port}: 10.99.0.0/30 is not a /31 of its own",
    ]


def test_a_device_name_given_twice_comes_first(plan: Plan) -> None:
    nodes = list(plan.nodes)
    nodes[1] = nodes[1].model_copy(update={"name": nodes[0].name})
    problems = list(cross_reference_problems(plan.model_copy(update={"nodes": tuple(nodes)})))
    assert problems[0] == f"device name {nodes[0].name!r} is used twice (nodes and switches need names of their own)"
