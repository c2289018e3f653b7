"""What a lab is made of, computed from a Plan without touching the system: namespaces, veth
cables with shaped rates, addresses, routes and sysctls. lab/build.py carries it out."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from ipaddress import IPv4Address, IPv4Interface, IPv4Network

from gpunet.errors import LabError, LabUsageError
from gpunet.lab.addressing import LAB_RANGE, BlockCarver, PlaneAddressing, lab_block, plane_addressing
from gpunet.lab.frr import frr_order
from gpunet.lab.management import HOST_PORT, plan_management
from gpunet.lab.routes import host_routes, port_if
from gpunet.lab.state import AddressPair, Routing
from gpunet.lab.state import VethState as Veth
from gpunet.model.plan import Interface, Link, Node, Plan, PlaneRouting, Switch
from gpunet.model.tuning import tcp_buffer_sysctls
from gpunet.render.switch.common import SWITCH_MTU
from gpunet.render.switch.frr import render_frr

# One MTU-sized packet per skb (no GSO/TSO batching on the veths): injected loss then hits frames
# as on a wire, and tbf queues see real packet sizes. Cheap at the lab's Mbit/s rates.
WIRE_SIZED = " gso_max_segs 1"
DEFAULT_SCALE_MBIT_PER_GBIT = 1.0  # 400G in the plan is 400 Mbit/s in the lab


@dataclass
class Namespace:
    name: str
    kind: str  # server | router | bridge
    device: str  # the plan's node or switch name
    sysctls: dict[str, str] = field(default_factory=dict)
    commands: list[str] = field(default_factory=list)  # `ip -batch` lines run inside


@dataclass
class Blueprint:
    lab_id: str
    block: IPv4Network
    namespaces: list[Namespace]
    veths: list[Veth]
    host_if: str
    host_address: IPv4Interface
    mgmt_subnet: IPv4Network
    address_map: dict[str, AddressPair]  # "node/interface" -> plan and lab address
    mgmt_addresses: dict[str, str]  # node -> lab management address (no prefix)
    hosts_file: str
    notes: list[str]
    lab_plan: Plan  # the plan as the lab has it: lab addresses (doctor --plan inside the lab)
    routing: Routing = "static"
    # Routed switches that run FRR (`routing` frr, on planes the Plan routes with eBGP): namespace ->
    # the switch's frr.conf, rendered from `lab_plan` exactly as for a real switch.
    frr_confs: dict[str, str] = field(default_factory=dict)
    # Switch management (lab/management.py): each switch's eth0 cable, the host's ports on the
    # switches' management plane, and switch -> lab management address (its sshd listens there).
    mgmt_ports: list[Veth] = field(default_factory=list)
    host_links: list[Veth] = field(default_factory=list)
    host_link_addresses: dict[str, IPv4Interface] = field(default_factory=dict)
    switch_mgmt: dict[str, str] = field(default_factory=dict)


HASH_5_TUPLE = "0x0037"  # source and destination address, protocol, source and destination port
MULTIPATH_SEED = "net.ipv4.fib_multipath_hash_seed"  # kernel >= 6.11; without it, interleaved next hops


def ns_name(lab_id: str, device: str) -> str:
    return f"gn{lab_id}-{device}"


def build_blueprint(plan: Plan, lab_id: str, slot: int, scale: float = DEFAULT_SCALE_MBIT_PER_GBIT,
                    routing: Routing = "static") -> Blueprint:
    """The lab of a (sliced) plan, host indexes kept where the whole lab fits its block that way,
    else renumbered densely (switch cables and loopbacks need their room too). `routing` frr: the
    switches of every plane the Plan routes with eBGP run FRR from their rendered frr.conf (the
    other routed planes, InfiniBand ones, keep static routes); static: static ECMP routes everywhere."""
    try:
        return _blueprint(plan, lab_id, slot, scale, dense=False, routing=routing)
    except LabError:
        return _blueprint(plan, lab_id, slot, scale, dense=True, routing=routing)


def _blueprint(plan: Plan, lab_id: str, slot: int, scale: float, *, dense: bool, routing: Routing) -> Blueprint:
    block = lab_block(slot)
    addressing, carver = plane_addressing(plan, block, dense=dense)
    mgmt = _management_plane(plan)
    bridged = {c.plane for c in plan.capacity if c.style == "single-switch"}
    ns = {n.name: ns_name(lab_id, n.name) for n in plan.nodes} | {
        s.name: ns_name(lab_id, s.name) for s in plan.switches}
    lab_addr = _lab_addresses(plan, addressing)
    mtu: dict[str, int] = {p.name: p.mtu for p in plan.planes}
    veths = [_veth(c, ns, mtu[c.plane], scale) for c in plan.links]
    host_if, mgmt_leaf = f"gn{lab_id}h", _first_leaf(plan, mgmt)
    host_addr = addressing[mgmt].host_address(next(p.gateway for p in plan.planes if p.name == mgmt))
    veths.append(Veth(a_ns="", a_if=host_if, b_ns=ns[mgmt_leaf], b_if=HOST_PORT, mtu=mtu[mgmt], mbit=0,
                      plane=mgmt, a_end="host", b_end=f"{mgmt_leaf}:{HOST_PORT}"))
    p2p = _p2p_addresses(plan, carver)
    loopback_pool = carver.take(len(plan.switches) + 2)
    loopbacks = dict(zip((s.name for s in plan.switches), loopback_pool.hosts(), strict=False))
    # FRR runs only where the Plan routes with eBGP; the lab's plan also numbers the planes the lab
    # routes statically (an InfiniBand plane's Ethernet stand-in), so a hop there maps to its cable too
    bgp_planes = frozenset(p.name for p in plan.planes if p.routing is not None and routing == "frr")
    routed_switches = {s: a for s, a in loopbacks.items() if plan.switches_by_name[s].plane not in bridged}
    management = plan_management(plan, addressing, ns, lab_id, host_plane=mgmt, bridged=bridged)
    lab_plan = with_lab_management(with_lab_switch_addresses(
        _routed_view(lab_view(plan, addressing, lab_addr, host_addr), loopbacks, p2p, loopback_pool), p2p,
        routed_switches), management.addresses)
    extra = {mgmt: [(mgmt_leaf, HOST_PORT, str(host_addr.ip))]}
    for plane, attached in management.endpoints.items():
        extra.setdefault(plane, []).extend(attached)
    routes = host_routes(plan, lab_addr, p2p, extra, bgp_planes)
    gateway = str(host_addr.ip) if next(p.gateway for p in plan.planes if p.name == mgmt) else None
    namespaces = [_server_ns(n, ns[n.name], lab_addr, gateway) for n in plan.nodes]
    for s in plan.switches:
        kind = "bridge" if s.plane in bridged else "router"
        switch = _switch_ns(s.name, ns[s.name], kind, SWITCH_MTU, ipv6=_unnumbered(lab_plan, s, bgp_planes))
        if kind == "router":
            switch.commands += [f"addr add {loopbacks[s.name]}/32 dev lo"]
            switch.commands += [f"addr add {a} dev {port_if(p)}" for (d, p), a in p2p.items() if d == s.name]
            switch.commands += routes.get(s.name, [])
        namespaces.append(switch)
    _port_commands(namespaces, veths)
    _management_commands(namespaces, management.links_up)
    return Blueprint(
        lab_id=lab_id, block=block, namespaces=namespaces, veths=veths, host_if=host_if,
        host_address=host_addr, mgmt_subnet=addressing[mgmt].lab_subnet,
        address_map={f"{n}/{i}": AddressPair(plan=_plan_address(plan, n, i), lab=str(a))
                     for (n, i), a in lab_addr.items()},
        mgmt_addresses={n: str(a.ip) for (n, _), a in lab_addr.items() if a.ip in addressing[mgmt].lab_subnet},
        hosts_file=_hosts_file(plan, lab_addr), notes=[*_notes(plan, addressing), *management.notes],
        lab_plan=lab_plan, routing=routing,
        frr_confs={ns[s.name]: render_frr(lab_plan, s) for s in frr_order(lab_plan.switches)
                   if s.plane in bgp_planes and s.plane not in bridged},
        mgmt_ports=management.ports, host_links=management.host_links,
        host_link_addresses=management.host_addresses,
        switch_mgmt={name: str(address.ip) for name, address in management.addresses.items()},
    )


def with_lab_management(plan: Plan, addresses: dict[str, IPv4Interface]) -> Plan:
    """The switches' management addresses as the lab numbered them (None where the lab gave a
    switch no management port): `localize --switches` and the scrape config dial these."""
    switches = tuple(s.model_copy(update={"management": str(addresses[s.name]) if s.name in addresses else None})
                     for s in plan.switches)
    return plan.model_copy(update={"switches": switches})


def _management_commands(namespaces: list[Namespace], links_up: dict[str, list[str]]) -> None:
    """Management ports up and addressed before any route (a router's /32 routes name them)."""
    for target in namespaces:
        lines = links_up.get(target.device, []) if target.kind != "server" else []
        at = target.commands.index("link set lo up") + 1 + (2 if target.kind == "bridge" else 0)
        target.commands[at:at] = lines


def _routed_view(plan: Plan, loopbacks: dict[str, IPv4Address], p2p: dict[tuple[str, str], IPv4Interface],
                 loopback_pool: IPv4Network) -> Plan:
    """The lab plan's routed planes in lab addresses too: each switch's loopback and each
    switch-to-switch cable's /31 as the lab numbered them (ASNs stay the Plan's), so a switch's
    frr.conf rendered from it is the one its namespace runs."""
    routed = {p.name for p in plan.planes if p.routing is not None}
    if not routed:
        return plan
    p2p_pool = _covering(a for v in p2p.values() for a in (v.network.network_address, v.network.broadcast_address))
    planes = tuple(p.model_copy(update={"routing": p.routing.model_copy(update={
        "loopbacks": str(loopback_pool), "p2p": str(p2p_pool)})}) if p.routing is not None else p
        for p in plan.planes)
    switches = tuple(s.model_copy(update={"loopback": str(loopbacks[s.name])}) if s.plane in routed else s
                     for s in plan.switches)
    links = tuple(c.model_copy(update={"p2p": str(p2p[c.a.device, c.a.port].network)})
                  if c.plane in routed and (c.a.device, c.a.port) in p2p else c for c in plan.links)
    return plan.model_copy(update={"planes": planes, "switches": switches, "links": links})


def _covering(addresses: Iterable[IPv4Address]) -> IPv4Network:
    """The smallest network holding every address (the lab's /31s or loopbacks: one carved block each)."""
    ints = [int(a) for a in addresses]
    if not ints:
        return IPv4Network("0.0.0.0/32")
    first, last = min(ints), max(ints)
    return IPv4Network((first, 32 - (first ^ last).bit_length()), strict=False)


def _unnumbered(plan: Plan, switch: Switch, bgp_planes: frozenset[str]) -> bool:
    """BGP unnumbered peers over IPv6 link-local addresses: its switches keep IPv6."""
    plane = next(p for p in plan.planes if p.name == switch.plane)
    return switch.plane in bgp_planes and plane.routing is not None and plane.routing.peering == "unnumbered"


LabAddresses = dict[tuple[str, str], IPv4Interface]  # (node, device) -> lab address


def lab_view(plan: Plan, addressing: dict[str, PlaneAddressing], lab_addr: LabAddresses,
             host: IPv4Interface | None = None) -> Plan:
    """The plan as the lab built it, which is what doctor compares a lab server with: the lab's
    subnets, gateways and addresses; every plane plain Ethernet and no HCAs (veths carry IP, not
    RDMA); no bonds (a bond's address and name on its first member, the
    other members cabled and idle: this kernel has no bonding); no VLAN tags (no 802.1Q); sources
    of flows and the admin and monitoring ranges in lab addresses (ranges outside every plane
    become the host's address: in the lab the host is the admin and the monitoring box)."""
    planes = tuple(p.model_copy(update={
        "subnet": str(addressing[p.name].lab_subnet), "subnet6": None, "vlan": None, "technology": "ethernet",
        "gateway": str(addressing[p.name].to_lab(p.gateway).ip) if p.gateway else None,
    }) for p in plan.planes)
    nodes = tuple(n.model_copy(update={"interfaces": tuple(
        i.model_copy(update={"address": str(lab_addr[n.name, i.name]) if (n.name, i.name) in lab_addr else None,
                             "address6": None, "vlan": None, "hca": None})
        for i in _without_bonds(n))}) for n in plan.nodes)
    taken = [IPv4Interface(i.address).ip for n in nodes for i in n.interfaces if i.address]
    relocate = partial(_lab_source, partial(_lab_network, plan, addressing, host), host, taken)
    flows = tuple(f.model_copy(update={"from_subnets": tuple(relocate(s) for s in f.from_subnets)})
                  for f in plan.flows)
    site = plan.site.model_copy(update={key: IPv4Network(relocate(str(value))) for key in ("admin_subnet", "monitoring")
                                        if (value := getattr(plan.site, key)) is not None})
    return plan.model_copy(update={"planes": planes, "nodes": nodes, "flows": flows, "site": site})


def with_lab_switch_addresses(plan: Plan, p2p: dict[tuple[str, str], IPv4Interface],
                              loopbacks: dict[str, IPv4Address]) -> Plan:
    """The lab's cable /31s and its routers' loopbacks in the lab's plan, in place of the Plan's own
    (every lab plane with switch-to-switch cables is routed Ethernet, an InfiniBand plane's too):
    doctor and localize inside the lab map a hop's address to a cable as on a real fabric (an
    address of the lab's that the Plan placed elsewhere, or not at all, would name the wrong
    cable, or none). A plane the Plan does not route gets the lab's pools as its routing."""
    links = tuple(link.model_copy(update={"p2p": str(p2p[link.a.device, link.a.port].network)})
                  if (link.a.device, link.a.port) in p2p else link for link in plan.links)
    routed = {s.plane for s in plan.switches if s.name in loopbacks}
    switches = tuple(s.model_copy(update={"loopback": str(loopbacks[s.name])}) if s.name in loopbacks else s
                     for s in plan.switches)
    planes = tuple(p.model_copy(update={"routing": _lab_routing(
        [loopbacks[s.name] for s in plan.switches if s.plane == p.name and s.name in loopbacks],
        [a.ip for (device, _), a in p2p.items() if plan.switches_by_name[device].plane == p.name])})
        if p.name in routed and p.routing is None else p for p in plan.planes)
    return plan.model_copy(update={"links": links, "switches": switches, "planes": planes})


LAB_ASN = 64512  # the lab routes statically: no switch has an ASN, the range only has to be valid


def _lab_routing(loopbacks: list[IPv4Address], p2p: list[IPv4Address]) -> PlaneRouting:
    return PlaneRouting(loopbacks=str(_covering(loopbacks)), p2p=str(_covering(p2p or loopbacks)),
                        asn_first=LAB_ASN, asn_last=LAB_ASN)


def _without_bonds(node: Node) -> list[Interface]:
    bonds = {i.name: i for i in node.interfaces if i.bond is not None}
    return [_unbonded(iface, bonds.get(iface.master or "")) for iface in node.interfaces if iface.bond is None]


def _unbonded(iface: Interface, bond: Interface | None) -> Interface:
    """A bond member as the lab has it: the first carries the bond's name on the plane, none has a master."""
    if bond is None:
        return iface
    if iface.name == bond.members[0]:
        return iface.model_copy(update={"master": None, "hostname": bond.hostname, "hca": bond.hca or iface.hca})
    return iface.model_copy(update={"master": None})


def _lab_source(relocate: Callable[[str], str], host: IPv4Interface | None, taken: list[IPv4Address],
                text: str) -> str:
    """A source range in the lab; one that holds no lab server and not the host (a monitoring box at
    an address no namespace has) becomes the host's address, which plays that box in the lab."""
    network = IPv4Network(relocate(text))
    if host is None or host.ip in network or any(ip in network for ip in taken):
        return str(network)
    return f"{host.ip}/32"


def _lab_network(plan: Plan, addressing: dict[str, PlaneAddressing], host: IPv4Interface | None, text: str) -> str:
    """A plan network in lab addresses: the same offset in its plane's lab subnet (the whole lab
    subnet where the lab renumbered hosts); outside every plane, the host's own address."""
    network = IPv4Network(text)
    for plane in plan.planes:
        planned, mapping = IPv4Network(plane.subnet), addressing[plane.name]
        if network.subnet_of(planned):
            if mapping.dense is not None or network.prefixlen <= mapping.lab_subnet.prefixlen:
                return str(mapping.lab_subnet)
            start = mapping.to_lab(f"{network.network_address}/{planned.prefixlen}").ip
            return str(IPv4Network(f"{start}/{network.prefixlen}"))
    return f"{host.ip}/32" if host is not None else text


def _port_commands(namespaces: list[Namespace], veths: list[Veth]) -> None:
    """Bring every switch port up at the switch MTU, as gpunet renders every switch port (the
    servers' ends keep their plane's; bridge ports join br0) before routes."""
    by_name = {n.name: n for n in namespaces}
    for v in veths:
        for ns_name_, ifname in ((v.a_ns, v.a_if), (v.b_ns, v.b_if)):
            target = by_name.get(ns_name_)
            if target is None or target.kind == "server":
                continue
            master = " master br0" if target.kind == "bridge" else ""
            target.commands.insert(target.commands.index("link set lo up") + 1 + (2 if master else 0),
                                   f"link set dev {ifname} mtu {SWITCH_MTU}{WIRE_SIZED}{master} up")


def _management_plane(plan: Plan) -> str:
    names = [p.name for p in plan.planes]
    return "management" if "management" in names else names[0]


def _first_leaf(plan: Plan, plane: str) -> str:
    leaf = next((s.name for s in plan.switches if s.plane == plane and s.tier == "leaf"), None)
    if leaf is None:
        raise LabUsageError(f"the lab reaches servers through the {plane} plane's switch, and this plane has "
                            "none (direct cables); give it a switch (style single-switch) to build a lab")
    return leaf


def _veth(link: Link, ns: dict[str, str], mtu: int, scale: float) -> Veth:
    return Veth(a_ns=ns[link.a.device], a_if=port_if(link.a.port), b_ns=ns[link.b.device],
                b_if=port_if(link.b.port), mtu=mtu, mbit=link.gbps * scale, plane=link.plane,
                a_end=f"{link.a.device}:{link.a.port}", b_end=f"{link.b.device}:{link.b.port}")


def _addressed_interface(node: Node, iface: Interface) -> str:
    """The device carrying an address in the lab: no bonding in this kernel, so a bond's address
    sits on its first member."""
    return iface.members[0] if iface.members else iface.name


def _lab_addresses(plan: Plan, addressing: dict[str, PlaneAddressing]) -> dict[tuple[str, str], IPv4Interface]:
    return {
        (n.name, _addressed_interface(n, i)): addressing[i.plane].to_lab(i.address)
        for n in plan.nodes for i in n.interfaces if i.address
    }


def _plan_address(plan: Plan, node: str, device: str) -> str:
    n = next(x for x in plan.nodes if x.name == node)
    return next(i.address for i in n.interfaces if _addressed_interface(n, i) == device and i.address) or ""


def _p2p_addresses(plan: Plan, carver: BlockCarver) -> dict[tuple[str, str], IPv4Interface]:
    """A /31 per switch-to-switch cable: (device, port) -> address on that end."""
    inter = [c for c in plan.links if c.tier in ("leaf_spine", "spine_core")]
    pool = carver.take(2 * len(inter) + 2) if inter else None
    result: dict[tuple[str, str], IPv4Interface] = {}
    for i, c in enumerate(inter):
        assert pool is not None
        base = int(pool.network_address) + 2 * i
        result[c.a.device, c.a.port] = IPv4Interface((base, 31))
        result[c.b.device, c.b.port] = IPv4Interface((base + 1, 31))
    return result


def _server_ns(node: Node, name: str, lab_addr: LabAddresses, gateway: str | None) -> Namespace:
    """Links up at the plane MTU, addresses, the default route via the management gateway (the
    host's veth, which forwards nothing), and per-NIC routing where NICs share a subnet."""
    ns = Namespace(name, "server", node.name, sysctls={
        "net.ipv4.conf.all.arp_ignore": "1", "net.ipv4.conf.all.arp_announce": "2",
        "net.ipv4.conf.all.rp_filter": "0", "net.ipv4.conf.default.rp_filter": "0",
        "net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1",
    } | tcp_buffer_sysctls(node))
    ns.commands.append("link set lo up")
    ns.commands += [f"link set dev {i.name} mtu {i.mtu}{WIRE_SIZED} up" for i in node.interfaces if i.cabled]
    per_plane: dict[str, list[tuple[str, IPv4Interface]]] = {}
    for (n, dev), addr in lab_addr.items():
        if n == node.name:
            ns.commands.append(f"addr add {addr} dev {dev}")
            plane = next(i.plane for i in node.interfaces if i.name == dev)
            per_plane.setdefault(plane, []).append((dev, addr))
    mgmt = per_plane.get("management")
    if gateway and mgmt:
        ns.commands.append(f"route add default via {gateway} dev {mgmt[0][0]}")
    ns.commands += _per_nic_tables(per_plane)
    return ns


def _per_nic_tables(per_plane: dict[str, list[tuple[str, IPv4Interface]]]) -> list[str]:
    lines, table = [], 100
    for members in per_plane.values():
        if len(members) > 1:
            for dev, addr in members:
                lines += [f"rule add from {addr.ip} lookup {table}",
                          f"route add {addr.network} dev {dev} src {addr.ip} table {table}"]
                table += 1
    return lines


# `gpunet localize` learns each probe flow's path traceroute-style: every hop answers every
# TTL-expired probe (no ICMP rate limit), from the port the probe came in on (its address names
# the cable), as a switch with a generous control-plane policy does.
TRACEABLE = {"net.ipv4.icmp_ratelimit": "0", "net.ipv4.icmp_msgs_per_sec": "100000",
             "net.ipv4.icmp_msgs_burst": "100000", "net.ipv4.icmp_errors_use_inbound_ifaddr": "1"}


def _switch_ns(device: str, name: str, kind: str, mtu: int, ipv6: bool = False) -> Namespace:
    """A routed switch forwards with ECMP on the 5-tuple and answers ARP for the hosts it routes to
    (hosts of one plane share a subnet across leaves); a bridge is one flat L2 switch.

    Policy 1 (L4) would reuse the hash the sending socket put on the packet, the same value at
    every hop: a spine then only ever sees the part of the hash range its leaf sent it and always
    picks the same downlink (measured: half the spine downlinks idle, cross-leaf pairs at 50 %).
    Policy 3 hashes the fields itself, with a seed of its own per switch, as switches do."""
    no_v6 = {} if ipv6 else {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
    if kind == "bridge":
        return Namespace(name, kind, device, sysctls=no_v6,
                         commands=["link set lo up", f"link add br0 mtu {mtu} type bridge", "link set br0 up"])
    return Namespace(name, kind, device, commands=["link set lo up"], sysctls=no_v6 | {
        "net.ipv4.ip_forward": "1", "net.ipv4.fib_multipath_hash_policy": "3",
        "net.ipv4.fib_multipath_hash_fields": HASH_5_TUPLE, MULTIPATH_SEED: str(zlib.crc32(name.encode()) or 1),
        "net.ipv4.conf.all.proxy_arp": "1", "net.ipv4.conf.all.rp_filter": "0",
        "net.ipv4.conf.default.rp_filter": "0",
    } | TRACEABLE)


def _hosts_file(plan: Plan, lab_addr: dict[tuple[str, str], IPv4Interface]) -> str:
    lines = ["127.0.0.1\tlocalhost"]
    for n in plan.nodes:
        for i in n.interfaces:
            dev = _addressed_interface(n, i)
            if i.address and i.hostname and (n.name, dev) in lab_addr:
                lines.append(f"{lab_addr[n.name, dev].ip}\t{i.hostname}")
    return "\n".join(lines) + "\n"


def _notes(plan: Plan, addressing: dict[str, PlaneAddressing]) -> list[str]:
    dense = any(a.dense is not None for a in addressing.values())
    notes = [f"lab addresses are in {LAB_RANGE} (plan subnets re-homed, "
             f"{'hosts renumbered 1, 2, ... to fit' if dense else 'host index kept'}; `status --addresses`)"]
    if any(i.address6 for n in plan.nodes for i in n.interfaces):
        notes.append("IPv6 addresses of the plan are left out of the lab")
    techs = {p.technology for p in plan.planes}
    if techs & {"infiniband", "roce"}:
        notes.append("InfiniBand and RoCE planes are IP links here (this kernel has no RDMA): same "
                     "topology, addressing and MTU, no verbs")
    if any(i.bond for n in plan.nodes for i in n.interfaces):
        notes.append("no bonding in this kernel: a bond's address sits on its first member; the other "
                     "members are cabled and idle")
    if any(p.vlan for p in plan.planes):
        notes.append("no 802.1Q in this kernel: VLAN tags are left out")
    return notes
