"""Slurm topology.conf (topology/tree) from the compute fabric, so the scheduler packs a job's
nodes under as few switches as possible."""

from __future__ import annotations

from collections import defaultdict

from gpunet.model.nodeset import fold, parse_nodeset
from gpunet.model.plan import Plan, Switch
from gpunet.render.common import header

TOPOLOGY_PATH = "slurm/topology.conf"
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
    switches = [s for s in plan.switches if s.plane == plane]
    lines = [header("Slurm topology.conf").rstrip(),
             f"# From the {plane} plane. Rail-optimized units appear as one switch per unit."]
    if not switches:
        return "\n".join([*lines, "# No switches on this plane (direct cables): nothing to describe."]) + "\n"
    leaf_nodes = _leaf_groups(plan, plane, switches)
    lines += [f"SwitchName={name} Nodes={fold(nodes)}" for name, nodes in leaf_nodes.items()]
    pods = _pods(switches, leaf_nodes)
    if len(pods) > 1:
        lines += [f"SwitchName={name} Switches={fold(children)}" for name, children in pods.items()]
        top_children = list(pods)
    else:
        top_children = list(leaf_nodes)
    if len(top_children) > 1:
        lines.append(f"SwitchName={plane[:4]}-top Switches={fold(top_children)}")
    return "\n".join(lines) + "\n"


def render_network_conf(plan: Plan) -> str | None:
    """The controller and the ports of the Plan's Slurm flows, for slurm.conf: the same numbers the
    firewall opens (None when the spec names no scheduler)."""
    flows = {f.service: f for f in plan.flows if f.service in SLURM_KEYS}
    if "slurmctld" not in flows:
        return None
    controller = plan.node(next(iter(parse_nodeset(flows["slurmctld"].to_nodes))))
    assert controller is not None and controller.management_ip is not None
    lines = [header("Slurm network settings").rstrip(),
             "# Include it from slurm.conf (Include /etc/slurm/gpunet-network.conf): the node firewalls",
             "# open exactly these ports (the flows slurmctld, slurmd and srun of the plan).",
             f"SlurmctldHost={controller.name}({controller.management_ip})"]
    lines += [f"{SLURM_KEYS[service]}={flow.ports}" for service, flow in flows.items()]
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
