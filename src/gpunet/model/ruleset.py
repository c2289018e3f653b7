"""A packet filter's rules as data, from nftables (`nft -j list ruleset`) and iptables
(`iptables-save`), so one evaluator can say which rule a needed flow meets first."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gpunet.model.base import Frozen

NFT_TABLE = "gpunet"  # table inet gpunet: the only table gpunet writes, replaces or removes
MatchKind = Literal["iifname", "saddr", "daddr", "protocol", "dport", "ct_state", "nfproto", "concat", "unknown"]
VerdictKind = Literal["accept", "drop", "reject", "jump", "goto", "return"]


class Match(Frozen):
    """One condition of a rule. `values` are alternatives (a set, a named set's elements); `negated`
    for `!=` and `! -s`. Addresses are CIDRs or ranges ("10.0.0.1-10.0.0.9"), ports "22" or
    "60001-63000", states lower-case, `nfproto` "ipv4"/"ipv6"; a `concat` compares `parts` (one
    kind each) with values joined by " . " ("10.0.0.0/8 . 22"); `unknown` keeps what the evaluator
    cannot read (an xt match, a meta mark, a set whose elements were not read) so it can say it
    cannot judge that rule."""

    kind: MatchKind
    values: tuple[str, ...] = ()
    negated: bool = False
    parts: tuple[str, ...] = ()  # a concatenation's kinds, in order
    text: str = ""  # the condition as its tool prints it


class Rule(Frozen):
    position: int  # 1-based, in its chain
    handle: int | None = None  # nftables' handle; None in iptables
    matches: tuple[Match, ...] = ()
    verdict: VerdictKind | None = None  # None: a rule with no verdict (counter, log) falls through
    target: str = ""  # the chain of jump/goto
    text: str = ""  # the rule as its tool prints it, for a finding


class Chain(Frozen):
    source: Literal["nft", "iptables"]
    family: str  # ip, ip6, inet, ... (iptables: ip)
    table: str
    name: str
    hook: str | None = None  # input, forward, ...; None for a regular chain
    devices: tuple[str, ...] = ()  # a netdev ingress chain's devices: it sees only their packets
    priority: int = 0
    policy: Literal["accept", "drop"] | None = None
    rules: tuple[Rule, ...] = ()


class Ruleset(Frozen):
    chains: tuple[Chain, ...] = Field(default=())
