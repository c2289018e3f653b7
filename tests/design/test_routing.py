"""Switch numbering on routed planes (RFC 7938 eBGP): loopbacks, /31s, ASNs and management
addresses, from the spec's pools or the defaults, stable under growth, refused located when a pool
cannot hold the fabric."""

from __future__ import annotations

import json
from collections import Counter
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpunet.cli.main import app
from gpunet.design import design
from gpunet.errors import DesignError, SpecError
from gpunet.model.plan import Plan
from gpunet.model.spec import Spec
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec
from tests.design.invariants import assert_plan_invariants, assert_switch_numbering
from tests.render.rendered import example_plan


def spec(nodes: int, planned: int | None = 128, **routing: Any) -> Spec:
    """A RoCE rail-optimized compute plane, an Ethernet spine-leaf storage plane (both routed) and a
    management plane; 16-port switches so a few dozen nodes make several leaves and spines."""
    fabric: dict[str, Any] = {"switch": {"radix": 16, "port_speed": "400G"}, "min_spines": 2}
    if planned:
        fabric["planned_nodes"] = planned
    return Spec.model_validate({
        "site": {"name": "grow"},
        "planes": {
            "management": {"subnet": "198.18.0.0/22", "gateway": "198.18.0.1", "speed": "25G", "fabric": fabric},
            "compute": {"subnet": "198.18.16.0/20", "technology": "roce", "speed": "400G",
                        "fabric": fabric | {"style": "rail-optimized"}, "routing": routing or None},
            "storage": {"subnet": "198.18.8.0/22", "speed": "100G", "fabric": fabric | {"style": "spine-leaf"}},
        },
        "groups": [{"name": "gpu", "nodes": f"gpu[001-{nodes:03d}]",
                    "nics": {"management": {}, "compute": {"count": 4}, "storage": {}}}],
    })


def numbers(plan: Plan) -> tuple[dict[str, tuple[int | None, str | None, str | None]], dict[str, str | None]]:
    switches = {s.name: (s.asn, s.loopback, s.management) for s in plan.switches}
    cables = {f"{c.a.device}:{c.a.port}-{c.b.device}:{c.b.port}": c.p2p for c in plan.links if c.p2p}
    return switches, cables


def test_growth_32_64_128_moves_no_switch_number() -> None:
    plans = [design(spec(32))]
    for nodes in (64, 128):
        plans.append(design(spec(nodes), plans[-1]))
    for before, after in pairwise(plans):
        old_switches, old_cables = numbers(before)
        new_switches, new_cables = numbers(after)
        assert {k: new_switches[k] for k in old_switches} == old_switches
        assert {k: new_cables[k] for k in old_cables} == old_cables
        assert len(new_switches) > len(old_switches) and len(new_cables) > len(old_cables)  # it did grow
        assert_plan_invariants(after)


def test_growth_without_the_previous_plan_would_not_promise_it() -> None:
    """The previous plan is what keeps numbers: a fresh plan of the grown spec numbers switches in
    its own order (here, the management leaves' addresses and the planes' ASN order differ)."""
    grown = design(spec(64), design(spec(32)))
    assert numbers(grown) != numbers(design(spec(64, planned=None)))


def test_rfc7938_asns_two_tiers() -> None:
    plan = design(spec(32, planned=None))
    compute = [s for s in plan.switches if s.plane == "compute"]
    assert {s.tier for s in compute} == {"leaf", "spine"}
    spines = {s.asn for s in compute if s.tier == "spine"}
    leaves = [s.asn for s in compute if s.tier == "leaf"]
    assert len(spines) == 1 and len(set(leaves)) == len(leaves) and not spines & set(leaves)
    assert spines == {4_210_000_000} and sorted(leaves)[0] == 4_210_000_001  # 4-byte private, plane 1's block


