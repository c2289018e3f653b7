"""Which rule a packet meets: a packet of a needed flow walked through the node's rulesets as
netfilter walks it. Every base chain on the packet's path must let it pass (an accept in one
table does not stop another table's drop); within a hook, chains run by priority; jump, goto and
return as in nftables and iptables. A rule the evaluator cannot read (an xt match, a meta mark)
is never guessed: a drop behind one is reported as uncertain, not as a block."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from typing import Literal

from gpunet.model.ruleset import Chain, Match, Rule, Ruleset

HOOKS = ("ingress", "prerouting", "input")  # where an arriving packet meets filters, in order
FAMILIES = ("ip", "inet", "netdev")
MAX_JUMPS = 64
PORT = re.compile(r"[0-9]{1,5}")


@dataclass(frozen=True)
class Packet:
    """The first packet of a new connection to this node."""

    iifname: str
    saddr: str
    daddr: str
    protocol: str  # tcp | udp
    dport: int


@dataclass(frozen=True)
class Verdict:
    outcome: Literal["accept", "block", "uncertain"]
    chain: Chain | None = None
    rule: Rule | None = None  # None: the chain's policy
    why: str = ""

    @property
    def where(self) -> str:
        if self.chain is None:
            return ""
        place = f"{self.chain.source} {self.chain.family} {self.chain.table} {self.chain.name}"
        if self.rule is None:
            return f"{place} policy {self.chain.policy}"
        handle = f"handle {self.rule.handle}" if self.rule.handle is not None else f"rule {self.rule.position}"
        return f"{place} {handle}: {self.rule.text}"

    @property
    def sentence(self) -> str:
        """Which rule of which table, in words: `rule handle 3 (iifname ib0 drop) of chain input in
        nft table inet broken`; `the drop policy of chain input in nft table inet gpunet`."""
        if self.chain is None:
            return "no rule"
        if self.rule is None:
            return f"the {self.chain.policy} policy of {self.place}"
        return f"{self.rule_named} of {self.place}"

    @property
    def place(self) -> str:
        """`chain input in nft table inet broken`."""
        if self.chain is None:
            return ""
        return f"chain {self.chain.name} in {self.chain.source} table {self.chain.family} {self.chain.table}"

    @property
    def rule_named(self) -> str:
        """`rule handle 3 (iifname ib0 drop)`."""
        if self.rule is None:
            return ""
        which = f"handle {self.rule.handle}" if self.rule.handle is not None else str(self.rule.position)
        return f"rule {which} ({self.rule.text})"


def evaluate(packet: Packet, rulesets: list[Ruleset]) -> Verdict:
    """The first rule or policy that surely drops or rejects it; else uncertain, where a rule that
    could not be read might decide otherwise; else accept."""
    chains = [c for rs in rulesets for c in rs.chains]
    by_name: dict[tuple[str, str, str, str], Chain] = {(c.source, c.family, c.table, c.name): c for c in chains}
    base = sorted((c for c in chains if c.hook in HOOKS and c.family in FAMILIES
                   and (not c.devices or packet.iifname in c.devices)),
                  key=lambda c: (HOOKS.index(c.hook or ""), c.priority))
    doubt: Verdict | None = None
    for chain in base:
        result = _Traversal(packet, by_name).walk(chain)
        if result.outcome == "block":
            return result  # blocked here, whatever an earlier chain might have done
        doubt = doubt or (result if result.outcome == "uncertain" else None)
    return doubt or Verdict("accept")


_CONTINUE = Verdict("accept", why="continue")  # a jump whose chain ran to its end: go on with the next rule
RETURNED = Verdict("accept", why="returned")  # a regular chain ran to its end or returned


@dataclass
class _Traversal:
    """One packet through one base chain and the chains it jumps to; `unread` collects, across
    jumps, the rules on the way that might have decided had they been readable."""

    packet: Packet
    by_name: dict[tuple[str, str, str, str], Chain]
    unread: list[Rule] = field(default_factory=list)

    def walk(self, chain: Chain, depth: int = 0) -> Verdict:
        """The verdict a chain gives; a regular chain (depth > 0) may also run off its end (RETURNED)."""
        for rule in chain.rules:
            fit = _matches(self.packet, rule.matches)
            if fit is None and rule.verdict is not None:
                self.unread.append(rule)
            if not fit or rule.verdict is None:
                continue
            outcome = self.apply(chain, rule, depth)
            if outcome is _CONTINUE:
                continue
            if outcome is RETURNED:
                break
            return self.doubted(outcome)
        if depth > 0:
            return RETURNED
        policy = Verdict("block", chain, None, "the chain's policy") if chain.policy == "drop" else Verdict("accept")
        return self.doubted(policy)

    def apply(self, chain: Chain, rule: Rule, depth: int) -> Verdict:
        if rule.verdict == "accept":
            return Verdict("accept", chain, rule)
        if rule.verdict in ("drop", "reject"):
            return Verdict("block", chain, rule, rule.verdict)
        if rule.verdict == "return":
            return RETURNED
        target = self.by_name.get((chain.source, chain.family, chain.table, rule.target))
        if target is None or depth >= MAX_JUMPS:
            return Verdict("uncertain", chain, rule, f"jumps to {rule.target!r}, which cannot be followed")
        inner = self.walk(target, depth + 1)
        if inner is RETURNED:
            return RETURNED if rule.verdict == "goto" else _CONTINUE
        return inner

    def doubted(self, decided: Verdict) -> Verdict:
        """A verdict, unless an unreadable rule before it could have given the other one."""
        other = [r for r in self.unread if (r.verdict == "accept") == (decided.outcome != "accept")]
        if not other:
            return decided
        said = decided.where or "the chains' policies"
        unread = next((m.text for m in other[0].matches if m.kind == "unknown"), "")
        return Verdict("uncertain", decided.chain, other[0], f"{said} decides, unless {other[0].text!r} does first "
                                                             f"(gpunet cannot evaluate {unread or 'it'})")


def _matches(packet: Packet, matches: tuple[Match, ...]) -> bool | None:
    """All conditions hold (True), one does not (False), or one cannot be read (None)."""
    unread = False
    for match in matches:
        fit = _one(packet, match)
        if fit is False:
            return False
        unread = unread or fit is None
    return None if unread else True


def _one(packet: Packet, match: Match) -> bool | None:
    if match.kind == "unknown":
        return None
    if match.kind == "concat":
        hit = any(_concatenated(packet, match.parts, value) for value in match.values)
    else:
        hit = any(_value(packet, match.kind, value) for value in match.values)
    return hit != match.negated


def _concatenated(packet: Packet, parts: tuple[str, ...], value: str) -> bool:
    """`ip saddr . tcp dport` against '10.0.0.0/8 . 22': every part holds."""
    pieces = value.split(" . ")
    return len(pieces) == len(parts) and all(_value(packet, kind, piece) for kind, piece in zip(parts, pieces,
                                                                                                  strict=True))


def _value(packet: Packet, kind: str, value: str) -> bool:
    if kind == "iifname":
        return packet.iifname == value or (value.endswith(("*", "+")) and packet.iifname.startswith(value[:-1]))
    if kind in ("saddr", "daddr"):
        return _address_in(IPv4Address(packet.saddr if kind == "saddr" else packet.daddr), value)
    if kind == "protocol":
        return value in (packet.protocol, "all", "0")
    if kind == "dport":
        low, _, high = value.partition("-")
        return PORT.fullmatch(low) is not None and PORT.fullmatch(high or low) is not None \
            and int(low) <= packet.dport <= int(high or low)
    if kind == "ct_state":
        return value == "new"  # the first packet of a connection
    if kind == "nfproto":
        return value == "ipv4"  # the flows judged are IPv4
    return False


def _address_in(address: IPv4Address, value: str) -> bool:
    """A prefix ('10.0.0.0/8', '10.0.0.1') or a range ('10.0.0.1-10.0.0.9', an nft interval)."""
    try:
        if "-" in value:
            low, _, high = value.partition("-")
            return IPv4Address(low) <= address <= IPv4Address(high)
        return address in IPv4Network(value, strict=False)
    except ValueError:  # an IPv6 element of an inet set: not this IPv4 packet's
        return False
