"""A switch's eBGP sessions and ECMP routes against the Plan (RFC 7938 fabric).

GN-BGP-01  a session per planned switch-to-switch cable, Established
GN-BGP-02  each session's remote ASN is the ASN the Plan gave the switch at the other end
GN-BGP-03  the switch's own ASN is the Plan's
GN-BGP-04  no session the Plan has no cable for
GN-BGP-05  every other leaf's routes (its loopback, its hosts' /32s) over every planned next hop

Sessions are keyed as FRR keys them: by the peer's address on the cable's /31 (numbered), or by
the local port (unnumbered, `swp17`)."""

from __future__ import annotations

from collections.abc import Iterator

from gpunet.checks.base import Finding
from gpunet.checks.switch_common import finding, linux_port, port_number
from gpunet.model.plan import Plan, Switch
from gpunet.model.switching import Session, ecmp_next_hops, host_routes, plane_of, sessions
from gpunet.probe.frr import BgpPeer, BgpSummary, Route

FIX_SESSION = ("check the cable and both ends' frr.conf (gpunet render --target frr): `vtysh -c 'show bgp neighbor "
               "{peer}'` on {switch} says why the session is not up")


def cable_name(session: Session) -> str:
    cable = session.port.cable
    return f"{cable.a.device}:{cable.a.port} {cable.b.device}:{cable.b.port}"


def peer_key(plan: Plan, switch: Switch, session: Session) -> str:
    routing = plane_of(plan, switch).routing
    if routing is not None and routing.peering == "unnumbered":
        return linux_port(session.port.port)
    return session.peer_address or linux_port(session.port.port)


def judge_bgp(plan: Plan, switch: Switch, summary: BgpSummary) -> Iterator[Finding]:
    if switch.asn is not None and summary.local_as != switch.asn:
        yield finding("GN-BGP-03", switch, "fail", title="BGP ASN of the switch", subject=f"{switch.name} local AS",
                      observed=str(summary.local_as), expected=str(switch.asn),
                      evidence=f"show bgp summary json: as {summary.local_as}",
                      fix=f"set `router bgp {switch.asn}` on {switch.name} (gpunet render --target frr)")
    peers = {p.key: p for p in summary.peers}
    planned = sessions(plan, switch)
    for session in planned:
        yield from _session(plan, switch, session, peers.get(peer_key(plan, switch, session)))
    expected = {peer_key(plan, switch, s) for s in planned}
    for key, peer in peers.items():
        if key not in expected:
            yield finding("GN-BGP-04", switch, "warn", title="BGP session without a planned cable", subject=key,
                          observed=f"{peer.state}, AS {peer.remote_as}", expected="no such session",
                          evidence=f"show bgp summary json: {key}",
                          fix=f"remove `neighbor {key}` from {switch.name}'s frr.conf, or plan its cable")


def _session(plan: Plan, switch: Switch, session: Session, peer: BgpPeer | None) -> Iterator[Finding]:
    key, cable = peer_key(plan, switch, session), cable_name(session)
    subject = f"{key} (cable {cable})"
    fix = FIX_SESSION.format(peer=key, switch=switch.name)
    if peer is None:
        yield finding("GN-BGP-01", switch, "fail", title="BGP session per planned cable", subject=subject,
                      observed="no such neighbour",
                      expected=f"Established with {session.port.far_device} (AS {session.peer_asn})",
                      evidence="show bgp summary json lists no neighbour " + key,
                      fix=f"add `neighbor {key} remote-as {session.peer_asn}` on {switch.name} "
                          "(gpunet render --target frr)")
        return
    if peer.remote_as != session.peer_asn:
        yield finding("GN-BGP-02", switch, "fail", title="BGP peer ASN", subject=subject,
                      observed=f"remote-as {peer.remote_as}",
                      expected=f"remote-as {session.peer_asn} ({session.port.far_device})",
                      evidence=f"show bgp summary json: {key} remoteAs {peer.remote_as}",
                      fix=f"set `neighbor {key} remote-as {session.peer_asn}` on {switch.name}, or the ASN of "
                          f"{session.port.far_device} to {session.peer_asn} (gpunet render --target frr)")
    yield finding("GN-BGP-01", switch, "pass" if peer.established else "fail", title="BGP session per planned cable",
                  subject=subject, observed=peer.state, expected="Established",
                  evidence=f"show bgp summary json: {key} state {peer.state}", fix=fix)


def judge_ecmp(plan: Plan, switch: Switch, routes: tuple[Route, ...]) -> Iterator[Finding]:
    """Per other leaf: all its prefixes over all the planned first hops (named by their cables)."""
    table = {r.prefix: r for r in routes if r.selected}
    behind = _prefixes_behind_leaves(plan, switch.plane)
    for leaf, hops in ecmp_next_hops(plan, switch).items():
        expected = {int(s.port.port): s for s in hops}
        short: dict[str, set[int]] = {}
        for prefix in behind.get(leaf, []):
            route = table.get(prefix)
            used = {port_number(n.interface) for n in route.nexthops if n.fib} if route else set()
            if missing := set(expected) - used:
                short[prefix] = missing
        yield _ecmp_outcome(switch, leaf, expected, short, len(behind.get(leaf, [])))


def _ecmp_outcome(switch: Switch, leaf: str, expected: dict[int, Session], short: dict[str, set[int]],
                  prefixes: int) -> Finding:
    subject = f"routes to {leaf} ({prefixes} prefixes)"
    want = f"{len(expected)} next hops each"
    if not short:
        return finding("GN-BGP-05", switch, "pass", title="ECMP width per prefix", subject=subject, observed=want,
                       expected=want, evidence="show ip route json")
    cables = sorted({cable_name(expected[p]) for missing in short.values() for p in missing})
    example, missing = next(iter(short.items()))
    observed = f"{len(short)} prefixes short of next hops (e.g. {example}: {len(expected) - len(missing)})"
    return finding("GN-BGP-05", switch, "fail", title="ECMP width per prefix", subject=subject, observed=observed,
                   expected=want, evidence=f"show ip route json; next hops missing over cable(s) {', '.join(cables)}",
                   fix=f"bring the session(s) over {', '.join(cables)} up (GN-BGP-01); check maximum-paths and "
                       "`bgp bestpath as-path multipath-relax` in frr.conf")


def _prefixes_behind_leaves(plan: Plan, plane: str) -> dict[str, list[str]]:
    """What each leaf of the plane announces: its loopback and its hosts' /32s."""
    leaves = [s for s in plan.switches if s.plane == plane and s.tier == "leaf" and s.loopback]
    return {s.name: [f"{s.loopback}/32", *(f"{r.address}/32" for r in host_routes(plan, s))] for s in leaves}
