"""What every switch render needs, read off the Plan: which switches get files, port names per
platform, host attachments (a port, or a LAG for a bonded node) and the routes to them.

Port names: `swp<N>` for Linux switches running FRR (Cumulus Linux's names; NVUE uses them too);
on SONiC `Ethernet<(N-1) x lanes>` with alias `etp<N>`, the layout of most SONiC platforms'
port_config.ini, so LLDP's port id (the alias) carries the Plan's port number to `cabling check`.
Lanes per port follow the speed (8 at 400G and up, 4 from 40G, else 1); the platform's own
port_config.ini (from its HwSKU) is what a real switch uses, so PORT entries are merged over it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network

from gpunet.model.plan import Plan, Plane, Switch
from gpunet.model.switching import HostRoute, SwitchPort, host_routes, plane_of, sonic_lanes, switch_ports
from gpunet.render.quote import one_line

SWITCH_MTU = 9216  # every port: the usual switch maximum, above every host MTU gpunet plans
DEFAULT_VLAN = 1000  # the host-facing VLAN of an untagged plane's L2 switch
KEEPALIVE, HOLD, CONNECT_RETRY = 3, 9, 5  # BGP timers; FRR's default connect-retry is 120 s


def renderable(plan: Plan, switch: Switch) -> bool:
    """Ethernet and RoCE switches; InfiniBand switches take their routing from the subnet manager."""
    return plane_of(plan, switch).technology != "infiniband"


def routed(plan: Plan, switch: Switch) -> bool:
    return plane_of(plan, switch).routing is not None


def linux_port(port: str) -> str:
    return f"swp{port}"


@dataclass(frozen=True)
class Naming:
    """How a platform names a switch's ports, LAGs and VLAN sub-interfaces."""

    port: Callable[[str], str]  # "17" -> swp17 / Ethernet128
    lag: Callable[[str], str]  # lowest member port -> bond17 / PortChannel17
    subinterface: Callable[[str, int], str]  # (parent, vlan) -> swp17.20

    def attachment(self, attachment: HostAttachment, vlan: int | None) -> str:
        """The interface a node's addresses are routed to: its port or LAG, tagged where the plane is."""
        base = self.lag(attachment.first) if attachment.lag else self.port(attachment.first)
        return self.subinterface(base, vlan) if vlan else base


LINUX = Naming(linux_port, lambda first: f"bond{first}", lambda parent, vlan: f"{parent}.{vlan}")


def sonic_port(port: str, gbps: int) -> str:
    return f"Ethernet{(int(port) - 1) * sonic_lanes(gbps)}"


def sonic_alias(port: str) -> str:
    return f"etp{port}"


def description(port: SwitchPort) -> str:
    """The far end of the port's cable, `device:port` as cabling.csv names it: one line, always."""
    return one_line(port.far_end, "port description")


@dataclass(frozen=True)
class HostAttachment:
    """A node's interface on a leaf: one port, or a LAG of a bond's member ports."""

    ports: tuple[str, ...]
    lag: bool
    route: HostRoute | None  # None where the node's interface has no address

    @property
    def first(self) -> str:
        return min(self.ports, key=int)


def host_attachments(plan: Plan, switch: Switch) -> list[HostAttachment]:
    """Host ports grouped by the node interface behind them; a bond's members form a LAG."""
    routes = {port: r for r in host_routes(plan, switch) for port in r.ports}
    grouped: dict[tuple[str, str], list[SwitchPort]] = {}
    for port in (p for p in switch_ports(plan, switch) if p.kind == "host"):
        node = plan.node(port.far_device)
        iface = next((i for i in node.interfaces if i.name == port.far_port), None) if node else None
        key = (port.far_device, iface.master if iface and iface.master else port.far_port)
        grouped.setdefault(key, []).append(port)
    attachments = []
    for (_, name), ports in grouped.items():
        lag = any(p.far_port != name for p in ports)
        attachments.append(HostAttachment(tuple(p.port for p in ports), lag, routes.get(ports[0].port)))
    return sorted(attachments, key=lambda a: int(a.first))


def management_gateway(plan: Plan, switch: Switch) -> str | None:
    """The gateway of the subnet the switch's management address is in (site.switch_management's,
    or the plane's), if it has one."""
    if switch.management is None:
        return None
    network = IPv4Interface(switch.management).network
    own = plan.site.switch_management
    if own is not None and own.subnet == network:
        return str(own.gateway) if own.gateway else None
    return next((p.gateway for p in plan.planes if p.gateway and IPv4Network(p.subnet) == network), None)


def host_vlan(plane: Plane) -> int | None:
    """The 802.1Q tag hosts send on this plane (None: untagged)."""
    return plane.vlan
