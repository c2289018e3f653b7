"""Parsers of packet-filter rules into a Ruleset (model/ruleset.py): `iptables-save` here, `nft -j
list ruleset` in nft.py (re-exported). Pure; what they cannot read becomes an `unknown` match,
never a guess."""

from __future__ import annotations

import re
import shlex

from gpunet.errors import ParseError
from gpunet.model.ruleset import Chain, Match, Rule, Ruleset
from gpunet.probe.nft import XT_TARGETS, parse_nft_ruleset

__all__ = ["parse_iptables_save", "parse_nft_ruleset"]

COUNTED = re.compile(r"^\[\d+:\d+\]\s+(?=-A )")
# iptables' built-in chains as nftables hooks and priorities (iptables-nft registers them so).
IPTABLES_HOOKS = {("filter", "INPUT"): ("input", 0), ("mangle", "INPUT"): ("input", -150),
                  ("mangle", "PREROUTING"): ("prerouting", -150), ("raw", "PREROUTING"): ("prerouting", -300),
                  ("filter", "FORWARD"): ("forward", 0), ("filter", "OUTPUT"): ("output", 0)}


def parse_iptables_save(text: str) -> Ruleset:
    """`iptables-save`: every table's chains (built-in ones with their hook and policy) and rules."""
    table, chains = "", {}
    rules: dict[tuple[str, str], list[Rule]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line == "COMMIT":
            continue
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith(":"):
            name, policy = _chain_line(line, number)
            chains[table, name] = policy
        elif COUNTED.match(line) or (line.startswith("-A ") and table):
            words = _words(COUNTED.sub("", line), number)  # `iptables-save -c`: [packets:bytes] first
            in_chain = rules.setdefault((table, words[1] if len(words) > 1 else ""), [])
            in_chain.append(_iptables_rule(words[2:], len(in_chain) + 1, line))
        else:
            raise ParseError("iptables-save", number, f"unexpected line {line[:60]!r}")
    if not table and text.strip():  # iptables-save prints nothing at all when no table is loaded
        raise ParseError("iptables-save", 1, "no '*table' line: not iptables-save output")
    return Ruleset(chains=tuple(_iptables_chain(table, name, policy, rules.get((table, name), []))
                                for (table, name), policy in chains.items()))


def _chain_line(line: str, number: int) -> tuple[str, str]:
    parts = line[1:].split()
    if len(parts) < 2:
        raise ParseError("iptables-save", number, f"a chain line without a policy: {line[:60]!r}")
    return parts[0], parts[1]


def _words(line: str, number: int) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise ParseError("iptables-save", number, f"unbalanced quotes: {exc}") from None


def _iptables_chain(table: str, name: str, policy: str, rules: list[Rule]) -> Chain:
    hook, priority = IPTABLES_HOOKS.get((table, name), (None, 0))
    return Chain(source="iptables", family="ip", table=table, name=name, hook=hook, priority=priority,
                 policy=policy.lower() if policy in ("ACCEPT", "DROP") else None,
                 rules=tuple(rules))


IPTABLES_OPTIONS = {
    "-i": "iifname", "--in-interface": "iifname", "-s": "saddr", "--source": "saddr", "--src": "saddr",
    "-d": "daddr", "--destination": "daddr", "--dst": "daddr", "-p": "protocol", "--protocol": "protocol",
    "--dport": "dport", "--destination-port": "dport", "--dports": "dport", "--destination-ports": "dport",
    "--ctstate": "ct_state", "--state": "ct_state",
}
IPTABLES_IGNORED = {"--comment", "--reject-with", "--log-prefix", "--log-level", "-m", "--match", "-c"}


def _iptables_rule(words: list[str], position: int, line: str) -> Rule:
    """The options of one `-A CHAIN ...` line."""
    matches, verdict, target, negate, i = [], None, "", False, 0
    while i < len(words):
        word, value = words[i], words[i + 1] if i + 1 < len(words) else ""
        if word == "!":
            negate, i = True, i + 1
            continue
        if word in ("-j", "--jump", "-g", "--goto"):
            verdict, target = _iptables_target(word, value)
        elif word in IPTABLES_OPTIONS:
            matches.append(_iptables_match(IPTABLES_OPTIONS[word], value, negate))
        elif word not in IPTABLES_IGNORED and word.startswith("-"):
            matches.append(Match(kind="unknown", text=f"{word} {value}".strip()))
        negate, i = False, i + (2 if word.startswith("-") else 1)
    return Rule(position=position, matches=tuple(matches), verdict=verdict, target=target,
                text=line[:300])


def _iptables_target(option: str, value: str) -> tuple[str | None, str]:
    if value in XT_TARGETS:
        return XT_TARGETS[value], ""
    if value in ("LOG", "NFLOG", "CT", "MARK", "CONNMARK", "TRACE", "NOTRACK"):
        return None, ""  # no say in the verdict
    return ("goto" if option in ("-g", "--goto") else "jump"), value


def _iptables_match(kind: str, value: str, negated: bool) -> Match:
    values = tuple(v.replace(":", "-") for v in value.split(",")) if kind == "dport" else tuple(value.split(","))
    if kind == "ct_state":
        values = tuple(v.lower() for v in values)
    if kind in ("saddr", "daddr"):
        values = tuple(v if "/" in v else f"{v}/32" for v in values)
    return Match(kind=kind, values=values, negated=negated)
