"""Ansible: an inventory grouped by role, leaf, rail and plane, and a playbook that installs
each node's rendered files in batches (one canary, then growing percentages)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gpunet.model.inventory import node_groups
from gpunet.model.plan import Plan
from gpunet.render.common import header, to_yaml

INVENTORY_PATH = "ansible/inventory.yml"
PLAYBOOK_PATH = "ansible/site.yml"
# (rendered file, destination, mode, handler, OS family or "" for all)
FILES = (
    ("etc/netplan/60-gpunet.yaml", "/etc/netplan/60-gpunet.yaml", "0600", "netplan apply", "Debian"),
    ("etc/sysctl.d/90-gpunet-net.conf", "/etc/sysctl.d/90-gpunet-net.conf", "0644", "sysctl reload", ""),
    ("etc/sysctl.d/91-gpunet-host.conf", "/etc/sysctl.d/91-gpunet-host.conf", "0644", "sysctl reload", ""),
    ("etc/nftables.d/gpunet.nft", "/etc/nftables.d/gpunet.nft", "0644", "nftables reload", ""),
    ("etc/ssh/sshd_config.d/50-gpunet.conf", "/etc/ssh/sshd_config.d/50-gpunet.conf", "0644", "sshd reload", ""),
    ("etc/hosts", "/etc/hosts", "0644", "", ""),
    ("etc/gpunet/nccl.env", "/etc/gpunet/nccl.env", "0644", "", ""),
    ("etc/chrony/conf.d/gpunet.conf", "/etc/chrony/conf.d/gpunet.conf", "0644", "chrony restart", ""),
)
# Whole directories for RHEL-family hosts: NetworkManager keyfiles and firewalld zones.
DIRECTORIES = (
    ("etc/NetworkManager/system-connections/", "/etc/NetworkManager/system-connections/", "0600",
     "NetworkManager reload", "RedHat"),
    ("etc/firewalld/zones/", "/etc/firewalld/zones/", "0644", "firewalld reload", "RedHat"),
)
HANDLERS = (
    ("netplan apply", "netplan apply"),
    ("sysctl reload", "sysctl --system"),
    ("nftables reload", "nft -f /etc/nftables.d/gpunet.nft"),
    ("sshd reload", "sshd -t && (systemctl reload ssh || systemctl reload sshd)"),
    ("NetworkManager reload", "nmcli connection reload && nmcli networking on"),
    ("firewalld reload", "firewall-cmd --reload"),
    ("chrony restart", "systemctl restart chrony || systemctl restart chronyd"),
)


def render_inventory(plan: Plan) -> str:
    groups: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    hosts: dict[str, dict[str, Any]] = {}
    for node in plan.nodes:
        hosts[node.name] = {"ansible_host": node.management_ip} if node.management_ip else {}
    for kind, members in node_groups(plan).items():
        for name, nodes in members.items():
            groups[f"{kind}_{name.replace('-', '_')}"] = {node: {} for node in nodes}
    canary = next((n.name for n in plan.nodes if n.role == "gpu"), plan.nodes[0].name)
    groups["canary"] = {canary: {}}
    hosts = {canary: hosts[canary]} | hosts  # first in the inventory: the playbook's first batch
    children = {name: {"hosts": members} for name, members in sorted(groups.items())}
    inventory = {"all": {"hosts": hosts, "children": children}}
    return header("Ansible inventory") + to_yaml(inventory)


def render_playbook(plan: Plan) -> str:
    del plan
    tasks = [_copy_task(*entry) for entry in FILES] + [_copy_dir_task(*entry) for entry in DIRECTORIES]
    play = {
        "name": "Apply gpunet network configuration",
        "hosts": "all",
        "become": True,
        "order": "inventory",  # the inventory lists the canary first
        # The canary first (a batch of one), then growing batches; a failed batch stops the rest.
        "serial": [1, "10%", "30%", "100%"],
        "max_fail_percentage": 0,
        "tasks": [{"name": "Directories", "ansible.builtin.file": {"path": "{{ item }}", "state": "directory",
                                                                      "mode": "0755"},
                   "loop": ["/etc/nftables.d", "/etc/gpunet", "/etc/ssh/sshd_config.d", "/etc/chrony/conf.d"]},
                  *tasks],
        "handlers": [{"name": name, "ansible.builtin.shell": command} for name, command in HANDLERS],
    }
    return header("Ansible playbook; run: ansible-playbook -i inventory.yml site.yml") + \
        to_yaml([play])


def _copy_dir_task(source: str, dest: str, mode: str, handler: str, family: str) -> dict[str, Any]:
    task = _copy_task(source, dest, mode, handler, family)
    task["name"] = f"Install the files of {dest}"
    task["ansible.builtin.copy"]["directory_mode"] = "0755"
    return task


def _copy_task(source: str, dest: str, mode: str, handler: str, family: str) -> dict[str, Any]:
    task: dict[str, Any] = {
        "name": f"Install {dest}",
        "ansible.builtin.copy": {"src": f"{{{{ playbook_dir }}}}/../../nodes/{{{{ inventory_hostname }}}}/{source}",
                                 "dest": dest, "mode": mode, "owner": "root", "group": "root"},
    }
    if dest.endswith(".nft"):
        task["ansible.builtin.copy"]["validate"] = "nft -c -f %s"
    if handler:
        task["notify"] = handler
    if family:
        task["when"] = f"ansible_facts['os_family'] == '{family}'"
    return task
