"""Slurm's view of the fabric, so the scheduler packs a job's nodes under as few switches as
possible: topology.conf (topology/tree, every Slurm) and topology.yaml (Slurm 25.05 and later,
which reads it instead of topology.conf when both are there: the switch tree as the cluster default
and a block per scalable unit for partitions that ask for topology/block), and the snippet slurm.conf
includes, which sets TopologyPlugin: without it slurmctld ignores topology.conf altogether."""

from __future__ import annotations

import json
from collections import defaultdict

from gpunet.model.nodeset import fold, parse_nodeset
from gpunet.model.plan import Plan, Switch
from gpunet.render.common import header

TOPOLOGY_PATH = "slurm/topology.conf"
TOPOLOGY_YAML_PATH = "slurm/topology.yaml"
TOPOLOGY_PLUGIN = "topology/tree"
USABLE_PLUGINS = ("topology/tree", "topology/block")
NETWORK_PATH = "slurm/gpunet-network.conf"  # `Include /etc/slurm/gpunet-network.conf` in slurm.conf
SLURM_KEYS = {"slurmctld": "SlurmctldPort", "slurmd": "SlurmdPort", "srun": "SrunPortRange"}


def _fabric_plane(plan: Plan) -> str:
    """The plane jobs communicate over: compute if present, else the deepest one."""
    names = [c.plane for c in plan.capacity]
    return "compute" if "compute" in names else max(plan.capacity, key=lambda c: c.tiers).plane


def render_topology_conf(plan: Plan) -> str:
    """Leaf-level switches list their nodes; each tier above lists the switches below it.
    A rail-optimized unit's rail leaves are one Slurm switch (its nodes are under all of them),
    and each pod of a three-tier fabric is one switch above its units."""
    plane = _fabric_plane(plan)
    lines = [header("Slurm topology.conf").rstrip(),
             f"# From the {plane} plane. Rail-optimized units appear as one switch per unit."]
    tree = switch_tree(plan, plane)
    if not tree:
        return "\n".join([*lines, "# No switches on this plane (direct cables): nothing to describe."]) + "\n"
    lines += [f"SwitchName={name} {'Nodes' if kind == 'nodes' else 'Switches'}={fold(children)}"
              for name, kind, children in tree]
    return "\n".join(lines) + "\n"


def switch_tree(plan: Plan, plane: str) -> list[tuple[str, str, list[str]]]:
    """(switch, 'nodes' | 'switches', children): units with their nodes, then pods, then the top."""
    switches = [s for s in plan.switches if s.plane == plane]
    if not switches:
        return []
    leaf_nodes = _leaf_groups(plan, plane, switches)
    tree = [(name, "nodes", nodes) for name, nodes in leaf_nodes.items()]
    pods = _pods(switches, leaf_nodes)
    if len(pods) > 1:
        tree += [(name, "switches", children) for name, children in pods.items()]
        top_children = list(pods)
    else:
        top_children = list(leaf_nodes)
    if len(top_children) > 1:
        tree.append((f"{plane[:4]}-top", "switches", top_children))
    return tree


def render_topology_yaml(plan: Plan) -> str:
    """topology.yaml: `fabric-tree` (the switch tree of topology.conf, cluster_default) and
    `fabric-block` (a block per unit, block_sizes the smallest unit as Slurm's base block size),
    values quoted as JSON strings (valid YAML scalars, whatever the names hold)."""
    plane = _fabric_plane(plan)
    lines = [header("Slurm topology.yaml").rstrip(),
             f"# From the {plane} plane, for Slurm 25.05 and later: it is read instead of topology.conf when",
             "# both are beside slurm.conf. fabric-tree is the cluster default (the switch tree of topology.conf);",
             "# fabric-block has one block per unit (nodes under the same leaves), for partitions that set",
             "# Topology=fabric-block."]
    tree = switch_tree(plan, plane)
    if not tree:
        return "\n".join([*lines, "- topology: \"fabric-flat\"", "  cluster_default: true", "  flat: true"]) + "\n"
    lines += ["- topology: \"fabric-tree\"", "  cluster_default: true", "  tree:", "    switches:"]
    for name, kind, children in tree:
        lines += [f"      - switch: {json.dumps(name)}",
                  f"        {'nodes' if kind == 'nodes' else 'children'}: {json.dumps(fold(children))}"]
    units = [(name, children) for name, kind, children in tree if kind == "nodes"]
    lines += ["- topology: \"fabric-block\"", "  cluster_default: false", "  block:",
              f"    block_sizes: [{min(len(c) for _, c in units)}]", "    blocks:"]
    for name, children in units:
        lines += [f"      - block: {json.dumps(name)}", f"        nodes: {json.dumps(fold(children))}"]
    return "\n".join(lines) + "\n"


