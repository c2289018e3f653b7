"""`nft -j list ruleset` into a Ruleset (model/ruleset.py). Pure.

Named sets and maps are read with their elements, which `nft -j list ruleset` prints in the same
dump (`{"set": {..., "elem": [...]}}`): `ip saddr @allow`, `tcp dport @ports` and a verdict map
(`tcp dport vmap @ports`, or one written in the rule) become the values they hold, so an allowlist
set followed by a drop is judged member by member. Elements may be values, prefixes, ranges
(intervals), concatenations (`ip saddr . tcp dport`) or `{"elem": {"val": ...}}` with a timeout or
a comment. A set whose elements the dump does not hold (listed with -t, or a name it lacks) is an
`unknown` match: the evaluator says "cannot tell", never "does not match". A verdict map becomes
one rule per element, all with the rule's handle (a map's keys are distinct: one applies at most).

Every rule keeps a one-line text in nft's own syntax (`iifname "eno1" ip saddr 198.18.0.0/28
tcp dport 22 accept`), so a finding names a rule as nft would, never as raw JSON."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpunet.errors import ParseError
from gpunet.model.ruleset import Chain, Match, MatchKind, Rule, Ruleset, VerdictKind
from gpunet.probe.nft_text import text_of
from gpunet.probe.parsers import parse_nft_json

VERDICTS = ("accept", "drop", "reject", "jump", "goto", "return")
IGNORED = ("counter", "log", "comment", "notrack", "mangle", "meter", "limit", "quota")  # no say in a verdict
XT_TARGETS: dict[str, VerdictKind] = {"ACCEPT": "accept", "DROP": "drop", "REJECT": "reject", "RETURN": "return"}
KINDS: dict[str, VerdictKind] = {"accept": "accept", "drop": "drop", "reject": "reject", "jump": "jump",
                                 "goto": "goto", "return": "return"}
TABLE = tuple[str, str]  # family, table
META: dict[str, MatchKind] = {"iifname": "iifname", "iif": "iifname", "l4proto": "protocol", "nfproto": "nfproto"}
IP_FIELDS: dict[str, MatchKind] = {"saddr": "saddr", "daddr": "daddr", "protocol": "protocol"}
Elements = dict[tuple[str, str, str], tuple[Any, ...] | None]  # (family, table, name) -> elements, None: not held


class Unreadable(Exception):
    """An expression the evaluator cannot judge (said as a sentence)."""


@dataclass(frozen=True)
class Dump:
    """What rules refer to by name in the same dump: sets and maps with their elements."""

    sets: Elements
    maps: Elements

    @classmethod
    def of(cls, items: list[dict[str, Any]]) -> Dump:
        sets: Elements = {}
        maps: Elements = {}
        for item in items:
            for kind, into in (("set", sets), ("map", maps)):
                body = item.get(kind)
                if isinstance(body, dict):
                    elements = body.get("elem")
                    into[str(body.get("family")), str(body.get("table")), str(body.get("name"))] = \
                        tuple(elements) if isinstance(elements, list) else None
        return cls(sets, maps)

    def elements(self, family: str, table: str, name: str, *, verdicts: bool = False) -> tuple[Any, ...]:
        held = (self.maps if verdicts else self.sets).get((family, table, name))
        if held is None:
            raise Unreadable(f"@{name}: its elements are not in the ruleset as read")
        return held


def parse_nft_ruleset(text: str) -> Ruleset:
    """`nft -j list ruleset`: every chain, base chains with their hook, priority and policy."""
    items = parse_nft_json(text)
    dump = Dump.of(items)
    rules: dict[tuple[str, str, str], list[Rule]] = {}
    for item in items:
        if "rule" in item:
            body = item["rule"]
            if not isinstance(body, dict):
                raise ParseError("nft -j", 1, "a rule that is not an object")
            key = (str(body.get("family")), str(body.get("table")), str(body.get("chain")))
            chain = rules.setdefault(key, [])
            chain += _rules(body, len({r.position for r in chain}) + 1, key[:2], dump)
    return Ruleset(chains=tuple(_chain(item["chain"], rules) for item in items if "chain" in item))


def _chain(body: Any, rules: dict[tuple[str, str, str], list[Rule]]) -> Chain:
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


def _rules(body: dict[str, Any], position: int, where: TABLE, dump: Dump) -> list[Rule]:
    """One JSON rule as Rules: one, or one per element of its verdict map."""
    expressions = body.get("expr")
    if not isinstance(expressions, list):
        raise ParseError("nft -j", 1, f"rule {position} has no expression list")
    handle = body.get("handle") if isinstance(body.get("handle"), int) else None
    matches: list[Match] = []
    verdict: tuple[VerdictKind | None, str] = (None, "")
    words: list[str] = []
    for expression in expressions:
        words.append(text_of(expression))
        if not isinstance(expression, dict) or len(expression) != 1:
            matches.append(Match(kind="unknown", text=words[-1]))
            continue
        (key, value), = expression.items()
        if key == "vmap":
            return _vmap(value, matches, _Place(position, handle, where, dump, " ".join(words)))
        if key in VERDICTS or (key == "xt" and isinstance(value, dict) and value.get("type") == "target"):
            verdict = _verdict(key, value)
        elif key == "match":
            matches += _matches(value, where, dump, words[-1])
        elif key not in IGNORED:
            matches.append(Match(kind="unknown", text=words[-1]))
    return [Rule(position=position, handle=handle, matches=tuple(matches), verdict=verdict[0], target=verdict[1],
                 text=" ".join(w for w in words if w))]


def _verdict(key: str, value: Any) -> tuple[VerdictKind | None, str]:
    if key == "xt":
        return XT_TARGETS.get(str(value.get("name"))), ""
    target = value.get("target", "") if isinstance(value, dict) and key in ("jump", "goto") else ""
    return KINDS.get(key), str(target)


@dataclass(frozen=True)
class _Place:
    """Where a rule is, what it says, and the dump its names refer to."""

    position: int
    handle: int | None
    where: TABLE
    dump: Dump
    text: str


def _vmap(body: Any, before: list[Match], place: _Place) -> list[Rule]:
    """`KEY vmap { k1 : accept, k2 : jump x }` as one rule per element, in the map's order."""
    position, handle, where, dump, text = place.position, place.handle, place.where, place.dump, place.text
    try:
        if not isinstance(body, dict):
            raise Unreadable("a verdict map that is not an object")
        kind, parts = _kind(body.get("key"))
        data = body.get("data")
        pairs = dump.elements(*where, data[1:], verdicts=True) if isinstance(data, str) and data.startswith("@") \
            else data.get("set") if isinstance(data, dict) else None
        if not isinstance(pairs, list | tuple):
            raise Unreadable("a verdict map without elements")
        rules = []
        for pair in pairs:
            key, verdict = pair if isinstance(pair, list) and len(pair) == 2 else (None, None)
            if not isinstance(verdict, dict) or len(verdict) != 1:
                raise Unreadable(f"a verdict map element gpunet cannot read: {str(pair)[:60]}")
            (name, value), = verdict.items()
            match = Match(kind=kind, parts=parts, values=tuple(element(key)))
            outcome, target = _verdict(name, value)
            rules.append(Rule(position=position, handle=handle, matches=(*before, *_with_protocol(match, body["key"])),
                              verdict=outcome, target=target, text=text))
        return rules
    except (Unreadable, TypeError, ValueError, KeyError) as exc:
        # unread, the map may accept or drop: one unknown rule of each, so either verdict is doubted
        unknown = Match(kind="unknown", text=f"{text} ({exc if isinstance(exc, Unreadable) else 'unreadable'})")
        return [Rule(position=position, handle=handle, matches=(*before, unknown), verdict=outcome, text=text)
                for outcome in ("accept", "drop")]


