"""The lab's static routes (lab/routes.py), read from a blueprint's `ip` lines: every switch
reaches each server under another leaf over every cable that starts a shortest path (the width the
switch checks expect, model/switching.ecmp_widths, at a leaf; the parallel cables down, at a
spine), the next hops alternating between neighbours."""

from __future__ import annotations

import re
from itertools import pairwise

from gpunet.lab.blueprint import build_blueprint
from gpunet.model.switching import ecmp_widths
from tests.lab.helpers import small_plan

ROUTE = re.compile(r"route add (\S+)/32 (.*)")
ADDRESS = re.compile(r"addr add (\S+)/31 dev ")


def test_every_switch_routes_each_server_over_every_shortest_path_alternating_neighbours() -> None:
    plan = small_plan()
    blueprint = build_blueprint(plan, "zz", 0, routing="static")
    switches = {s.name: s for s in plan.switches if s.plane == "compute"}
    routers = {ns.device: ns.commands for ns in blueprint.namespaces if ns.device in switches}
    owner = {m[1]: device for device, commands in routers.items() for line in commands if (m := ADDRESS.match(line))}
    leaf_of = {m[1]: device for device, commands in routers.items() for line in commands
               if (m := ROUTE.match(line)) and " via " not in m[2]}  # a server's own port on its leaf
    routed = 0
    for device, commands in routers.items():
        widths = ecmp_widths(plan, switches[device])
        for found in filter(None, map(ROUTE.match, commands)):
            if " via " not in found[2]:
                continue
            neighbours = [owner[via] for via in re.findall(r"via (\S+)", found[2])]
            leaf = leaf_of[found[1]]
            down = sum(1 for c in plan.links if {c.a.device, c.b.device} == {device, leaf})
            assert len(neighbours) == (widths[leaf] if switches[device].tier == "leaf" else down), found[0]
            assert len(set(neighbours)) == 1 or all(a != b for a, b in pairwise(neighbours)), found[0]
            routed += 1
    assert routed == len(leaf_of) * (len(routers) - 1)  # every server from every switch but its leaf
