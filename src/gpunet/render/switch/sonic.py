"""SONiC config_db.json for one switch, and the frr.conf SONiC's FRR reads beside it.

What the file holds: DEVICE_METADATA (hostname, ASN, role, `docker_routing_config_mode:
split-unified` so FRR runs the rendered frr.conf: SONiC's own bgpcfgd templates would announce a
leaf's VLAN subnet rather than its hosts' /32s), PORT (speed, MTU 9216, admin up, description =
the far end from the Plan, alias and lanes), INTERFACE (/31s on fabric ports; a host port routed
without an address of its own), PORTCHANNEL for bonded nodes, LOOPBACK_INTERFACE, BGP_NEIGHBOR
(named after the far end: `show ip bgp summary` prints the name), MGMT_PORT and MGMT_INTERFACE,
and on RoCE planes the lossless class (sonic_qos.py). An L2 switch (a single-switch plane) gets a
VLAN with every host port or LAG in it instead of routing.

HwSKU and platform: the Plan's switch model stands in for the HwSKU (replace it with the
platform's, e.g. Mellanox-SN5600-O128); PORT lanes follow the common layout and must match the
platform's port_config.ini. The tables are meant to be merged over the platform's default
config_db (`sonic-cfggen -H -k <hwsku>`), then `config reload`; gpunet never pushes them."""

from __future__ import annotations

import json
from typing import Any

from gpunet.model.plan import Plan, Switch
from gpunet.model.switching import SwitchPort, plane_of, sessions, sonic_lanes, switch_ports
from gpunet.render.quote import one_line
from gpunet.render.switch.common import (
    DEFAULT_VLAN,
    HOLD,
    KEEPALIVE,
    SWITCH_MTU,
    HostAttachment,
    Naming,
    description,
    host_attachments,
    host_vlan,
    management_gateway,
    routed,
    sonic_alias,
    sonic_port,
)
from gpunet.render.switch.frr import render_frr
from gpunet.render.switch.sonic_qos import qos_tables

# SONiC's roles: ToRRouter (T0) faces servers, LeafRouter (T1) aggregates ToRs, SpineRouter (T2)
# joins pods. A gpunet leaf is a SONiC T0, a spine T1, a core T2.
ROLE = {"leaf": "ToRRouter", "spine": "LeafRouter", "core": "SpineRouter"}
MAX_NAME = 15  # IFNAMSIZ - 1: VLAN sub-interface names longer than this take the short form (Eth0.20)

Tables = dict[str, dict[str, Any]]


def sonic_naming(switch: Switch) -> Naming:
    return Naming(lambda port: sonic_port(port, switch.port_gbps), lambda first: f"PortChannel{first}",
                  _subinterface)


def _subinterface(parent: str, vlan: int) -> str:
    name = f"{parent}.{vlan}"
    if len(name) <= MAX_NAME:
        return name
    return f"{parent.replace('Ethernet', 'Eth').replace('PortChannel', 'Po')}.{vlan}"


def render_sonic_frr(plan: Plan, switch: Switch) -> str:
    """frr.conf with SONiC's port names; addresses stay in config_db (SONiC's zebra learns them)."""
    return render_frr(plan, switch, sonic_naming(switch), addresses=False)


def render_config_db(plan: Plan, switch: Switch) -> str:
    naming = sonic_naming(switch)
    ports = switch_ports(plan, switch)
    tables: Tables = {"DEVICE_METADATA": {"localhost": _metadata(plan, switch)},
                      "PORT": {naming.port(p.port): _port(switch, p) for p in ports}}
    tables |= _management(plan, switch)
    tables |= _lags(plan, switch, naming)
    tables |= _routing(plan, switch, naming) if routed(plan, switch) else _bridging(plan, switch, naming)
    qos = plane_of(plan, switch).qos
    if qos is not None:
        tables |= qos_tables(qos, [(naming.port(p.port), p) for p in ports])
    return json.dumps(tables, indent=1, sort_keys=True) + "\n"


def _metadata(plan: Plan, switch: Switch) -> dict[str, str]:
    meta = {"hostname": switch.name, "hwsku": switch.model, "type": ROLE[switch.tier],
            "docker_routing_config_mode": "split-unified", "buffer_model": "dynamic"}
    if switch.asn is not None:
        meta |= {"bgp_asn": str(switch.asn), "bgp_router_id": str(switch.loopback)}
    if plane_of(plan, switch).qos is not None:
        meta["default_pfcwd_status"] = "enable"
    return meta


