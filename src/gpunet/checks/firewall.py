"""GN-FW-01: the node's own rulesets (nftables and iptables, as the probe read them) let in every
flow the Plan says it must accept. A packet of each flow, from an address the flow names, at each
end of its port range, is walked through the rules (filtering.py); a table or chain that drops or
rejects it is named with its handle and the flow it blocks."""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv4Network

from gpunet.checks.base import Context, FunctionCheck, Outcome
from gpunet.checks.filtering import Packet, Verdict, evaluate
from gpunet.model.flows import Flow, sample_ports
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.plan import Node, Plan
from gpunet.model.ruleset import NFT_TABLE, Ruleset

ANY_SOURCE = "203.0.113.1"  # stands for "anywhere" in an evaluation (TEST-NET-3; never sent anywhere)


def needed_flows_admitted(ctx: Context) -> list[Outcome]:
    if ctx.plan is None or ctx.node is None:
        return [Outcome("skip", evidence="no plan: which flows this node needs is not known")]
    rulesets = [r for r in (ctx.state.firewall.nft, ctx.state.firewall.iptables) if r is not None]
    if not rulesets:
        return [Outcome("skip", evidence="neither nft nor iptables-save could be read here (not installed, "
                                         "or not root)")]
    inbound = ctx.plan.inbound_flows.get(ctx.node.name, [])
    outcomes = [_judge(ctx.plan, ctx.node, flow, rulesets, position)
                for position, flow in enumerate(ctx.plan.flows) if flow in inbound]
    return [o for o in outcomes if o is not None] or [Outcome("skip", evidence="the plan has no flow into this node")]


def _judge(plan: Plan, node: Node, flow: Flow, rulesets: list[Ruleset], position: int) -> Outcome | None:
    local = next((i for i in node.interfaces if i.plane == flow.plane and i.address and i.master is None), None)
    if local is None or local.address is None:
        return None
    source = _source_address(plan, flow, position)
    protocol = "tcp" if flow.protocol == "any" else flow.protocol
    subject = f"{flow.service} {protocol}/{flow.ports or 'any'} from {source} on {local.layer3}"
    verdicts = [evaluate(Packet(local.layer3, source, str(IPv4Interface(local.address).ip), protocol, port), rulesets)
                for port in sample_ports(flow)]
    worst = next((v for v in verdicts if v.outcome == "block"), None) or next(
        (v for v in verdicts if v.outcome == "uncertain"), verdicts[0])
    return _outcome(subject, flow, worst)


def _outcome(subject: str, flow: Flow, verdict: Verdict) -> Outcome:
    if verdict.outcome == "accept":
        return Outcome("pass", subject, "admitted", "admitted", verdict.where or "no rule drops it")
    fix = _fix(verdict)
    if verdict.outcome == "uncertain":
        return Outcome("warn", subject, f"cannot tell: {verdict.why}", "admitted", flow.why, fix)
    done = "rejected" if verdict.why == "reject" else "dropped"
    return Outcome("fail", subject, f"{done} by {verdict.sentence}", "admitted", flow.why, fix)


def _fix(verdict: Verdict) -> str:
    """Where gpunet's own table is the one in the way, it is out of date (the plan's flows are what
    it admits): apply it again. Another table's rule is the admin's to change, never gpunet's."""
    chain = verdict.chain
    if chain is not None and (chain.source, chain.family, chain.table) == ("nft", "inet", NFT_TABLE):
        return (f"gpunet's own table inet {NFT_TABLE} does not admit this flow: it is older than the plan; apply "
                "the plan's firewall again (gpunet apply run NODES --plan plan.json --target nftables)")
    before = f", before {verdict.rule_named}" if verdict.rule is not None else ""
    return (f"allow this flow in {verdict.place}{before}; gpunet's table inet {NFT_TABLE} already admits the "
            "plan's flows")


def _source_address(plan: Plan, flow: Flow, position: int) -> str:
    """An address the flow names: a sending node's on the plane, else the first host of its range."""
    for name in parse_nodeset(flow.from_nodes) if flow.from_nodes else ():
        sender = plan.node(name)
        found = [i.address for i in sender.interfaces if i.plane == flow.plane and i.address] if sender else []
        if found:
            return str(IPv4Interface(found[0]).ip)
    networks = [IPv4Network(s) for s in plan.flow_sources[position]]
    if not networks or networks[0].prefixlen == 0:
        return ANY_SOURCE
    return str(networks[0].network_address + (1 if networks[0].num_addresses > 1 else 0))


FIREWALL_CHECKS = [
    FunctionCheck("GN-FW-01", "firewall", "the node's rules admit every flow the plan says it must accept",
                  "allow {subject}", needed_flows_admitted),
]
