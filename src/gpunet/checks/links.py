"""Link, MTU, address, route and bond checks: the node's interfaces against the Plan."""

from __future__ import annotations

from ipaddress import IPv4Interface

from gpunet.checks.base import Context, FunctionCheck, Outcome, Verdict
from gpunet.model.state import InterfaceState

NO_PLAN = Outcome("skip", evidence="no plan given (--plan), nothing to compare with")


def _live(ctx: Context) -> dict[str, InterfaceState]:
    return {i.name: i for i in ctx.state.interfaces}


def link_up(ctx: Context) -> list[Outcome]:
    if ctx.node is None:
        return [NO_PLAN]
    live, result = _live(ctx), []
    for iface in ctx.planned(cabled=True):
        state = live.get(iface.name)
        if state is None:
            result.append(Outcome("fail", iface.name, "interface missing", "present, carrier up"))
        elif state.operstate != "up" or not state.carrier:
            result.append(Outcome("fail", iface.name, f"operstate {state.operstate}, carrier {state.carrier}",
                                  "up, carrier", f"/sys/class/net/{iface.name}/operstate"))
        else:
            result.append(Outcome("pass", iface.name, "up"))
    return result


def speed(ctx: Context) -> list[Outcome]:
    if ctx.node is None:
        return [NO_PLAN]
    live, result = _live(ctx), []
    for iface in ctx.planned(cabled=True):
        state = live.get(iface.name)
        wanted = iface.speed_gbps * 1000
        if state is None or state.speed_mbps is None:
            result.append(Outcome("skip", iface.name, evidence="no speed reported (link down or virtual NIC)"))
        elif state.virtual:
            result.append(Outcome("skip", iface.name, evidence=f"virtual interface: {state.speed_mbps} Mb/s is "
                                                               "nominal (a lab veth), not a negotiated speed"))
        elif state.speed_mbps < wanted or state.duplex == "half":
            result.append(Outcome("fail", iface.name, f"{state.speed_mbps} Mb/s {state.duplex} duplex",
                                  f"{wanted} Mb/s full duplex", "/sys/class/net/<if>/{speed,duplex}"))
        else:
            result.append(Outcome("pass", iface.name, f"{state.speed_mbps} Mb/s", f"{wanted} Mb/s"))
    return result


def mtu(ctx: Context) -> list[Outcome]:
    if ctx.node is None:
        return [NO_PLAN]
    live, result = _live(ctx), []
    for iface in ctx.planned():
        state = live.get(iface.layer3) or live.get(iface.name)
        if state is None:
            continue  # reported by GN-LINK-01 / GN-ADDR-01
        verdict: Verdict = "pass" if state.mtu == iface.mtu else "fail"
        result.append(Outcome(verdict, state.name, str(state.mtu), str(iface.mtu)))
    return result or [Outcome("skip", evidence="no planned interface is present (see GN-LINK-01)")]


def address(ctx: Context) -> list[Outcome]:
    if ctx.node is None:
        return [NO_PLAN]
    result = []
    for iface in (i for i in ctx.planned() if i.address):
        dev = iface.layer3
        have = ctx.state.addresses.get(dev, ())
        wanted = IPv4Interface(iface.address)
        same_ip = [a for a in have if IPv4Interface(a).ip == wanted.ip] if have else []
        if str(wanted) in have:
            result.append(Outcome("pass", dev, str(wanted), str(wanted)))
        elif same_ip:
            result.append(Outcome("fail", dev, f"{same_ip[0]} (wrong prefix)", str(wanted)))
        else:
            result.append(Outcome("fail", dev, ", ".join(a for a in have if ":" not in a) or "no address",
                                  str(wanted)))
    return result


def default_route(ctx: Context) -> list[Outcome]:
    """Only management routes out: a default route on a data plane sends traffic astray."""
    if ctx.node is None:
        return [NO_PLAN]
    data = {i.layer3: i.plane for i in ctx.planned() if i.plane != "management" and i.address}
    wrong = [r for r in ctx.state.routes if r.dst == "default" and r.table == "main" and r.dev in data]
    if wrong:
        return [Outcome("fail", r.dev or "", f"default via {r.gateway} dev {r.dev}", "no default route on "
                        f"the {data[r.dev or '']} plane") for r in wrong]
    return [Outcome("pass", "routes", "no default route on a data plane")]


def gateway(ctx: Context) -> list[Outcome]:
    if ctx.plan is None or ctx.node is None:
        return [NO_PLAN]
    mgmt = next((p for p in ctx.plan.planes if p.name == "management"), None)
    iface = next((i for i in ctx.planned() if i.plane == "management" and i.address), None)
    if mgmt is None or iface is None or mgmt.gateway is None:
        return [Outcome("skip", evidence="the plan gives no management gateway")]
    dev = iface.layer3
    defaults = [r for r in ctx.state.routes if r.dst == "default" and r.table == "main"]
    if any(r.gateway == mgmt.gateway and r.dev == dev for r in defaults):
        return [Outcome("pass", dev, f"default via {mgmt.gateway}")]
    seen = "; ".join(f"via {r.gateway} dev {r.dev}" for r in defaults) or "no default route"
    return [Outcome("fail", dev, seen, f"default via {mgmt.gateway} dev {dev}")]


def bond(ctx: Context) -> list[Outcome]:
    bonds = {b.name: b for b in ctx.state.bonds}
    planned = [i for i in ctx.planned() if i.bond is not None]
    if not planned:
        return [Outcome("skip", evidence="no bond in the plan for this node")]
    result = []
    for iface in planned:
        live = bonds.get(iface.name)
        assert iface.bond is not None
        if live is None:
            result.append(Outcome("fail", iface.name, "no /proc/net/bonding entry", f"mode {iface.bond.mode}"))
            continue
        down = [s.name for s in live.slaves if not s.mii_up]
        missing = sorted(set(iface.members) - {s.name for s in live.slaves})
        if down or missing or live.mode_name != iface.bond.mode:
            observed = f"mode {live.mode_name}, down: {down or '-'}, missing: {missing or '-'}"
            result.append(Outcome("fail", iface.name, observed, f"mode {iface.bond.mode}, all members up"))
        else:
            result.append(Outcome("pass", iface.name, f"mode {live.mode_name}, {len(live.slaves)} members up"))
    return result


LINK_CHECKS = [
    FunctionCheck("GN-LINK-01", "link", "link up with carrier",
                  "ip link set dev {subject} up; check the cable and transceiver (ethtool {subject})", link_up),
    FunctionCheck("GN-LINK-02", "link", "link speed at least the plan's",
                  "ethtool {subject}; reseat or replace the cable/transceiver; check the switch port speed", speed),
    FunctionCheck("GN-MTU-01", "mtu", "interface MTU as planned",
                  "ip link set dev {subject} mtu {expected}, and in the network config (gpunet render)", mtu),
    FunctionCheck("GN-ADDR-01", "address", "planned address present with its prefix",
                  "ip addr replace {expected} dev {subject}, and in the network config (gpunet render)", address),
    FunctionCheck("GN-ROUTE-01", "route", "no default route on a data plane",
                  "ip route del default dev {subject}; keep routes on data planes to their subnets", default_route),
    FunctionCheck("GN-ROUTE-02", "route", "default route via the management gateway",
                  "ip route replace {expected}", gateway),
    FunctionCheck("GN-BOND-01", "bond", "bond members up, mode as planned",
                  "cat /proc/net/bonding/{subject}; ip link set dev <member> up; check LACP on the switch", bond),
]
