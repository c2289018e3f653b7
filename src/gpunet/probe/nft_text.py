"""nft's JSON expressions as nft prints them (`ip saddr @allow`, `ct state { established, related }`,
`numgen random mod 100 < 5`), near enough for a finding to name a rule as the admin reads it in
`nft list ruleset`, never as raw JSON."""

from __future__ import annotations

import json
import re
from typing import Any

VERDICTS = ("accept", "drop", "reject", "jump", "goto", "return")
SILENT = ("counter", "comment")  # statements a reader does not need to find the rule
FIELDS = ("meta", "ct", "rt", "socket", "fib")
PLAIN = re.compile(r"@?[A-Za-z0-9_.:/-]+")


def text_of(expression: Any) -> str:
    """One expression of a rule; a statement unknown here by its name."""
    if not isinstance(expression, dict) or len(expression) != 1:
        return _short(expression)
    (key, value), = expression.items()
    name = str(key)
    if name in SILENT:
        return ""
    if not isinstance(value, dict):
        return name
    if name == "match":
        op = "" if value.get("op") in ("==", "in") else f"{value.get('op')} "
        return f"{operand(value.get('left'))} {op}{operand(value.get('right'))}"
    return _statement(name, value)


def _statement(name: str, value: dict[str, Any]) -> str:
    if name in VERDICTS:
        return f"{name} {value.get('target', '')}".strip()
    if name == "vmap":
        return f"{operand(value.get('key'))} vmap {operand(value.get('data'))}"
    if name == "xt":
        return " ".join(str(w) for w in ("xt", value.get("type"), value.get("name")) if w)
    if name == "limit":
        return f"limit rate {value.get('rate')}/{value.get('per')}"
    return name


def operand(value: Any) -> str:
    """A field, a value, a set (anonymous or @named), a prefix, a range or a concatenation."""
    if isinstance(value, list):
        return _list(value)
    if not isinstance(value, dict):
        return _scalar(value)
    if isinstance(value.get("payload"), dict):
        return f"{value['payload'].get('protocol', 'th')} {value['payload'].get('field', '')}".strip()
    field = next((key for key in FIELDS if isinstance(value.get(key), dict)), None)
    if field is not None:
        key = str(value[field].get("key", ""))
        return key if field == "meta" and key in ("iifname", "iif", "l4proto") else f"{field} {key}"
    return _composite(value)


def _composite(value: dict[str, Any]) -> str:
    if isinstance(value.get("numgen"), dict):
        return f"numgen {value['numgen'].get('mode', '')} mod {value['numgen'].get('mod', '')}"
    if isinstance(value.get("concat"), list):
        return " . ".join(operand(v) for v in value["concat"])
    if isinstance(value.get("set"), list):
        return "{ " + ", ".join(operand(v) for v in value["set"]) + " }"
    if isinstance(value.get("prefix"), dict):
        return f"{operand(value['prefix'].get('addr'))}/{value['prefix'].get('len')}"
    if isinstance(value.get("range"), list) and len(value["range"]) == 2:
        return "-".join(operand(v) for v in value["range"])
    if isinstance(value.get("elem"), dict):
        return operand(value["elem"].get("val"))
    return _short(value)


def _list(value: list[Any]) -> str:
    verdict = value[1] if len(value) == 2 else None
    if isinstance(verdict, dict) and len(verdict) == 1 and next(iter(verdict)) in VERDICTS:
        return f"{operand(value[0])} : {text_of(verdict)}"  # a verdict map's element
    return "{ " + ", ".join(operand(v) for v in value) + " }"


def _scalar(value: Any) -> str:
    """A name or value as nft prints it: quoted only where it holds more than a plain word."""
    if isinstance(value, str):
        return value if PLAIN.fullmatch(value) else json.dumps(value)
    return _short(value)


def _short(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))[:80]
