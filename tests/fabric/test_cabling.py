"""Every planned cable against a reported fabric, without a lab or simulator: observations built
from the plan and then broken one fault at a time, LLDP names as switches write them, and the
simulator's own topology file read back through the ibnetdiscover parser."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from gpunet.design import design
from gpunet.fabric.cabling import CablingReport, _Fabric, _unplanned, _verdict, cable_name, check_cabling, ends
from gpunet.fabric.ibnetdiscover import parse_ibnetdiscover
from gpunet.fabric.observed import UNKNOWN, End, Observation, Seen, from_ibnetdiscover, from_lldp
from gpunet.lab.ibsim_topology import render_topology, sim_fabric
from gpunet.model.plan import Link, Plan
from gpunet.probe.lldp import LldpNeighbor
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec
from tests.render.rendered import example_plan

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ibnetdiscover"
TINY = FIXTURES / "ibsim-0.10-tiny-hdr-healthy" / "spec.yaml"


def plan_of(text: str) -> Plan:
    return design(parse_spec(text)[0])


def as_planned(plan: Plan, planes: set[str]) -> Observation:
    """What a perfect fabric reports: every planned cable, at its planned rate."""
    links = [Seen(*ends(link), width=4 if _ib(plan, link) else None, speed="HDR" if _ib(plan, link) else None,
                  gbps=None if _ib(plan, link) else float(link.gbps))
             for link in plan.links if link.plane in planes]
    looked = {e.device for link in plan.links if link.plane in planes for e in ends(link)}
    return Observation("test", links, looked, speed_cap="HDR")


def _ib(plan: Plan, link: Link) -> bool:
    return next(p.technology for p in plan.planes if p.name == link.plane) == "infiniband"


def planes_of(plan: Plan) -> set[str]:
    return {p.name for p in plan.planes}


def only_finding(report: CablingReport) -> tuple[str, tuple[str, ...], str]:
    assert len(report.findings) == 1, [f.model_dump() for f in report.findings]
    f = report.findings[0]
    return f.kind, f.cables, f.fix


def replace(observation: Observation, old: list[Seen], new: list[Seen]) -> Observation:
    links = [s for s in observation.links if s not in old] + new
    return Observation(observation.source, links, observation.looked, speed_cap=observation.speed_cap)


def seen_of(observation: Observation, link: Link) -> Seen:
    return next(s for s in observation.links if {s.a, s.b} == set(ends(link)))


@pytest.fixture(scope="module")
def small_ethernet() -> Plan:
    return plan_of(example_text("small-ethernet"))


@pytest.fixture(scope="module")
def tiny_ib() -> Plan:
    return plan_of(TINY.read_text())


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_a_fabric_cabled_as_planned_has_no_finding(example: str) -> None:
    plan = example_plan(example)  # designed once per process, shared with the other modules
    report = check_cabling(plan, as_planned(plan, planes_of(plan)), planes_of(plan))
    assert report.findings == ()
    assert report.counts == {"ok": len(plan.links)} or not plan.links


def test_a_pulled_cable_is_missing_and_named(small_ethernet: Plan) -> None:
    observation = as_planned(small_ethernet, planes_of(small_ethernet))
    link = next(link for link in small_ethernet.links if link.tier == "node_leaf")
    pulled = replace(observation, [seen_of(observation, link)], [])
    report = check_cabling(small_ethernet, pulled, planes_of(small_ethernet))
    kind, cables, fix = only_finding(report)
    assert (kind, cables) == ("missing", (cable_name(link),))
    assert "reseat" in fix


def test_two_swapped_server_cables_are_one_finding_that_says_which_ports(small_ethernet: Plan) -> None:
    observation = as_planned(small_ethernet, planes_of(small_ethernet))
    first, second = [link for link in small_ethernet.links if link.tier == "node_leaf" and link.plane == "compute"][:2]
    (a, b), (y, x) = ends(first), ends(second)
    swapped = replace(observation, [seen_of(observation, first), seen_of(observation, second)],
                      [Seen(a, x), Seen(y, b)])
    report = check_cabling(small_ethernet, swapped, planes_of(small_ethernet))
    kind, cables, fix = only_finding(report)
    assert kind == "swapped" and set(cables) == {cable_name(first), cable_name(second)}
    assert f"swap the cables in {min(b, x)} and {max(b, x)}" in fix
    assert {c.verdict for c in report.cables if c.verdict != "ok"} == {"swapped"}


def test_a_cable_in_the_wrong_free_port_is_told_as_a_move(small_ethernet: Plan) -> None:
    """A server cable in the leaf port of a server that is not cabled: the leaf end moves."""
    observation = as_planned(small_ethernet, planes_of(small_ethernet))
    first, second = [link for link in small_ethernet.links if link.tier == "node_leaf" and link.plane == "compute"][:2]
    (a, b), (y, x) = ends(first), ends(second)
    moved = replace(observation, [seen_of(observation, first), seen_of(observation, second)], [Seen(a, x)])
    kind, cables, fix = only_finding(check_cabling(small_ethernet, moved, planes_of(small_ethernet)))
    assert kind == "miswired" and set(cables) == {cable_name(first), cable_name(second)}
    assert fix == f"move the cable in {x} to {b}; {y} then goes into {x}"


def test_a_cable_one_port_off_into_a_free_port_is_told_as_a_move(tiny_ib: Plan) -> None:
    observation = as_planned(tiny_ib, {"compute"})
    link = next(link for link in tiny_ib.links if link.tier == "node_leaf" and link.plane == "compute")
    server, leaf = ends(link)
    free = End(leaf.device, "7")  # radix 8: ports 5-8 carry no planned cable
    moved = replace(observation, [seen_of(observation, link)], [Seen(server, free, width=4, speed="HDR")])
    report = check_cabling(tiny_ib, moved, {"compute"})
    assert only_finding(report) == ("miswired", (cable_name(link),), f"move the cable in {free} to {leaf}")


def test_a_cable_to_a_device_the_plan_lacks_is_unknown_not_a_finding(small_ethernet: Plan) -> None:
    observation = as_planned(small_ethernet, planes_of(small_ethernet))
    link = next(link for link in small_ethernet.links if link.tier == "node_leaf")
    a, _ = ends(link)
    report = check_cabling(small_ethernet, replace(observation, [seen_of(observation, link)],
                                                   [Seen(a, End(UNKNOWN + "patch-panel-7", "12"))]),
                           planes_of(small_ethernet))
    assert report.findings == ()
    assert report.counts["unknown"] == 1


def test_devices_nobody_read_leave_their_cables_unchecked(small_ethernet: Plan) -> None:
    observation = as_planned(small_ethernet, {"compute"})
    silent = Observation("test", [], looked=set())
    report = check_cabling(small_ethernet, silent, {"compute"})
    assert report.findings == ()
    assert report.counts == {"unchecked": len(observation.links)}


def test_a_link_between_unplanned_ports_is_unplanned(small_ethernet: Plan) -> None:
    observation = as_planned(small_ethernet, planes_of(small_ethernet))
    used = {(e.device, int(e.port)) for link in small_ethernet.links for e in ends(link) if e.port.isdigit()}
    leaf = next(s for s in small_ethernet.switches if s.plane == "compute" and s.tier == "leaf"
                and sum(1 for d, _ in used if d == s.name) <= s.radix - 2)
    free = [p for p in range(1, leaf.radix + 1) if (leaf.name, p) not in used][:2]
    loop = Seen(End(leaf.name, str(free[0])), End(leaf.name, str(free[1])))
    report = check_cabling(small_ethernet, replace(observation, [], [loop]), planes_of(small_ethernet))
    kind, cables, _ = only_finding(report)
    assert (kind, cables) == ("unplanned", ())
    assert report.findings[0].plane == "compute"


def test_links_of_planes_not_checked_are_not_unplanned(small_ethernet: Plan) -> None:
    """Links no checked cable was seen as are looked up among every planned cable's ends: those of
    the planes not checked are planned, not findings."""
    observation = as_planned(small_ethernet, planes_of(small_ethernet))
    report = check_cabling(small_ethernet, observation, {"compute"})
    assert report.findings == ()
    assert report.counts == {"ok": sum(1 for link in small_ethernet.links if link.plane == "compute")}


def test_a_healthy_fabric_checked_whole_builds_no_index_of_planned_ends(small_ethernet: Plan) -> None:
    """Every reported link was seen as its checked cable: the index of every planned end (4.7
    million entries at 1M GPUs) is never built."""
    fabric = _Fabric(small_ethernet, as_planned(small_ethernet, planes_of(small_ethernet)),
                     planes_of(small_ethernet))
    assert {_verdict(fabric, link).verdict for link in fabric.checked} == {"ok"}
    assert list(_unplanned(fabric)) == []
    assert "cable_at" not in vars(fabric)


def test_a_slow_ethernet_link_is_a_speed_finding(small_ethernet: Plan) -> None:
    observation = as_planned(small_ethernet, planes_of(small_ethernet))
    link = next(link for link in small_ethernet.links if link.plane == "compute")
    slow = Seen(*ends(link), gbps=link.gbps / 4)
    slowed = replace(observation, [seen_of(observation, link)], [slow])
    kind, cables, _ = only_finding(check_cabling(small_ethernet, slowed, planes_of(small_ethernet)))
    assert (kind, cables) == ("speed", (cable_name(link),))


@pytest.mark.parametrize(("width", "speed", "kind"), [(2, "HDR", "width"), (1, "HDR", "width"), (4, "EDR", "speed")])
def test_lanes_down_or_a_slower_infiniband_speed_is_found(tiny_ib: Plan, width: int, speed: str, kind: str) -> None:
    observation = as_planned(tiny_ib, {"compute"})
    link = next(link for link in tiny_ib.links if link.tier == "leaf_spine")
    slow = Seen(*ends(link), width=width, speed=speed)
    report = check_cabling(tiny_ib, replace(observation, [seen_of(observation, link)], [slow]), {"compute"})
    assert only_finding(report)[:2] == (kind, (cable_name(link),))
    assert report.findings[0].observed == f"{width}x{speed}, planned 4xHDR"


def test_random_single_faults_each_give_exactly_the_right_finding(small_ethernet: Plan) -> None:
    """20 seeded faults (pull, swap, move) on the compute and storage planes: one finding each,
    of the right kind, naming exactly the cables the fault touched."""
    rng = random.Random(13)
    planes = {"compute", "storage"}
    links = [link for link in small_ethernet.links if link.plane in planes]
    for _ in range(20):
        observation = as_planned(small_ethernet, planes)
        first = rng.choice(links)
        second = rng.choice([link for link in links if link.plane == first.plane and link is not first])
        fault = rng.choice(["pull", "swap", "move"])
        (a, b), (y, x) = ends(first), ends(second)
        kept = [seen_of(observation, first)] + ([] if fault == "pull" else [seen_of(observation, second)])
        added = {"pull": [], "swap": [Seen(a, x), Seen(y, b)], "move": [Seen(a, x)]}[fault]
        broken = Observation("test", [s for s in observation.links if s not in kept] + added, observation.looked)
        kind, cables, _ = only_finding(check_cabling(small_ethernet, broken, planes))
        both = {cable_name(first), cable_name(second)}
        expected = {"pull": ("missing", {cable_name(first)}), "swap": ("swapped", both),
                    "move": ("miswired", both)}[fault]
        assert (kind, set(cables)) == expected, (fault, cable_name(first), cable_name(second))


def test_lldp_names_as_switches_write_them_map_to_the_plan(small_ethernet: Plan) -> None:
    """Cumulus swp33, SONiC Ethernet33, EOS Ethernet1/33 and a host's FQDN all mean the plan's port."""
    server_link = next(link for link in small_ethernet.links if link.tier == "node_leaf" and link.plane == "compute")
    server, leaf = ends(server_link)
    domain = small_ethernet.site.domain
    for reported in (f"swp{leaf.port}", f"Ethernet{leaf.port}", f"Ethernet1/{leaf.port}"):
        tables = {
            server.device: (LldpNeighbor(local_port=server.port, system_name=f"{leaf.device.upper()}.{domain}",
                                         port_id=reported, port_id_type="ifname"),),
            leaf.device: (LldpNeighbor(local_port=f"swp{leaf.port}", system_name=f"{server.device}.{domain}",
                                       port_id="aa:bb:cc:00:00:01", port_id_type="mac", port_descr=server.port),),
        }
        observation = from_lldp(small_ethernet, tables)
        assert [(s.a, s.b) for s in observation.links] == [(server, leaf)], reported


def test_the_simulators_topology_reads_back_as_the_plan(tiny_ib: Plan) -> None:
    """render_topology (what ibsim loads) through the ibnetdiscover parser: every cable ok, at HDR."""
    fabric = sim_fabric(tiny_ib)
    observation = from_ibnetdiscover(tiny_ib, parse_ibnetdiscover(render_topology(fabric)))
    report = check_cabling(tiny_ib, observation, {"compute"})
    assert report.findings == () and report.counts == {"ok": len(fabric.links)}
    rates = {frozenset(ends(fabric.links[-1])): (2, "HDR")}
    observation = from_ibnetdiscover(tiny_ib, parse_ibnetdiscover(render_topology(fabric, rates)))
    found = only_finding(check_cabling(tiny_ib, observation, {"compute"}))
    assert found[:2] == ("width", (cable_name(fabric.links[-1]),))


def test_switches_with_factory_descriptions_are_named_from_their_neighbours(tiny_ib: Plan) -> None:
    """Real switches often describe themselves as "MF0;switch-abc:MQM8700/U1" or nothing useful:
    a switch is learned as the planned one its named neighbours are cabled to at the same ports."""
    text = render_topology(sim_fabric(tiny_ib))
    for switch in tiny_ib.switches:
        if switch.plane == "compute":
            text = text.replace(f'# "{switch.name}"', '# "Quantum Mellanox Technologies"')
    topology = parse_ibnetdiscover(text)
    assert not any(n.description.startswith("comp-") for n in topology.nodes if n.kind == "switch")
    report = check_cabling(tiny_ib, from_ibnetdiscover(tiny_ib, topology), {"compute"})
    assert report.findings == () and set(report.counts) == {"ok"}


@pytest.mark.parametrize(("comment", "rate"), [
    ('"gpu001 mlx5_0" lid 3 4xNDR', (4, "NDR")),
    ('"gpu001 mlx5_0" 4xQDR was 2xHDR lid 3', (2, "HDR")),  # the last rate word, wherever it stands
    ('"gpu001 mlx5_0" 1xFDR10 4xEDRs 12x3xNDR', (1, "FDR10")),  # only whole words are rates
    ('"gpu001 4xHDR" lid 3', (4, "HDR")),
    ('"gpu001 mlx5_0" lid 3', (None, None)),
])
def test_a_port_lines_rate_is_the_last_rate_word_of_its_comment(comment: str, rate: tuple[object, object]) -> None:
    text = f'Switch\t8 "S-01"\t\t# "leaf"\n[1]\t"H-02"[1]\t\t# {comment}\n'
    (link,) = parse_ibnetdiscover(text).links
    assert (link.width, link.speed) == rate


def recorded(name: str) -> str:
    return (FIXTURES / name / "output.txt").read_bytes().decode()


def test_the_recorded_healthy_simulator_fabric_is_all_ok(tiny_ib: Plan) -> None:
    observation = from_ibnetdiscover(tiny_ib, parse_ibnetdiscover(recorded("ibsim-0.10-tiny-hdr-healthy")))
    report = check_cabling(tiny_ib, observation, {"compute"})
    assert report.findings == () and report.counts == {"ok": 16}


def test_the_recorded_faulted_simulator_fabric_gives_its_four_faults(tiny_ib: Plan) -> None:
    """Recorded after: swap gpu001:ib0/gpu003:ib0, unplug gpu004:ib1, comp-leaf003:3 at 2xHDR,
    comp-leaf002:4 at 4xEDR (see the case's SOURCE.md)."""
    observation = from_ibnetdiscover(tiny_ib, parse_ibnetdiscover(recorded("ibsim-0.10-tiny-hdr-faults")))
    report = check_cabling(tiny_ib, observation, {"compute"})
    found = sorted((f.kind, f.cables) for f in report.findings)
    assert found == [
        ("missing", ("gpu004:ib1 comp-leaf004:2",)),
        ("speed", ("comp-leaf002:4 comp-spine002:2",)),
        ("swapped", ("gpu001:ib0 comp-leaf001:1", "gpu003:ib0 comp-leaf003:1")),
        ("width", ("comp-leaf003:3 comp-spine001:3",)),
    ]
    assert report.counts == {"ok": 11, "missing": 1, "swapped": 2, "speed": 1, "width": 1}


def test_nics_on_another_rails_leaf_break_the_rail_predicate() -> None:
    """scalable-unit (8 rails, full leaves): gpu001's rail-0 and rail-1 cables swapped at the leaves is
    one swap finding, which also says which rail each NIC now lands on (its fix puts them back: no
    second finding for the same cables)."""
    plan = plan_of(example_text("scalable-unit"))
    observation = as_planned(plan, {"compute"})
    first, second = (next(link for link in plan.links if End("gpu001", f"ib{n}") in ends(link)) for n in (0, 1))
    (nic0, leaf0), (nic1, leaf1) = ends(first), ends(second)
    crossed = [Seen(nic0, leaf1, width=4, speed="HDR"), Seen(nic1, leaf0, width=4, speed="HDR")]
    report = check_cabling(plan, replace(observation, [seen_of(observation, first), seen_of(observation, second)],
                                         crossed), {"compute"})
    (swap,) = report.findings
    assert swap.kind == "swapped" and set(swap.cables) == {cable_name(first), cable_name(second)}
    assert f"off its rail: gpu001:ib0 (rail 0) lands on {leaf1.device}, a rail 1 leaf" in swap.observed
    assert f"gpu001:ib1 (rail 1) lands on {leaf0.device}, a rail 0 leaf" in swap.observed
    assert not [f for f in check_cabling(plan, observation, {"compute"}).findings if f.kind == "rail"]