def test_rfc7938_asns_three_tiers_spines_per_pod_and_cores_one() -> None:
    text = example_text("multi-unit-large").replace("technology: infiniband", "technology: roce").replace(
        "speed: NDR", "speed: 400G").replace("port_speed: NDR", "port_speed: 400G")
    plan = design(parse_spec(text)[0])
    compute = [s for s in plan.switches if s.plane == "compute"]
    assert {s.tier for s in compute} == {"leaf", "spine", "core"}
    by_pod = {(s.pod, s.asn) for s in compute if s.tier == "spine"}
    assert len(by_pod) == len({pod for pod, _ in by_pod}) > 1  # one ASN per pod, pods differ
    assert len({s.asn for s in compute if s.tier == "core"}) == 1
    assert_switch_numbering(plan)


def test_spec_pools_and_asns_are_used() -> None:
    plan = design(spec(32, loopbacks="10.1.0.0/24", p2p="10.2.0.0/22", asn_base=65000, asn_last=65100))
    compute = [s for s in plan.switches if s.plane == "compute"]
    assert all(IPv4Address(s.loopback or "") in IPv4Network("10.1.0.0/24") for s in compute)
    assert all(s.asn is not None and 65000 <= s.asn <= 65100 for s in compute)
    routing = next(p.routing for p in plan.planes if p.name == "compute")
    assert routing is not None and (routing.asn_first, routing.asn_last) == (65000, 65100)
    assert all(IPv4Network(c.p2p).subnet_of(IPv4Network("10.2.0.0/22")) for c in plan.links if c.p2p
               and c.plane == "compute")


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_every_switch_of_every_example_has_a_management_address(name: str) -> None:
    plan = example_plan(name)  # designed once per process, shared with the other modules
    assert all(s.management for s in plan.switches)
    assert_switch_numbering(plan)


def test_management_addresses_top_of_oob_or_management_subnet() -> None:
    scalable = design(parse_spec(example_text("scalable-unit"))[0])  # has an oob plane: there
    oob = IPv4Network("198.18.1.0/24")
    addresses = sorted((IPv4Interface(s.management or "").ip for s in scalable.switches), reverse=True)
    assert all(a in oob for a in addresses) and addresses[0] == IPv4Address("198.18.1.254")
    assert addresses == [IPv4Address(int(IPv4Address("198.18.1.254")) - i) for i in range(len(addresses))]
    small = design(parse_spec(example_text("small-ethernet"))[0])  # no oob plane: management
    assert all(s.management and s.management.endswith("/24") and s.management.startswith("198.18.0.")
               for s in small.switches)


def test_site_switch_management_subnet() -> None:
    data = spec(32).model_dump(mode="json", exclude_none=True)
    data["site"]["switch_management"] = {"subnet": "198.18.100.0/24", "gateway": "198.18.100.1"}
    plan = design(Spec.model_validate(data))
    addresses = [IPv4Interface(s.management or "") for s in plan.switches]
    assert all(a.network == IPv4Network("198.18.100.0/24") for a in addresses)
    assert IPv4Address("198.18.100.1") not in {a.ip for a in addresses} and min(a.ip for a in addresses) == \
        IPv4Address("198.18.100.2")


def test_nodes_growing_into_the_top_skip_switch_addresses() -> None:
    """A small management subnet: nodes grow up toward the switches' addresses at the top, neither
    moves the other, and a full subnet is refused rather than moving a switch."""
    def small(nodes: int) -> Spec:
        return Spec.model_validate({
            "site": {"name": "s"}, "planes": {"management": {
                "subnet": "198.18.0.0/26", "speed": "100G",
                "fabric": {"switch": {"radix": 16, "port_speed": "100G"}, "planned_nodes": 48}}},
            "groups": [{"name": "g", "nodes": f"g[01-{nodes:02d}]", "nics": {"management": {}}}]})
    before = design(small(8))
    after = design(small(48), before)
    switch_ips = {IPv4Interface(s.management or "").ip for s in after.switches}
    node_ips = {IPv4Interface(i.address or "").ip for n in after.nodes for i in n.interfaces}
    assert len(after.switches) > len(before.switches) and not switch_ips & node_ips
    assert numbers(before)[0].items() <= numbers(after)[0].items()
    with pytest.raises(DesignError, match=r"is full \(\d+ of its addresses are switch management"):
        design(small(60), after)
    with pytest.raises(DesignError, match=r"no management address left for \d+ of \d+ switches"):
        design(small(56))  # fresh: nodes first, the switches do not fit above them


