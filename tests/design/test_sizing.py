"""Fabric sizing against fat-tree arithmetic: 8-rail NDR fabrics of 64-port switches."""

from __future__ import annotations

from collections import Counter
from math import ceil

import pytest

from gpunet.design import design
from gpunet.design.layout import leaf_shape, max_down_ports, smallest_balanced_divisor
from gpunet.errors import SpecError
from gpunet.model.plan import Plan
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.specs import rail_spec

K = 64  # switch radix
RAILS = 8


def expected_counts(nodes: int) -> dict[str, int]:
    """Counts a 1:1 fat tree of K-port switches must have, derived from first principles."""
    down = up = K // 2  # non-blocking leaf: half the ports face nodes, half face spines
    su_nodes = down  # a scalable unit fills one leaf port per node on each rail leaf
    leaves = RAILS * ceil(nodes / su_nodes)  # one leaf per rail per scalable unit
    if leaves <= K:
        # Two tiers: a spine port per leaf uplink, so spines = leaves*up/K (each spine fully
        # used), as long as it divides `up` so each leaf has the same links to every spine.
        spines = max(2, leaves * up // K)
        assert up % spines == 0
        return {"leaf": leaves, "spine": spines, "core": 0,
                "node_leaf": RAILS * nodes, "leaf_spine": leaves * up, "spine_core": 0}
    # Three tiers: a pod is K/2 leaves under K/2 spines (one link per leaf-spine pair, each
    # spine K/2 down and K/2 up); spine j of every pod joins core group j. All spine uplinks
    # land on cores: cores = spines*(K/2)/K. At most K pods: K^3/4 endpoints.
    pods = ceil(leaves / (K // 2))
    spines = pods * (K // 2)
    cores = spines * (K // 2) // K
    return {"leaf": leaves, "spine": spines, "core": cores,
            "node_leaf": RAILS * nodes, "leaf_spine": leaves * up, "spine_core": spines * (K // 2)}


@pytest.mark.parametrize("nodes", [32, 64, 128, 256, 512, 1024, 2048])
def test_rail_optimized_counts_follow_fat_tree_arithmetic(nodes: int) -> None:
    plan = design(rail_spec(nodes))
    switches = Counter(s.tier for s in plan.switches)
    cables = Counter(c.tier for c in plan.links)
    got = {t: switches[t] for t in ("leaf", "spine", "core")}
    got |= {t: cables[t] for t in ("node_leaf", "leaf_spine", "spine_core")}
    assert got == expected_counts(nodes)


@pytest.mark.parametrize(("nodes", "tiers"), [(256, 2), (257, 3)])
def test_third_tier_starts_when_spines_run_out_of_ports(nodes: int, tiers: int) -> None:
    (capacity,) = design(rail_spec(nodes)).capacity
    assert capacity.tiers == tiers
    assert capacity.max_hops == 2 * tiers - 1


def test_three_tiers_of_64_port_switches_stop_at_64_cubed_over_4_endpoints() -> None:
    # 64 pods x 32 leaves x 32 ports = 65536 endpoints; pod 65 has no core port left.
    assert smallest_balanced_divisor(32, 64, 64) == 32
    assert smallest_balanced_divisor(32, 65, 64) is None


def test_oversubscribed_leaf_trades_uplinks_for_node_ports() -> None:
    # 3:1 on a 64-port leaf: d + d/3 <= 64 gives 48 node ports and 16 uplinks.
    assert max_down_ports(64, 3.0, 400, 400) == 48
    shape = leaf_shape(rails=0, nics=1, nodes_per_leaf=None, radix=64, ratio=3.0, nic_gbps=400, port_gbps=400)
    assert (shape.down_ports, shape.up_ports) == (48, 16)


def test_slower_nics_need_fewer_uplinks() -> None:
    # 200G NICs under 400G uplinks at 1:1: d*200 <= u*400 and d+u <= 64 gives d=42, u=21.
    shape = leaf_shape(rails=0, nics=1, nodes_per_leaf=None, radix=64, ratio=1.0, nic_gbps=200, port_gbps=400)
    assert (shape.down_ports, shape.up_ports) == (42, 21)
    # With at least 2 spines, 21 uplinks cannot spread evenly: one spare port makes it 22.
    shape = leaf_shape(rails=0, nics=1, nodes_per_leaf=None, radix=64, ratio=1.0, nic_gbps=200, port_gbps=400,
                       min_spines=2)
    assert (shape.down_ports, shape.up_ports) == (42, 22)


def test_a_prime_uplink_count_does_not_force_one_spine_per_uplink() -> None:
    # 100G NICs on 400G ports: 51 down needs 13 up (prime: 13 spines for any leaf count);
    # 50 down with 14 up spreads over 2 spines.
    shape = leaf_shape(rails=0, nics=1, nodes_per_leaf=None, radix=64, ratio=1.0, nic_gbps=100, port_gbps=400,
                       min_spines=2)
    assert (shape.down_ports, shape.up_ports) == (50, 14)
    assert smallest_balanced_divisor(14, 4, 64, at_least=2) == 2


def test_capacity_reports_bisection_and_per_rail_bandwidth() -> None:
    (capacity,) = design(rail_spec(64)).capacity
    # 1:1 non-blocking: half of 512 NDR endpoints can talk to the other half at line rate.
    assert capacity.bisection_gbps == 512 * 400 / 2
    assert capacity.per_rail_gbps == 64 * 400
    assert capacity.oversubscription == {"leaf": 1.0}


def test_partly_filled_last_pod_gets_only_the_spines_it_needs() -> None:
    # 320 nodes: 80 rail leaves = pods of 32, 32 and 16 leaves. The last pod's 16 leaves x 32
    # uplinks land on 16 spines of 32 down ports (2 links per pair), not 32 half-empty ones.
    plan = design(rail_spec(320))
    per_pod = Counter(s.pod for s in plan.switches if s.tier == "spine")
    assert per_pod == {0: 32, 1: 32, 2: 16 * 32 // 32}
    pairs = Counter((c.a.device, c.b.device) for c in plan.links if c.tier == "leaf_spine")
    last_pod_leaf = next(s.name for s in plan.switches if s.tier == "leaf" and s.pod == 2)
    assert {n for (leaf, _), n in pairs.items() if leaf == last_pod_leaf} == {2}
    # Cores: 80 spines x 32 uplinks over 64-port cores = 40 at least; groups of 2 per spine
    # index (3 pods x 16 links = 48 ports used) give 32 x 2 = 64.
    assert sum(s.tier == "core" for s in plan.switches) == 64
    assert sum(c.tier == "spine_core" for c in plan.links) == 80 * 32


def _storage_leaf_ports(plan: Plan, node: str) -> list[tuple[str, str]]:
    return sorted((link.b.device, link.b.port) for link in plan.links
                  if link.plane == "storage" and link.tier == "node_leaf" and link.a.device == node)


def test_dual_homed_bond_puts_each_member_on_its_own_leaf_at_the_same_port() -> None:
    text = example_text("scalable-unit")
    single = design(parse_spec(text)[0])
    dual = design(parse_spec(text.replace("port_speed: 400G}", "port_speed: 400G}\n      dual_homed: true"))[0])
    assert len({leaf for leaf, _ in _storage_leaf_ports(single, "gpu001")}) == 1
    for node in ("gpu001", "gpu032", "stor04"):
        ports = _storage_leaf_ports(dual, node)
        assert len(ports) == 2 and ports[0][0] != ports[1][0] and ports[0][1] == ports[1][1], ports
    # Losing one storage leaf leaves every node with a member up.
    leaves = {leaf for node in dual.nodes for leaf, _ in _storage_leaf_ports(dual, node.name)}
    for lost in leaves:
        assert all({leaf for leaf, _ in _storage_leaf_ports(dual, n.name)} - {lost}
                   for n in dual.nodes if _storage_leaf_ports(dual, n.name))


def test_dual_homing_on_a_single_switch_is_refused() -> None:
    text = example_text("scalable-unit").replace(
        "port_speed: 400G}", "port_speed: 400G}\n      style: single-switch\n      dual_homed: true")
    with pytest.raises(SpecError, match=r":44:7: planes.storage.fabric.dual_homed: .*single-switch has one switch"):
        parse_spec(text)
