"""Checks over the active peer probes (doctor --peers)."""

from __future__ import annotations

from gpunet.checks.base import Context, Finding, FunctionCheck, Outcome
from gpunet.probe.peers import PeerResult


def _results(ctx: Context, kind: str) -> list[PeerResult]:
    return [r for r in ctx.peer_results if r.probe.kind == kind]


def _outcomes(ctx: Context, kind: str, expect: str) -> list[Outcome]:
    results = _results(ctx, kind)
    if not results:
        return [Outcome("skip", evidence="peers not probed (doctor --peers)")]
    return [Outcome("pass" if r.ok else "fail", f"{r.probe.peer} {r.probe.plane} {r.probe.target}"
                    + (f":{r.probe.port}" if r.probe.port else ""), r.detail, expect, f"from {r.probe.source}")
            for r in results]


def peer_reachable(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "ping", "replies")


def path_mtu(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "pmtu", "a don't-fragment ping at the plane MTU passes")


def firewall_ports(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "tcp", "open or refused (not dropped)")


def gateway_reachable(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "gateway", "the management gateway replies")


def duplicate_address(ctx: Context) -> list[Outcome]:
    return _outcomes(ctx, "dad", "no other host answers ARP for this address")


class PeerCheck(FunctionCheck):
    """Peer findings name the peer as the node at fault where the probe points at its side."""

    def __call__(self, ctx: Context) -> list[Finding]:
        findings = super().__call__(ctx)
        return [f.model_copy(update={"node": f.subject.split(" ")[0]}) if self.id == "GN-FW-01" and f.verdict == "fail"
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
    PeerCheck("GN-FW-01", "firewall", "the ports the plan needs are not dropped",
              "on the peer: nft list ruleset; allow {subject} (gpunet render --target nftables)", firewall_ports),
]
