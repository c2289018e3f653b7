"""Property tests: every example and random valid specs keep the plan invariants, and growth
never renumbers or recables."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpunet.design import design
from gpunet.errors import DesignError
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec
from tests.design.invariants import assert_oversubscription_within, assert_plan_invariants

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def asked_ratios(spec: Spec) -> dict[str, dict[str, float]]:
    return {name: {"leaf": p.fabric.oversubscription.leaf, "spine": p.fabric.oversubscription.spine}
            for name, p in spec.planes.items()}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_examples_keep_invariants(name: str) -> None:
    spec, _ = parse_spec(example_text(name))
    plan = design(spec)
    assert_plan_invariants(plan)
    assert_oversubscription_within(plan, asked_ratios(spec))


@st.composite
def spec_dicts(draw: st.DrawFn) -> dict[str, Any]:
    """Random valid specs: 1-3 groups of 1-70 nodes, management always, compute/storage maybe."""
    radix = draw(st.sampled_from([16, 32, 48, 64]))
    ratio = draw(st.sampled_from([1, 2, 3]))
    fabric = {"switch": {"radix": radix, "port_speed": "400G"},
              "oversubscription": {"leaf": ratio, "spine": draw(st.sampled_from([1, 3]))}}
    planes: dict[str, Any] = {"management": {"subnet": "198.18.0.0/20", "gateway": "198.18.0.1",
                                              "speed": "25G", "fabric": fabric}}
    compute_nics = draw(st.integers(1, 8))
    if draw(st.booleans()):
        style = draw(st.sampled_from(["auto", "rail-optimized", "three-tier"]))
        planes["compute"] = {"subnet": "198.18.64.0/18", "technology": draw(st.sampled_from(["roce", "infiniband"])),
                             "speed": "400G", "fabric": fabric | {"style": style}}
    bonded = draw(st.booleans())
    if draw(st.booleans()):
        planes["storage"] = {"subnet": "198.18.32.0/19", "technology": "ethernet", "speed": "100G",
                             "fabric": fabric | {"style": draw(st.sampled_from(["auto", "spine-leaf"]))}}
    groups = []
    for g in range(draw(st.integers(1, 3))):
        nics: dict[str, Any] = {"management": {}}
        if "compute" in planes and (g == 0 or draw(st.booleans())):
            nics["compute"] = {"count": compute_nics}
        if "storage" in planes and (g == 0 or draw(st.booleans())):
            nics["storage"] = {"count": 2, "bond": {"name": "bond0"}} if bonded else {"count": 1}
        groups.append({"name": f"g{g}", "nodes": f"g{g}n[1-{draw(st.integers(1, 70))}]", "nics": nics})
    return {"site": {"name": "prop"}, "planes": planes, "groups": groups}


def designed(data: dict[str, Any], previous: Plan | None = None) -> tuple[Spec, Plan]:
    spec = Spec.model_validate(data)
    try:
        return spec, design(spec, previous)
    except DesignError:
        assume(False)  # an infeasible draw (e.g. a fixed 2-tier fabric too big for the radix)
        raise


@SETTINGS
@given(spec_dicts())
def test_random_specs_keep_invariants(data: dict[str, Any]) -> None:
    spec, plan = designed(data)
    assert_plan_invariants(plan)
    assert_oversubscription_within(plan, asked_ratios(spec))


def grown(data: dict[str, Any], extra: list[int], new_group: bool) -> dict[str, Any]:
    """The same spec with `extra[i]` more nodes in group i and maybe one new group."""
    groups = []
    for group, more in zip(data["groups"], extra, strict=False):
        last = int(group["nodes"].split("-")[1].rstrip("]"))
        groups.append(group | {"nodes": f"{group['name']}n[1-{last + more}]"})
    if new_group:
        groups.append({"name": "added", "nodes": "added[1-5]", "nics": data["groups"][0]["nics"]})
    return data | {"groups": groups}


def with_planned(data: dict[str, Any], nodes: int) -> dict[str, Any]:
    planes = {name: p | {"fabric": p["fabric"] | {"planned_nodes": nodes}} for name, p in data["planes"].items()}
    return data | {"planes": planes}


def assignments(plan: Plan) -> tuple[set[tuple[str, str, str | None]], set[tuple[str, str, str, str, str | None]]]:
    """Node addresses, and switch numbers (ASN, loopback, management address) with them; cables
    with their /31."""
    addresses = {(n.name, i.name, i.address) for n in plan.nodes for i in n.interfaces}
    addresses |= {(s.name, key, str(getattr(s, key))) for s in plan.switches
                  for key in ("asn", "loopback", "management") if getattr(s, key) is not None}  # gaining one is growth
    cables = {(c.a.device, c.a.port, c.b.device, c.b.port, c.p2p) for c in plan.links}
    return addresses, cables


@SETTINGS
@given(spec_dicts(), st.lists(st.integers(0, 40), min_size=3, max_size=3), st.booleans())
def test_growth_never_renumbers_or_recables(data: dict[str, Any], extra: list[int], new_group: bool) -> None:
    big = grown(data, extra, new_group)
    planned = len(Spec.model_validate(big).groups) * 200  # upper tiers sized for the growth
    _, before = designed(with_planned(data, planned))
    _, after = designed(with_planned(big, planned), previous=before)
    old_addresses, old_cables = assignments(before)
    new_addresses, new_cables = assignments(after)
    assert old_addresses <= new_addresses
    assert old_cables <= new_cables
    assert_plan_invariants(after)


def test_growth_in_a_middle_group_keeps_later_groups_via_previous_plan() -> None:
    data = {"site": {"name": "g"}, "planes": {"management": {"subnet": "198.18.0.0/24"}},
            "groups": [{"name": "a", "nodes": "a[1-4]", "nics": {"management": {}}},
                       {"name": "b", "nodes": "b[1-4]", "nics": {"management": {}}}]}
    before = design(Spec.model_validate(data))
    bigger = data | {"groups": [data["groups"][0] | {"nodes": "a[1-8]"}, data["groups"][1]]}
    after = design(Spec.model_validate(bigger), previous=before)
    fresh = design(Spec.model_validate(bigger))
    assert assignments(before)[0] <= assignments(after)[0]
    address = {n.name: n.interfaces[0].address for n in fresh.nodes}
    # Without the previous plan, b1 would move: this is why `gpunet plan` reads OUT/plan.json.
    assert address["b1"] != next(n.interfaces[0].address for n in before.nodes if n.name == "b1")


def test_invariant_checks_can_fail() -> None:
    """The checks above are not vacuous: a plan with a reused port or a stray address fails them."""
    plan = design(parse_spec(example_text("small-ethernet"))[0])
    first, second = plan.links[0], plan.links[1]
    reused = plan.model_copy(update={"links": (first, second.model_copy(update={"b": first.b}), *plan.links[2:])})
    with pytest.raises(AssertionError):
        assert_plan_invariants(reused)
    node = plan.nodes[0]
    moved = node.interfaces[0].model_copy(update={"address": "203.0.113.9/24"})
    stray = plan.model_copy(update={"nodes": (node.model_copy(update={"interfaces": (moved,)}), *plan.nodes[1:])})
    with pytest.raises(AssertionError):
        assert_plan_invariants(stray)


@SETTINGS
@given(spec_dicts(), st.lists(st.integers(0, 60), min_size=3, max_size=3), st.integers(1, 8), st.booleans())
def test_any_growth_is_stable_or_refused(data: dict[str, Any], extra: list[int], new_nics: int,
                                         faster: bool) -> None:
    """No planned size, and a new group with its own NIC count and speed: the plan either keeps
    every address and cable, or design refuses with the reason (never a silent recabling)."""
    _, before = designed(data)
    big = grown(data, extra, new_group=True)
    added = big["groups"][-1]
    if "compute" in added["nics"]:
        added["nics"] = added["nics"] | {"compute": {"count": new_nics, "speed": "800G" if faster else "400G"}}
        big["planes"]["compute"]["fabric"]["switch"]["port_speed"] = "800G"
    try:
        after = design(Spec.model_validate(big), previous=before)
    except DesignError as exc:
        assert "(hint: " in str(exc)  # refused, saying why and what to do: never a silent recabling
        return
    old_addresses, old_cables = assignments(before)
    new_addresses, new_cables = assignments(after)
    assert old_addresses <= new_addresses
    assert old_cables <= new_cables


def one_nic_spec(groups: list[tuple[str, int]], planned: int | None = None) -> Spec:
    fabric: dict[str, Any] = {"style": "spine-leaf", "switch": {"radix": 8, "port_speed": "100G"}}
    if planned:
        fabric["planned_nodes"] = planned
    return Spec.model_validate({
        "site": {"name": "s"},
        "planes": {"compute": {"subnet": "198.18.0.0/24", "speed": "100G", "fabric": fabric}},
        "groups": [{"name": f"g{i}", "nodes": f"g{i}n[1-{n}]", "nics": {"compute": {"count": nics}}}
                   for i, (n, nics) in enumerate([(g[1], 1 if g[0] == "one" else 2) for g in groups])],
    })


def test_a_group_with_wider_nodes_is_refused_rather_than_recabling() -> None:
    before = design(one_nic_spec([("one", 8)]))
    with pytest.raises(DesignError, match=r"2 NIC.*existing layout has 1"):
        design(one_nic_spec([("one", 8), ("two", 3)]), previous=before)


def test_outgrowing_the_planned_size_is_refused_and_planned_nodes_avoids_it() -> None:
    # 8 nodes: 2 leaves of 4 under 2 spines, 2 links per pair. 32 nodes: 8 leaves need 4 spines
    # with 1 link per pair, so existing leaf-spine cables would move.
    before = design(one_nic_spec([("one", 8)]))
    with pytest.raises(DesignError, match=r"moves \d+ existing cable"):
        design(one_nic_spec([("one", 32)]), previous=before)
    # 16 nodes still fit 2 spines with 2 links per pair: growth without recabling.
    assert assignments(before)[1] <= assignments(design(one_nic_spec([("one", 16)]), previous=before))[1]
    planned = design(one_nic_spec([("one", 8)], planned=32))
    grown_plan = design(one_nic_spec([("one", 32)], planned=32), previous=planned)
    assert assignments(planned)[1] <= assignments(grown_plan)[1]


def test_a_layout_that_drops_spines_under_unchanged_nodes_is_refused() -> None:
    """Found by the growth property: 800G switch ports halve each leaf's uplinks, so 2 of 4 spines
    and their cables vanish while every node stays; that is recabling, not growth."""
    def spec(port_speed: str) -> Spec:
        fabric = {"style": "rail-optimized", "switch": {"radix": 16, "port_speed": port_speed},
                  "oversubscription": {"leaf": 3}}
        return Spec.model_validate({
            "site": {"name": "s"},
            "planes": {"compute": {"subnet": "198.18.0.0/22", "technology": "roce", "speed": "400G",
                                   "fabric": fabric}},
            "groups": [{"name": "g", "nodes": "g[1-49]", "nics": {"compute": {"count": 2}}}]})

    before = design(spec("400G"))
    spines = {s.name for s in before.switches if s.tier == "spine"}
    with pytest.raises(DesignError, match=r"moves \d+ existing cable"):
        design(spec("800G"), previous=before)
    assert spines - {s.name for s in design(spec("800G")).switches if s.tier == "spine"}  # spines do vanish