def _matches(body: Any, where: TABLE, dump: Dump, text: str) -> list[Match]:
    """`{"op", "left", "right"}` as Matches (`tcp dport 22` is also `protocol tcp`); what is not an
    interface, address, protocol, port, family or conntrack state comparison is `unknown`."""
    try:
        if not isinstance(body, dict) or body.get("op") not in ("==", "!=", "in"):
            raise Unreadable(text)
        kind, parts = _kind(body.get("left"))
        match = Match(kind=kind, parts=parts, values=tuple(_values(body.get("right"), where, dump)),
                      negated=body.get("op") == "!=", text=text)
        return _with_protocol(match, body.get("left"))
    except Unreadable as exc:
        return [Match(kind="unknown", text=text if str(exc) == text else f"{text} ({exc})")]
    except (TypeError, ValueError, KeyError):
        return [Match(kind="unknown", text=text)]


def _with_protocol(match: Match, left: Any) -> list[Match]:
    """A transport port implies its protocol: `tcp dport 22` never matches a udp packet."""
    fields = left.get("concat", [left]) if isinstance(left, dict) else [left]
    payloads = [f["payload"] for f in fields if isinstance(f, dict) and isinstance(f.get("payload"), dict)]
    transports = {p.get("protocol") for p in payloads if p.get("field") == "dport"} & {"tcp", "udp"}
    return [*(Match(kind="protocol", values=(t,)) for t in transports), match]