def _port(switch: Switch, port: SwitchPort) -> dict[str, str]:
    """The cable's speed (a 200G NIC on a 400G port runs the port at 200G), the switch MTU."""
    lanes = sonic_lanes(switch.port_gbps)
    first = (port.number - 1) * lanes
    return {"alias": sonic_alias(port.port), "lanes": ",".join(str(first + i) for i in range(lanes)),
            "speed": str(port.cable.gbps * 1000), "mtu": str(SWITCH_MTU), "admin_status": "up",
            "index": port.port, "description": description(port)}


def _management(plan: Plan, switch: Switch) -> Tables:
    """eth0 with the Plan's management address; SONiC's YANG requires a gateway with it, so a
    management subnet without one (an isolated oob network) leaves MGMT_INTERFACE out."""
    tables: Tables = {"MGMT_PORT": {"eth0": {"admin_status": "up", "alias": "eth0"}}}
    gateway = management_gateway(plan, switch)
    if switch.management and gateway:
        tables["MGMT_INTERFACE"] = {f"eth0|{switch.management}": {"gwaddr": gateway}}
    return tables


def _lags(plan: Plan, switch: Switch, naming: Naming) -> Tables:
    lags = [a for a in host_attachments(plan, switch) if a.lag]
    if not lags:
        return {}
    return {"PORTCHANNEL": {naming.lag(a.first): {"admin_status": "up", "mtu": str(SWITCH_MTU), "min_links": "1",
                                                  "lacp_key": "auto", "description": _lag_description(plan, a)}
                            for a in lags},
            "PORTCHANNEL_MEMBER": {f"{naming.lag(a.first)}|{naming.port(p)}": {} for a in lags for p in a.ports}}


def _lag_description(plan: Plan, attachment: HostAttachment) -> str:
    node = attachment.route.node if attachment.route else ""
    interface = attachment.route.interface if attachment.route else ""
    return one_line(f"{node}:{interface}", "LAG description")


def _routing(plan: Plan, switch: Switch, naming: Naming) -> Tables:
    """/31s on fabric ports, host ports (or their LAGs, or VLAN sub-interfaces on a tagged plane)
    routed without an address, the loopback, a BGP_NEIGHBOR per planned session."""
    interface: dict[str, Any] = {}
    for s in sessions(plan, switch):
        name = naming.port(s.port.port)
        interface[name] = {}
        if s.local_address:
            interface[f"{name}|{s.local_address}/31"] = {}
    tables = _merged({"INTERFACE": interface}, _host_side(plan, switch, naming))
    tables["LOOPBACK_INTERFACE"] = {"Loopback0": {}, f"Loopback0|{switch.loopback}/32": {}}
    tables["BGP_NEIGHBOR"] = {
        s.peer_address: {"asn": str(s.peer_asn), "name": s.port.far_device, "local_addr": s.local_address,
                         "keepalive": str(KEEPALIVE), "holdtime": str(HOLD), "admin_status": "up"}
        for s in sessions(plan, switch) if s.peer_address and s.local_address}
    return {name: table for name, table in tables.items() if table}


def _merged(first: Tables, second: Tables) -> Tables:
    return {name: first.get(name, {}) | second.get(name, {}) for name in first.keys() | second.keys()}


def _host_side(plan: Plan, switch: Switch, naming: Naming) -> Tables:
    vlan = host_vlan(plane_of(plan, switch))
    attachments = host_attachments(plan, switch)
    if vlan:
        return {"VLAN_SUB_INTERFACE": {naming.attachment(a, vlan): {"admin_status": "up", "vlan": str(vlan)}
                                       for a in attachments}}
    tables: Tables = {"INTERFACE": {naming.port(a.first): {} for a in attachments if not a.lag},
                      "PORTCHANNEL_INTERFACE": {naming.lag(a.first): {} for a in attachments if a.lag}}
    return tables


def _bridging(plan: Plan, switch: Switch, naming: Naming) -> Tables:
    """A single-switch plane: one VLAN (the plane's tag, else an untagged VLAN 1000) holding every
    host port or LAG."""
    tag = host_vlan(plane_of(plan, switch))
    vid = tag or DEFAULT_VLAN
    members = [naming.lag(a.first) if a.lag else naming.port(a.first) for a in host_attachments(plan, switch)]
    return {"VLAN": {f"Vlan{vid}": {"vlanid": str(vid), "mtu": str(SWITCH_MTU), "admin_status": "up"}},
            "VLAN_MEMBER": {f"Vlan{vid}|{m}": {"tagging_mode": "tagged" if tag else "untagged"} for m in members}}
