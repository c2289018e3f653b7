"""Validate a SONiC config_db.json against SONiC's own YANG models with libyang's yanglint.

config_db.json is not YANG instance data: a table is `{"KEY|PARTS": {field: value}}`. SONiC's
sonic_yang_ext translates it by reading the models; this does the same for the tables gpunet
writes: the module whose top container holds the table, the list whose key has as many parts as
the config_db key (or the container named like the key: DEVICE_METADATA|localhost), key leaves in
order, fields as leaves (lists as leaf-lists), and fields of a list with a nested list (DSCP_TO_TC_MAP
"26": "3") as entries of that nested list. Written as XML, where every value is text, so no type
coercion is guessed here: libyang checks every type, pattern, range, leafref, must and when
(with every module implemented: no check is skipped).

Models: GPUNET_SONIC_YANG names a directory of sonic-yang-models (sonic-buildimage
src/sonic-yang-models/yang-models, with yang-templates/*.yang.j2 rendered as its setup.py does,
yang_model_type="py"). Never committed here (fetched content)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([{};])|([^\s{};"\']+)')


@dataclass
class Statement:
    keyword: str
    argument: str
    children: list[Statement] = field(default_factory=list)

    def find(self, keyword: str, argument: str | None = None) -> list[Statement]:
        return [c for c in self.children if c.keyword == keyword and (argument is None or c.argument == argument)]


def _tokens(text: str) -> list[str]:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"(?m)^\s*//.*$|(?<=[\s;{}])//[^\n\"']*$", " ", text)
    found: list[str] = []
    for match in TOKEN.finditer(text):
        quoted = match.group(1) if match.group(1) is not None else match.group(2)
        value = quoted if quoted is not None else match.group(3) or match.group(4)
        if found and found[-1] == "+" and quoted is not None:  # "a" + "b": one string
            found.pop()
            found[-1] += value
        else:
            found.append(value)
    return found


def parse_yang(text: str) -> Statement:
    tokens, position = _tokens(text), 0

    def statement() -> Statement:
        nonlocal position
        keyword = tokens[position]
        position += 1
        argument = ""
        while tokens[position] not in ("{", ";"):
            argument += tokens[position]
            position += 1
        node = Statement(keyword, argument)
        if tokens[position] == "{":
            position += 1
            while tokens[position] != "}":
                node.children.append(statement())
        position += 1
        return node

    return statement()


@dataclass(frozen=True)
class Table:
    module: str
    namespace: str
    container: Statement


def index_models(directory: Path) -> dict[str, Table]:
    """Table name -> its module, namespace and YANG container."""
    tables: dict[str, Table] = {}
    for path in sorted(directory.glob("sonic-*.yang")):
        module = parse_yang(path.read_text())
        namespace = module.find("namespace")[0].argument
        for top in module.find("container"):
            for table in top.find("container"):
                tables.setdefault(table.argument, Table(module.argument, namespace, table))
    return tables


def _leaf(name: str, value: Any) -> str:
    values = value if isinstance(value, list) else [value]
    return "".join(f"<{name}>{escape(str(v))}</{name}>" for v in values)


def _entry(table: Statement, key: str, fields: dict[str, Any]) -> str:
    named = table.find("container", key)
    if named:
        return f"<{key}>" + "".join(_leaf(k, v) for k, v in fields.items()) + f"</{key}>"
    parts = key.split("|")
    lists = [item for item in table.find("list") if len(item.find("key")[0].argument.split()) == len(parts)]
    if not lists:
        raise ValueError(f"{table.argument}: no list with a {len(parts)}-part key for {key!r}")
    item = lists[0]
    keys = item.find("key")[0].argument.split()
    body = "".join(_leaf(k, v) for k, v in zip(keys, parts, strict=True))
    leaves = {s.argument for s in item.children if s.keyword in ("leaf", "leaf-list")}
    inner = item.find("list")
    for name, value in fields.items():
        if name in leaves or not inner:
            body += _leaf(name, value)
        else:
            inner_key = inner[0].find("key")[0].argument
            other = next(s.argument for s in inner[0].find("leaf") if s.argument != inner_key)
            body += f"<{inner[0].argument}>{_leaf(inner_key, name)}{_leaf(other, value)}</{inner[0].argument}>"
    return f"<{item.argument}>{body}</{item.argument}>"


def to_xml(config_db: dict[str, dict[str, dict[str, Any]]], tables: dict[str, Table]) -> tuple[str, set[str]]:
    """The YANG instance document, and the modules it uses. KeyError names a table no model has."""
    by_module: dict[str, list[str]] = {}
    for name, rows in config_db.items():
        table = tables[name]
        body = "".join(_entry(table.container, key, fields) for key, fields in rows.items())
        by_module.setdefault(table.module, []).append(f"<{name}>{body}</{name}>")
    namespaces = {t.module: t.namespace for t in tables.values()}
    xml = "".join(f'<{m} xmlns="{namespaces[m]}">{"".join(parts)}</{m}>' for m, parts in by_module.items())
    return xml, set(by_module)


def modules_in_import_order(directory: Path) -> list[Path]:
    """Every module of the directory, each after the modules it imports. All are loaded implemented:
    a leafref, must or when into a module that is only imported is skipped by libyang with a warning
    (and `yanglint -i`, which implements them on demand, crashes libyang 2.1 on sonic-vlan)."""
    files = {p.stem: p for p in sorted(directory.glob("sonic-*.yang"))}
    imports = {name: [i.argument for i in parse_yang(path.read_text()).find("import") if i.argument in files]
               for name, path in files.items()}
    ordered: list[Path] = []
    done: set[str] = set()

    def visit(name: str, seen: frozenset[str]) -> None:
        if name in done or name in seen:
            return
        for imported in imports[name]:
            visit(imported, seen | {name})
        done.add(name)
        ordered.append(files[name])

    for name in files:
        visit(name, frozenset())
    return ordered


def yanglint(directory: Path, config_db: dict[str, Any], work: Path) -> subprocess.CompletedProcess[str]:
    """yanglint on the translated document, every SONiC module loaded (imports first)."""
    xml, _ = to_xml(config_db, index_models(directory))
    data = work / "config_db.xml"
    data.write_text(xml)
    schemas = [str(p) for p in modules_in_import_order(directory)]
    return subprocess.run(["yanglint", "-p", str(directory), "-t", "config", *schemas, str(data)],
                          capture_output=True, text=True, timeout=300, check=False)
