"""Views of the Plan as files: per-node configuration mirrored under nodes/<node>/, per-switch
configuration under switches/<switch>/ (render/switch/), and admin files (ssh_config, Ansible,
Slurm, Prometheus, Grafana) under admin/. Every renderer is pure; the registries are plain dicts
(DESIGN.md #6)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gpunet.model.plan import Node, Plan
from gpunet.render import (
    ansible,
    clustershell,
    firewall,
    grafana,
    hosts,
    nccl,
    netplan,
    networkmanager,
    ntp,
    prometheus,
    roce_qos,
    slurm,
    ssh,
    sysctl,
)
from gpunet.render.switch import SWITCH_RENDERERS, render_switches

NodeRenderer = Callable[[Plan, Node], dict[str, str]]
AdminRenderer = Callable[[Plan], dict[str, str]]


def _netplan(plan: Plan, node: Node) -> dict[str, str]:
    return {netplan.PATH: netplan.render_netplan(plan, node)}


def _sysctl(plan: Plan, node: Node) -> dict[str, str]:
    return {sysctl.NET_PATH: sysctl.render_sysctl_net(plan, node),
            sysctl.HOST_PATH: sysctl.render_sysctl_host(plan, node)}


def _nftables(plan: Plan, node: Node) -> dict[str, str]:
    return {firewall.NFT_PATH: firewall.render_nftables(plan, node)}


def _sshd(plan: Plan, node: Node) -> dict[str, str]:
    return {ssh.SSHD_PATH: ssh.render_sshd(plan, node)}


def _hosts(plan: Plan, node: Node) -> dict[str, str]:
    return {hosts.PATH: hosts.render_hosts(plan, node)}


def _ntp(plan: Plan, node: Node) -> dict[str, str]:
    return {ntp.PATH: ntp.render_chrony(plan, node)}


def _nccl(plan: Plan, node: Node) -> dict[str, str]:
    return {nccl.PATH: nccl.render_nccl_env(plan, node)}


def _ssh_config(plan: Plan) -> dict[str, str]:
    return {ssh.SSH_CONFIG_PATH: ssh.render_ssh_config(plan)}


def _slurm(plan: Plan) -> dict[str, str]:
    network = slurm.render_network_conf(plan)
    topology = {slurm.TOPOLOGY_PATH: slurm.render_topology_conf(plan),
                slurm.TOPOLOGY_YAML_PATH: slurm.render_topology_yaml(plan)}
    return topology | ({slurm.NETWORK_PATH: network} if network else {})


def _ansible(plan: Plan) -> dict[str, str]:
    return {ansible.INVENTORY_PATH: ansible.render_inventory(plan),
            ansible.PLAYBOOK_PATH: ansible.render_playbook(plan)}


def _clustershell(plan: Plan) -> dict[str, str]:
    return {clustershell.PATH: clustershell.render_clustershell_groups(plan)}


NODE_RENDERERS: dict[str, NodeRenderer] = {
    "netplan": _netplan,
    "networkmanager": networkmanager.render_nm_keyfiles,
    "sysctl": _sysctl,
    "nftables": _nftables,
    "firewalld": firewall.render_firewalld_zones,
    "sshd": _sshd,
    "hosts": _hosts,
    "nccl": _nccl,
    "ntp": _ntp,
    "roce_qos": roce_qos.render_roce_qos,
}
ADMIN_RENDERERS: dict[str, AdminRenderer] = {
    "ssh_config": _ssh_config,
    "slurm": _slurm,
    "ansible": _ansible,
    "clustershell": _clustershell,
    "prometheus": prometheus.render_prometheus,
    "grafana": grafana.render_grafana,
}
TARGETS = (*NODE_RENDERERS, *ADMIN_RENDERERS, *SWITCH_RENDERERS)
SAME_ON_EVERY_NODE = {"hosts", "ntp"}
SECRET_MODES = {"etc/netplan/": 0o600, "etc/NetworkManager/": 0o600}  # both refuse world-readable files
EXECUTABLE = {"usr/local/sbin/"}  # scripts a unit runs


def render_all(plan: Plan, nodes: Iterable[Node], targets: Iterable[str]) -> dict[str, str]:
    """Every file of the chosen targets: nodes/<node>/<path on the node>, admin/<path>, and
    switches/<switch>/<path on the switch> for every Ethernet and RoCE switch (switch targets are
    per switch, not per node: `--node` does not narrow them)."""
    chosen = list(targets)
    files: dict[str, str] = {}
    same_everywhere: dict[str, dict[str, str]] = {}  # /etc/hosts is one file for all nodes
    for node in nodes:
        for target in (t for t in chosen if t in NODE_RENDERERS):
            if target not in SAME_ON_EVERY_NODE:
                rendered = NODE_RENDERERS[target](plan, node)
            elif target in same_everywhere:
                rendered = same_everywhere[target]
            else:
                rendered = same_everywhere[target] = NODE_RENDERERS[target](plan, node)
            files |= {f"nodes/{node.name}/{path}": text for path, text in rendered.items()}
    for target in chosen:
        if target in ADMIN_RENDERERS:
            files |= {f"admin/{path}": text for path, text in ADMIN_RENDERERS[target](plan).items()}
    return files | render_switches(plan, chosen)


def file_mode(path: str) -> int:
    if any(prefix in path for prefix in EXECUTABLE):
        return 0o755
    return next((mode for prefix, mode in SECRET_MODES.items() if prefix in path), 0o644)
