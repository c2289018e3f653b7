"""Parsers of packet-filter rules into a Ruleset (model/ruleset.py): `nft -j list ruleset` and
`iptables-save`. Pure; what they cannot read becomes an `unknown` match, never a guess."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from typing import Any

from gpunet.errors import ParseError
from gpunet.model.ruleset import Chain, Match, Rule, Ruleset
from gpunet.probe.parsers import parse_nft_json

COUNTED = re.compile(r"^\[\d+:\d+\]\s+(?=-A )")
NFT_VERDICTS = ("accept", "drop", "reject", "jump", "goto", "return")
NFT_IGNORED = ("counter", "log", "comment", "notrack", "mangle", "meter")  # statements with no say in a verdict
XT_TARGETS = {"ACCEPT": "accept", "DROP": "drop", "REJECT": "reject", "RETURN": "return"}
# iptables' built-in chains as nftables hooks and priorities (iptables-nft registers them so).
IPTABLES_HOOKS = {("filter", "INPUT"): ("input", 0), ("mangle", "INPUT"): ("input", -150),
                  ("mangle", "PREROUTING"): ("prerouting", -150), ("raw", "PREROUTING"): ("prerouting", -300),
                  ("filter", "FORWARD"): ("forward", 0), ("filter", "OUTPUT"): ("output", 0)}


def parse_nft_ruleset(text: str) -> Ruleset:
    """`nft -j list ruleset`: every chain, base chains with their hook, priority and policy."""
    items = parse_nft_json(text)
    rules: dict[tuple[str, str, str], list[Rule]] = {}
    for item in items:
        if "rule" in item:
            body = item["rule"]
            key = (str(body.get("family")), str(body.get("table")), str(body.get("chain")))
            rules.setdefault(key, []).append(_nft_rule(body, len(rules.get(key, [])) + 1))
    return Ruleset(chains=tuple(_nft_chain(item["chain"], rules) for item in items if "chain" in item))


def _nft_chain(body: Any, rules: dict[tuple[str, str, str], list[Rule]]) -> Chain:
    if not isinstance(body, dict):
        raise ParseError("nft -j", 1, "a chain that is not an object")
    family, table, name = str(body.get("family")), str(body.get("table")), str(body.get("name"))
    policy = body.get("policy")
    priority = body.get("prio", 0)
    devices = body.get("dev", ())
    return Chain(source="nft", family=family, table=table, name=name, hook=body.get("hook"),
                 devices=(devices,) if isinstance(devices, str) else tuple(str(d) for d in devices if d),
                 priority=priority if isinstance(priority, int) else 0,
                 policy=policy if policy in ("accept", "drop") else None,
                 rules=tuple(rules.get((family, table, name), ())))


def _nft_rule(body: Any, position: int) -> Rule:
    expressions = body.get("expr") if isinstance(body, dict) else None
    if not isinstance(expressions, list):
        raise ParseError("nft -j", 1, f"rule {position} has no expression list")
    matches, verdict, target = [], None, ""
    for expression in expressions:
        if not isinstance(expression, dict) or len(expression) != 1:
            matches.append(Match(kind="unknown", text=json.dumps(expression)[:200]))
            continue
        (key, value), = expression.items()
        if key in NFT_VERDICTS or (key == "xt" and isinstance(value, dict) and value.get("type") == "target"):
            verdict, target = _nft_verdict(key, value)
        elif key == "match":
            matches += _nft_match(value)
        elif key not in NFT_IGNORED:
            matches.append(Match(kind="unknown", text=json.dumps(expression)[:200]))
    handle = body.get("handle")
    rule = Rule(position=position, handle=handle if isinstance(handle, int) else None, matches=tuple(matches),
                verdict=verdict, target=target)
    return rule.model_copy(update={"text": describe(rule)})


def _nft_verdict(key: str, value: Any) -> tuple[str | None, str]:
    if key == "xt":
        return XT_TARGETS.get(str(value.get("name"))), ""
    target = value.get("target", "") if isinstance(value, dict) and key in ("jump", "goto") else ""
    return key, str(target)


def _nft_match(body: Any) -> list[Match]:
    """`{"op", "left", "right"}` as Matches (`tcp dport 22` is also `protocol tcp`); what is not an
    interface, address, protocol, port or conntrack state comparison is `unknown`."""
    unknown = [Match(kind="unknown", text=json.dumps(body)[:200])]
    if not isinstance(body, dict):
        return unknown
    op, left, right = body.get("op"), body.get("left"), body.get("right")
    kind = _nft_kind(left)
    if kind is None or op not in ("==", "!=", "in"):
        return unknown
    try:
        values = tuple(_nft_values(right))
    except (TypeError, ValueError, KeyError):
        return unknown
    match = Match(kind=kind, values=values, negated=op == "!=")
    transport = left["payload"].get("protocol") if kind == "dport" and isinstance(left, dict) else None
    return [Match(kind="protocol", values=(transport,)), match] if transport in ("tcp", "udp") else [match]


def _nft_kind(left: Any) -> str | None:
    if not isinstance(left, dict):
        return None
    meta, payload, ct = left.get("meta"), left.get("payload"), left.get("ct")
    if isinstance(meta, dict):
        return {"iifname": "iifname", "iif": "iifname", "l4proto": "protocol"}.get(str(meta.get("key")))
    if isinstance(payload, dict):
        field, protocol = payload.get("field"), payload.get("protocol")
        if field in ("saddr", "daddr") and protocol == "ip":
            return str(field)
        if field == "protocol" and protocol == "ip":
            return "protocol"
        if field == "dport" and protocol in ("tcp", "udp", "th"):
            return "dport"
    if isinstance(ct, dict) and ct.get("key") == "state":
        return "ct_state"
    return None


def _nft_values(right: Any) -> Iterator[str]:
    """A value, a set of values, a prefix or a range, as strings ('22', '60001-63000', '10.0.0.0/8')."""
    if isinstance(right, dict) and "set" in right:
        for item in right["set"]:
            yield from _nft_values(item)
    elif isinstance(right, dict) and "prefix" in right:
        yield f"{right['prefix']['addr']}/{int(right['prefix']['len'])}"
    elif isinstance(right, dict) and "range" in right:
        low, high = right["range"]
        yield f"{int(low)}-{int(high)}"
    elif isinstance(right, list):
        for item in right:
            yield from _nft_values(item)
    elif isinstance(right, str | int) and not isinstance(right, bool):
        yield str(right)
    else:
        raise ValueError(right)


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


def describe(rule: Rule) -> str:
    """An nftables-like line for a rule read from JSON (which has no text of its own)."""
    words = []
    for match in rule.matches:
        shown = match.text if match.kind == "unknown" else ", ".join(match.values)
        words.append(f"{match.kind} {'!= ' if match.negated else ''}{shown}".strip())
    verdict = f"{rule.verdict} {rule.target}".strip() if rule.verdict else ""
    return " ".join([*words, verdict]).strip()
