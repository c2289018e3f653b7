"""The Plan's nodes in named sets, the way admins address them: by role, node group, plane, rail
and the leaf a node is cabled to. One source for the Ansible inventory, the ClusterShell groups
file and the fleet's `@role:gpu` NodeSets."""

from __future__ import annotations

from collections import defaultdict

from gpunet.model.plan import Plan

KINDS = ("role", "group", "plane", "rail", "leaf")


def node_groups(plan: Plan) -> dict[str, dict[str, list[str]]]:
    """{kind: {name: [nodes, in plan order]}}: role gpu, group gpu, plane storage, rail 3,
    leaf comp-leaf001 (a node cabled to several leaves is in each)."""
    # dicts as ordered sets: a plane's group of 12,500 nodes must not be searched per insert
    groups: dict[str, dict[str, dict[str, None]]] = {kind: defaultdict(dict) for kind in KINDS}
    leaf_of = {(c.a.device, c.a.port): c.b.device for c in plan.links if c.tier == "node_leaf"}
    leaves_of: dict[str, list[str]] = defaultdict(list)
    for (name, _), leaf in sorted(leaf_of.items()):
        if leaf not in leaves_of[name]:
            leaves_of[name].append(leaf)
    for node in plan.nodes:
        _add(groups["role"], node.role, node.name)
        _add(groups["group"], node.group, node.name)
        for iface in node.interfaces:
            _add(groups["plane"], iface.plane, node.name)
            if iface.rail is not None:
                _add(groups["rail"], str(iface.rail), node.name)
        for leaf in leaves_of[node.name]:
            _add(groups["leaf"], leaf, node.name)
    return {kind: {name: list(nodes) for name, nodes in members.items()} for kind, members in groups.items()}


def _add(members: dict[str, dict[str, None]], name: str, node: str) -> None:
    members[name][node] = None
