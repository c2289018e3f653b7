"""NodeSets that name the Plan's groups, ClusterShell's own way: `@role:gpu`, `@leaf:comp-leaf003`,
`@rail:3`, `@plane:storage`, `@gpu` (a node group) — each kind a group source of a resolver built
from the Plan, so `@leaf:comp-leaf003!gpu017` works like anywhere else in ClusterShell."""

from __future__ import annotations

from ClusterShell.NodeSet import NodeSet
from ClusterShell.NodeUtils import GroupResolver, GroupSource

from gpunet.errors import UsageError
from gpunet.model.inventory import node_groups
from gpunet.model.nodeset import NodeSetError, fold, parse_nodeset
from gpunet.model.plan import Plan

DEFAULT_SOURCE = "group"  # `@gpu` without a kind is the spec's node group


def plan_resolver(plan: Plan) -> GroupResolver:
    groups = node_groups(plan)
    sources = {kind: GroupSource(kind, {name: fold(nodes) for name, nodes in members.items()})
               for kind, members in groups.items()}
    resolver = GroupResolver(sources[DEFAULT_SOURCE])
    for kind, source in sources.items():
        if kind != DEFAULT_SOURCE:  # the default source is already registered under its name
            resolver.add_source(source)
    return resolver


def resolve_nodes(pattern: str, plan: Plan | None) -> NodeSet:
    """A NodeSet, with @kind:name groups when there is a Plan to take them from."""
    kinds = ", ".join(f"@{kind}:NAME" for kind in node_groups(plan)) if plan else "none without a plan"
    try:
        nodes = parse_nodeset(pattern, plan_resolver(plan) if plan else None)
    except NodeSetError as exc:
        raise UsageError(f"{exc} (groups: {kinds})") from None
    if not nodes:
        raise UsageError(f"NodeSet {pattern!r} names no node (groups: {kinds})")
    return nodes
