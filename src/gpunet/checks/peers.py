"""Checks over the active peer probes (doctor --peers)."""

from __future__ import annotations

from gpunet.checks.base import Context, Finding, FunctionCheck, Outcome
from gpunet.model.hops import PlanAddresses, shown
from gpunet.probe.peers import PeerResult, Refusal


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
    outcomes = _outcomes(ctx, "a don't-fragment ping at the plane MTU passes", "pmtu")
    results = _results(ctx, "pmtu")
    if ctx.plan is None or len(results) != len(outcomes):
        return outcomes
    addresses = PlanAddresses(ctx.plan)
    return [_located(o, r, addresses) for o, r in zip(outcomes, results, strict=True)]


def _located(outcome: Outcome, result: PeerResult, addresses: PlanAddresses) -> Outcome:
    """A refusal named as the Plan's cable, so a person knows which one to look at."""
    places = list(dict.fromkeys(located_refusal(addresses, r, result.probe.target) for r in result.refusals))
    if outcome.verdict != "fail" or not places:
        return outcome
    cables = "; ".join(places)
    return outcome._replace(observed=f"{outcome.observed}; {cables}",
                            fix=f"set the MTU on both ends of the cable to the plane's ({cables})")


def located_refusal(addresses: PlanAddresses, refusal: Refusal, target: str) -> str:
    """"cable A:p <-> B:q (next-hop MTU N)", or the switch and the cable(s) inferred from the next
    hop, or the switch alone where the path does not say."""
    mtu = f"next-hop MTU {refusal.mtu}"
    hop = addresses.hop(refusal.hop)
    if not hop.device:
        return f"{refusal.hop} is no address of the plan ({mtu})"
    cables, exact = addresses.next_cable(hop.device, refusal.path or (refusal.hop,), target)
    if exact:
        return f"cable {shown(cables[0])} ({mtu}: {hop.device} cannot send the plane MTU into it)"
    if cables:
        return (f"at {hop.device} ({mtu}): inferred from the next hop, cable "
                f"{' or '.join(shown(c) for c in cables)}")
    return f"at {hop.device} ({mtu}): one of its cables toward {target} (the path past it was not learned)"


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