def _kind(left: Any) -> tuple[MatchKind, tuple[str, ...]]:
    """What a match compares (and, for a concatenation, each part's kind)."""
    if isinstance(left, dict) and isinstance(left.get("concat"), list):
        parts = tuple(_kind(part)[0] for part in left["concat"])
        if "concat" in parts or "nfproto" in parts:
            raise Unreadable("a concatenation gpunet cannot read")
        return "concat", parts
    if not isinstance(left, dict):
        raise Unreadable("not a field")
    meta, payload, ct = left.get("meta"), left.get("payload"), left.get("ct")
    if isinstance(meta, dict) and meta.get("key") in META:
        return META[meta["key"]], ()
    if isinstance(payload, dict):
        return _payload_kind(str(payload.get("protocol")), str(payload.get("field"))), ()
    if isinstance(ct, dict) and ct.get("key") == "state":
        return "ct_state", ()
    raise Unreadable("not a field gpunet evaluates")


def _payload_kind(protocol: str, field: str) -> MatchKind:
    if protocol == "ip" and field in IP_FIELDS:
        return IP_FIELDS[field]
    if field == "dport" and protocol in ("tcp", "udp", "th"):
        return "dport"
    if protocol == "ip6":
        return "nfproto"  # any IPv6 header field: only an IPv6 packet can match
    raise Unreadable("not a field gpunet evaluates")


def _values(right: Any, where: TABLE, dump: Dump) -> Iterator[str]:
    """A value, an anonymous set, a named set (`@name`, from the dump), a prefix, a range or a
    concatenation, as strings ('22', '60001-63000', '10.0.0.0/8', '10.0.0.1 . 22')."""
    if isinstance(right, str) and right.startswith("@"):
        for item in dump.elements(*where, right[1:]):
            yield from element(item)
    elif isinstance(right, dict) and "set" in right:
        for item in right["set"]:
            yield from element(item)
    elif isinstance(right, list):
        for item in right:
            yield from element(item)
    else:
        yield from element(right)


def element(value: Any) -> Iterator[str]:
    """One element (or an `{"elem": {"val": ...}}` wrapping one) as the evaluator's strings."""
    if isinstance(value, dict) and "elem" in value:
        yield from element(value["elem"].get("val") if isinstance(value["elem"], dict) else value["elem"])
    elif isinstance(value, dict) and "prefix" in value:
        yield f"{value['prefix']['addr']}/{int(value['prefix']['len'])}"
    elif isinstance(value, dict) and "range" in value:
        low, high = (next(element(v)) for v in value["range"])
        yield f"{low}-{high}"
    elif isinstance(value, dict) and "concat" in value:
        yield " . ".join(next(element(v)) for v in value["concat"])
    elif isinstance(value, list):  # `ct state { established, related }` as a plain list
        for item in value:
            yield from element(item)
    elif isinstance(value, str | int) and not isinstance(value, bool):
        yield str(value)
    else:
        raise ValueError(value)
