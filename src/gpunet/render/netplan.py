"""netplan: addresses, MTU per plane, bonds, VLANs, the only default route via management, and
per-NIC routing tables where several NICs share a subnet."""

from __future__ import annotations

from typing import Any

from gpunet.model.plan import Interface, Node, Plan
from gpunet.render.common import (
    addressed,
    header,
    host_interfaces,
    ip_only,
    network,
    plane_of,
    route_table,
    shared_subnet_groups,
    to_yaml,
)

PATH = "etc/netplan/60-gpunet.yaml"
BOND_PARAMETERS = {"mode": "mode", "lacp_rate": "lacp-rate", "hash_policy": "transmit-hash-policy"}


def render_netplan(plan: Plan, node: Node) -> str:
    sections: dict[str, dict[str, Any]] = {"ethernets": {}, "bonds": {}, "vlans": {}}
    layer3: dict[str, dict[str, Any]] = {}  # where each address goes: the link, or its VLAN
    for iface in host_interfaces(node):
        kind = "bonds" if iface.bond is not None else "ethernets"
        link = _bond(iface) if iface.bond is not None else _link(plan, iface)
        sections[kind][iface.name] = link
        if iface.address and iface.vlan:
            vlan = {"id": iface.vlan, "link": iface.name, "mtu": iface.mtu, "dhcp4": False, "dhcp6": False}
            sections["vlans"][f"{iface.name}.{iface.vlan}"] = layer3[iface.name] = vlan
        elif iface.address:
            layer3[iface.name] = link
    for iface in addressed(node):
        layer3[iface.name] |= _addresses(plan, iface)
    _source_routing(node, layer3)
    body: dict[str, Any] = {"version": 2, "renderer": "networkd"}
    body |= {key: section for key, section in sections.items() if section}
    return header("netplan") + to_yaml({"network": body})


def _link(plan: Plan, iface: Interface) -> dict[str, Any]:
    """A NIC: no DHCP, the plane's MTU (bond members carry it too, netplan's advice)."""
    config: dict[str, Any] = {"dhcp4": False, "dhcp6": False, "mtu": iface.mtu}
    if plane_of(plan, iface.plane).technology == "infiniband":
        # Datagram mode carries the 4092-byte IPoIB MTU; connected mode is for MTUs above it.
        config["infiniband-mode"] = "connected" if iface.mtu > 4092 else "datagram"
    return config


def _bond(iface: Interface) -> dict[str, Any]:
    assert iface.bond is not None
    params: dict[str, Any] = {"mode": iface.bond.mode, "mii-monitor-interval": iface.bond.mii_interval_ms}
    if iface.bond.mode == "802.3ad":
        params |= {"lacp-rate": iface.bond.lacp_rate, "transmit-hash-policy": iface.bond.hash_policy}
    elif iface.bond.mode in ("balance-xor", "balance-tlb", "balance-alb"):
        params["transmit-hash-policy"] = iface.bond.hash_policy
    config: dict[str, Any] = {"interfaces": list(iface.members), "mtu": iface.mtu, "parameters": params,
                              "dhcp4": False, "dhcp6": False}
    return config


def _addresses(plan: Plan, iface: Interface) -> dict[str, Any]:
    """Static addresses; the management plane also gets the default route and DNS."""
    config: dict[str, Any] = {"addresses": [a for a in (iface.address, iface.address6) if a]}
    plane = plane_of(plan, iface.plane)
    if iface.plane == "management" and plane.gateway:
        config["routes"] = [{"to": "default", "via": plane.gateway}]
    if iface.plane == "management" and plan.site.dns_servers:
        config["nameservers"] = {"addresses": [str(a) for a in plan.site.dns_servers],
                                 "search": [plan.site.domain]}
    return config


def _source_routing(node: Node, sections: dict[str, dict[str, Any]]) -> None:
    """One table per NIC sharing a subnet: its subnet route, and a rule sending traffic from its
    address there, so replies leave by the NIC the request came in on (rails on one subnet)."""
    for group in shared_subnet_groups(node):
        for iface in group:
            table = route_table(node, iface)
            config = sections[iface.name]
            config.setdefault("routes", []).append(
                {"to": network(iface), "scope": "link", "table": table, "from": ip_only(iface)})
            config["routing-policy"] = [{"from": ip_only(iface), "table": table}]