def refused(spec_data: dict[str, Any]) -> DesignError:
    with pytest.raises(DesignError) as caught:
        design(Spec.model_validate(spec_data))
    return caught.value


def spec_dict(**routing: Any) -> dict[str, Any]:
    return spec(32, **routing).model_dump(mode="json", exclude_none=True)


def test_pools_too_small_are_refused_at_their_key() -> None:
    error = refused(spec_dict(loopbacks="10.1.0.0/29", p2p="10.2.0.0/28"))
    keys = Counter(p.path for p in error.problems)
    assert keys == {("planes", "compute", "routing", "loopbacks"): 1, ("planes", "compute", "routing", "p2p"): 1}
    assert "holds 6 of this plane's" in str(error) and "use a /" in str(error)


def test_an_asn_range_that_cannot_hold_the_leaves_is_refused() -> None:
    error = refused(spec_dict(asn_base=65530))
    assert error.problems[0].path == ("planes", "compute", "routing", "asn_base")
    assert "ASNs 65530-65534 hold 5" in error.problems[0].message and "allowas-in" in error.problems[0].hint


def test_overlapping_pools_are_refused() -> None:
    error = refused(spec_dict(loopbacks="198.18.16.0/24", p2p="10.3.0.0/16"))  # inside compute's own subnet
    assert [p.path for p in error.problems] == [("planes", "compute", "routing", "loopbacks")]
    assert "overlaps plane compute's subnet 198.18.16.0/20" in error.problems[0].message
    data = spec_dict(loopbacks="10.3.0.0/24", p2p="10.3.0.0/16")
    assert "overlaps plane compute's loopbacks pool" in str(refused(data))


def test_a_default_pool_overlapping_a_plane_is_refused_naming_the_default() -> None:
    data = spec_dict()
    data["planes"]["storage"]["subnet"] = "10.208.0.0/16"  # storage's own default /31 pool is 10.208.0.0/13
    error = refused(data)
    assert error.problems[0].path == ("planes", "storage", "routing", "p2p")
    assert "default p2p pool 10.208.0.0/13" in error.problems[0].message


def test_routing_keys_are_checked_where_they_are_written() -> None:
    for routing, key in (({"asn_base": 100}, "asn_base"), ({"asn_base": 64512, "asn_last": 4200000005}, "asn_last")):
        text = example_text("small-ethernet").replace("    technology: ethernet\n    speed: 25G\n    fabric:\n"
                                                      "      style: spine-leaf", "    technology: ethernet\n    "
                                                      f"speed: 25G\n    routing: {routing}\n    fabric:\n      "
                                                      "style: spine-leaf")
        with pytest.raises(SpecError) as caught:
            parse_spec(text)
        assert caught.value.problems[0].path[-1] == key, caught.value


@pytest.mark.parametrize(("routing", "key", "says"), [
    ("{loopbacks: 10.1.0.0/30}", "loopbacks", "holds"),  # too small for the plane's switches
    ("{loopbacks: 198.18.4.0/28}", "loopbacks", "overlaps"),  # inside the plane's own subnet
    ("{asn_base: 65533}", "asn_base", "allowas-in"),  # two ASNs for more leaves and the spines
])
def test_a_routing_pool_that_cannot_work_is_exit_2_located_at_its_key(tmp_path: Path, routing: str, key: str,
                                                                     says: str) -> None:
    """Through the command line: bad input (exit 2) naming where in the spec, as every spec error."""
    text = example_text("small-ethernet").replace(
        "    speed: 25G\n    fabric:\n      style: spine-leaf",
        f"    speed: 25G\n    routing: {routing}\n    fabric:\n      style: spine-leaf")
    (tmp_path / "cluster.yaml").write_text(text)
    done = CliRunner().invoke(app, ["plan", str(tmp_path / "cluster.yaml"), "-o", str(tmp_path / "out"), "--json"])
    assert done.exit_code == 2, done.output
    problems = json.loads(done.stdout)["problems"]
    located = [p for p in problems if p.get("path", [])[-1:] == [key]]
    assert any(says in p["message"] + p.get("hint", "") for p in located), problems