def topology_plugin_problem(slurm_conf: str) -> str | None:
    """What keeps slurmctld from using the rendered topology, read from slurm.conf's text with the
    files it includes pasted in: no TopologyPlugin (slurmctld then ignores topology.conf), or one that
    describes no switches. Slurm keeps the last value of a key. None when it is set to tree or block."""
    values = [line.split("=", 1)[1].split("#")[0].strip() for line in slurm_conf.splitlines()
              if line.strip().lower().startswith("topologyplugin=")]
    if not values:
        return (f"slurm.conf sets no TopologyPlugin: slurmctld ignores topology.conf (set {TOPOLOGY_PLUGIN}, or "
                f"Include the rendered gpunet-network.conf, which sets it)")
    if values[-1] not in USABLE_PLUGINS:
        return f"TopologyPlugin={values[-1]} ignores the fabric; use {' or '.join(USABLE_PLUGINS)}"
    return None


def render_network_conf(plan: Plan) -> str | None:
    """The controller and the ports of the Plan's Slurm flows, for slurm.conf: the same numbers the
    firewall opens; and TopologyPlugin, without which slurmctld ignores topology.conf (None when the
    spec names no scheduler)."""
    flows = {f.service: f for f in plan.flows if f.service in SLURM_KEYS}
    if "slurmctld" not in flows:
        return None
    controller = plan.node(next(iter(parse_nodeset(flows["slurmctld"].to_nodes))))
    assert controller is not None and controller.management_ip is not None
    lines = [header("Slurm network settings").rstrip(),
             "# Include it from slurm.conf (Include /etc/slurm/gpunet-network.conf), after any TopologyPlugin line",
             "# there: the node firewalls open exactly these ports (the flows slurmctld, slurmd and srun of the",
             "# plan).", f"SlurmctldHost={controller.name}({controller.management_ip})"]
    lines += [f"{SLURM_KEYS[service]}={flow.ports}" for service, flow in flows.items()]
    if switch_tree(plan, _fabric_plane(plan)):
        lines += ["# slurmctld reads topology.conf only with this plugin (Slurm 25.05 and later read topology.yaml",
                  "# instead when it is beside slurm.conf, each topology naming its own plugin).",
                  f"TopologyPlugin={TOPOLOGY_PLUGIN}"]
    return "\n".join(lines) + "\n"


def _leaf_key(switch: Switch, plane: str) -> str:
    return f"{plane[:4]}-su{switch.su + 1:03d}" if switch.su is not None else switch.name


def _leaf_groups(plan: Plan, plane: str, switches: list[Switch]) -> dict[str, list[str]]:
    by_name = {s.name: s for s in switches}
    groups: dict[str, list[str]] = defaultdict(list)
    for c in plan.links:
        if c.plane == plane and c.tier == "node_leaf":
            key = _leaf_key(by_name[c.b.device], plane)
            if c.a.device not in groups[key]:
                groups[key].append(c.a.device)
    return dict(groups)


def _pods(switches: list[Switch], leaf_groups: dict[str, list[str]]) -> dict[str, list[str]]:
    pods: dict[str, list[str]] = defaultdict(list)
    for s in switches:
        if s.tier == "leaf" and s.pod is not None:
            key = _leaf_key(s, s.plane)
            name = f"{s.plane[:4]}-pod{s.pod + 1:03d}"
            if key in leaf_groups and key not in pods[name]:
                pods[name].append(key)
    return dict(pods)
