"""Checks over the active peer probes (doctor --peers)."""

from __future__ import annotations

from gpunet.checks.base import Context, Finding, FunctionCheck, Outcome
from gpunet.probe.peers import PeerResult


def _results(ctx: Context, *kinds: str) -> list[PeerResult]:
    return [r for r in ctx.peer_results if r.probe.kind in kinds]


def _outcomes(ctx: Context, expect: str, *kinds: str) -> list[Outcome]:
    results = _results(ctx, *kinds)
    if not results:
        return [Outcome("skip", evidence="peers not probed (doctor --peers)")]
    return [_outcome(r, expect) for r in results]


def _outcome(result: PeerResult, expect: str) -> Outcome:
    probe = result.probe
    subject = f"{probe.peer} {probe.plane} {probe.target}" + (f":{probe.port}/{probe.kind}" if probe.port else "")
    where = f"from {probe.source}" + (f", flow {probe.service}" if probe.service else "")
    if result.ok is None:
        return Outcome("skip", subject, result.detail, expect, f"{where}: {result.detail}")
    return Outcome("pass" if result.ok else "fail", subject, result.detail, expect, where)


def peer_reachable(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "replies", "ping")


def path_mtu(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "a don't-fragment ping at the plane MTU passes", "pmtu")


def firewall_ports(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "open", "tcp", "udp")


def gateway_reachable(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "the management gateway replies", "gateway")


def duplicate_address(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "no other host answers ARP for this address", "dad")


class PeerCheck(FunctionCheck):
    """Peer findings name the peer as the node at fault where the probe points at its side."""

    def __call__(self, ctx: Context) -> list[Finding]:
        findings = super().__call__(ctx)
        return [f.model_copy(update={"node": f.subject.split(" ")[0]}) if self.id == "GN-FW-02" and f.verdict == "fail"
                else f for f in findings]


PEER_CHECKS = [
    FunctionCheck("GN-PEER-01", "peers", "every peer answers on every shared plane",
                  "ping -I <source> {subject}; check link, address and routes on both ends", peer_reachable),
    FunctionCheck("GN-MTU-02", "mtu", "path MTU to every peer is the plane MTU",
                  "ping -M do -s <MTU-28> {subject}; find the link with a smaller MTU (switch ports too)", path_mtu),
    FunctionCheck("GN-ROUTE-03", "route", "the management gateway answers",
                  "ping {subject}; check the gateway and the management plane's uplink", gateway_reachable),
    FunctionCheck("GN-ADDR-03", "address", "no other host uses this node's addresses",
                  "arping -D -I <interface> <address>: find the other host by the MAC it answers with",
                  duplicate_address),
    PeerCheck("GN-FW-02", "firewall", "peers reach the ports the plan needs",
              "on the peer: gpunet doctor (GN-FW-01 names the rule); allow {subject} (gpunet render --target "
              "nftables)", firewall_ports),
]
