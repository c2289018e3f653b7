"""What a target changes besides files, and its steps: commands (with @root/ paths), the lab's
stand-in for `netplan apply` (links, addresses, the main and per-NIC tables' routes and the policy
rules, set with `ip -batch`), and snapshots of the runtime (sysctl values; addresses, routes and
rules) taken before the apply and put back on revert."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from gpunet.node.contract import ROOT_MARK, Action, IpState, Link, Route, Rule, Target
from gpunet.node.files import Refused, under


def run(argv: list[str], root: Path, timeout: float = 60, stdin: str | None = None) -> str:
    real = [str(root / a[len(ROOT_MARK):]) if a.startswith(ROOT_MARK) else a for a in argv]
    done = subprocess.run(real, capture_output=True, text=True, timeout=timeout, check=False, input=stdin)
    if done.returncode != 0:
        said = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"{' '.join(real)}: exit {done.returncode}: {said}"[:600])
    return done.stdout


def ip_json(root: Path, *args: str) -> list[dict[str, Any]]:
    out = run(["ip", "-j", *args], root).strip()
    loaded = json.loads(out) if out else []
    return loaded if isinstance(loaded, list) else []


def take_snapshot(kind: str, target: Target, root: Path, tx: Path) -> None:
    """The runtime state a target will change, saved before it does: for `ip`, as the state the
    revert sets (checked now, so a state it could not put back stops the apply before any change)."""
    where = tx / "backup" / "runtime"
    where.mkdir(parents=True, exist_ok=True)
    if kind == "sysctl":
        values = {k: read_sysctl(k) for k in target.get("sysctl_values", {})}
        (where / "sysctl.json").write_text(json.dumps(values))
    elif kind == "ip":
        links = set(target.get("ip_state", {}).get("links", {}))
        state = state_of(ip_json(root, "-4", "addr", "show"), ip_json(root, "-4", "route", "show", "table", "all"),
                         ip_json(root, "-4", "rule", "show"), links)
        ip_batch_lines(state, [])
        (where / "ip.json").write_text(json.dumps(state))


def read_sysctl(key: str) -> str | None:
    try:
        return Path("/proc/sys", key.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def restore_snapshot(kind: str, target: Target, root: Path, tx: Path) -> None:
    del target
    where = tx / "backup" / "runtime"
    if kind == "sysctl":
        values = json.loads((where / "sysctl.json").read_text())
        settable = [f"{k}={v}" for k, v in values.items() if v is not None]
        if settable:
            run(["sysctl", "-q", "-w", *settable], root)
    elif kind == "ip":
        apply_ip_state(json.loads((where / "ip.json").read_text()), root, force=True)


# The rules every IPv4 routing policy starts with: never removed, never added.
DEFAULT_RULES = {(0, "local"), (32766, "main"), (32767, "default")}
# A rule the stand-in owns selects by source and destination only and looks up a table (what
# netplan's routing-policy from/to/table/priority gives); one with other selectors (fwmark, iif,
# uid range, ...) is left as it is, neither removed nor put back.
PLAIN_RULE_KEYS = {"priority", "src", "srclen", "dst", "dstlen", "table", "protocol"}
TABLE_NAMES = {"main": 254, "default": 253}  # `ip -j` names these; `local` (255) is the kernel's own
RESTORABLE_TYPES = (None, "unicast")


def state_of(addr: list[dict[str, Any]], routes: list[dict[str, Any]], rules: list[dict[str, Any]],
             links: set[str]) -> IpState:
    """`ip -j` output as the state apply_ip_state sets: the links' MTU and addresses, the static
    routes of every table but `local`, the policy rules apply owns."""
    state: IpState = {"links": {}, "routes": [], "rules": owned_rules(rules)}
    for link in addr:
        if link.get("ifname") in links:
            state["links"][link["ifname"]] = {
                "mtu": link.get("mtu"),
                "addresses": [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])
                              if a.get("family") == "inet"]}
    for r in routes:
        if r.get("protocol") == "kernel" or r.get("table") == "local" or \
                r.get("type") not in (*RESTORABLE_TYPES, *ROUTE_TYPES):
            continue
        state["routes"].append({"to": r.get("dst", "default"), "via": r.get("gateway"), "dev": r.get("dev"),
                                "metric": r.get("metric"), "type": r.get("type"), "scope": r.get("scope"),
                                "src": r.get("prefsrc"), "protocol": r.get("protocol", "boot"),
                                "table": _table_id(r["table"]) if "table" in r else None})
    return state


def owned_rules(rules: list[dict[str, Any]]) -> list[Rule]:
    """The policy rules the stand-in sets and removes (`ip -j rule` output): plain ones, not the
    kernel's defaults."""
    owned: list[Rule] = []
    for r in rules:
        default = r.get("src", "all") == "all" and "dst" not in r and (r.get("priority"), r.get("table")) in \
            DEFAULT_RULES
        if default or not set(r) <= PLAIN_RULE_KEYS or "table" not in r or r["table"] == "local":
            continue
        owned.append({"src": _prefix_of(r, "src"), "dst": _prefix_of(r, "dst"), "priority": r.get("priority"),
                      "table": _table_id(r["table"])})
    return owned


def _prefix_of(rule: dict[str, Any], key: str) -> str | None:
    address = rule.get(key)
    if address in (None, "all"):
        return None
    length = rule.get(f"{key}len")
    return f"{address}/{length}" if length is not None else str(address)


def _table_id(name: object) -> int:
    """A table as `ip -j` names it, as its number."""
    if isinstance(name, str) and name in TABLE_NAMES:
        return TABLE_NAMES[name]
    if isinstance(name, str) and name.isdigit():
        return int(name)
    raise Refused(f"routing table {name!r}: a name from rt_tables, which the lab's stand-in does not map")


def current_rules(root: Path) -> list[Rule]:
    return owned_rules(ip_json(root, "-4", "rule", "show"))


def apply_ip_state(state: IpState, root: Path, force: bool = False) -> None:
    """Links' MTU and IPv4 addresses exactly as given; the static routes of every table and the
    policy rules replaced (the lab's stand-in for `netplan apply`, which needs systemd-networkd;
    networkd too removes the routes and rules it did not configure)."""
    lines = ip_batch_lines(state, current_rules(root))
    with tempfile.NamedTemporaryFile("w", suffix=".ip") as script:
        script.write("\n".join(lines) + "\n")
        script.flush()
        run(["ip", "-4", *(["-force"] if force else []), "-batch", script.name], root)


def ip_batch_lines(state: IpState, current: list[Rule]) -> list[str]:
    """The `ip -batch` lines that set `state`, where `current` are the rules in place now (removed
    first); every word checked (Refused, or ValueError from ipaddress) before any is written."""
    lines = []
    for dev, raw in state.get("links", {}).items():
        link = _checked_link(dev, raw)
        if link["mtu"]:
            lines.append(f"link set dev {dev} mtu {link['mtu']}")
        lines.append(f"addr flush dev {dev}")
        lines += [f"addr add {a} dev {dev}" for a in link["addresses"]]
    lines += ["route flush table all proto boot", "route flush table all proto static"]
    lines += [_route_line(r) for r in state.get("routes", [])]
    lines += [_rule_line("del", r) for r in current]
    lines += list(dict.fromkeys(_rule_line("add", r) for r in state.get("rules", [])))
    return lines


DEVICE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")  # as the Plan's interface names
ROUTE_TYPES = ("blackhole", "unreachable", "prohibit")
SCOPES = ("global", "site", "link", "host", "nowhere")
PROTOCOL = re.compile(r"^[a-z0-9]{1,16}$")  # boot, static, dhcp, ...: restored as they were
LOCAL_TABLE, MAIN_TABLE = 255, 254
MAX_U32 = 2**32 - 1


def _checked_link(dev: str, link: Link) -> Link:
    """A link's name and addresses as `ip` words, or Refused: they go into an `ip -batch` file."""
    _checked_device(dev)
    mtu = link.get("mtu")
    return {"mtu": int(mtu) if mtu else None,
            "addresses": [str(ipaddress.ip_interface(a)) for a in link.get("addresses", [])]}


def _checked_device(dev: object) -> str:
    if not isinstance(dev, str) or not DEVICE.match(dev):
        raise Refused(f"bad interface name {dev!r}")
    return dev


def _checked_number(what: str, value: object, low: int, high: int) -> int:
    """An integer in [low, high]; a bool, a float or a string is refused, not converted."""
    if type(value) is not int or not low <= value <= high:
        raise Refused(f"bad {what} {value!r}: an integer from {low} to {high}")
    return value


def _checked_table(value: object) -> int | None:
    """A routing table id: None for main; `local` is the kernel's and never set."""
    if value is None:
        return None
    table = _checked_number("routing table", value, 1, MAX_U32)
    if table == LOCAL_TABLE:
        raise Refused("routing table 255 (local) is the kernel's own")
    return None if table == MAIN_TABLE else table


def _checked_route(route: Route) -> dict[str, Any]:
    to = str(route.get("to") or "default")
    via, dev, metric, src = route.get("via"), route.get("dev"), route.get("metric"), route.get("src")
    kind, scope = route.get("type"), route.get("scope")
    if kind not in (*RESTORABLE_TYPES, *ROUTE_TYPES):
        raise Refused(f"route type {kind!r}: the lab sets {', '.join(ROUTE_TYPES)} or unicast routes")
    if scope is not None and scope not in SCOPES:
        raise Refused(f"bad route scope {scope!r}")
    return {"to": to if to == "default" else str(ipaddress.ip_network(to, strict=False)),
            "via": str(ipaddress.ip_address(via)) if via else None,
            "dev": _checked_device(dev) if dev else None,
            "metric": _checked_number("metric", metric, 0, MAX_U32) if metric is not None else None,
            "type": kind if kind in ROUTE_TYPES else None,
            "table": _checked_table(route.get("table")), "scope": scope,
            "src": str(ipaddress.ip_address(src)) if src else None,
            "protocol": route["protocol"] if PROTOCOL.match(str(route.get("protocol", ""))) else "static"}


def _route_line(given: Route) -> str:
    route = _checked_route(given)
    words = ["route", "replace"]
    if route["type"]:
        words.append(route["type"])
    words.append(str(route["to"]))
    if route["via"]:
        words += ["via", str(route["via"])]
    if route["dev"] and not route["type"]:
        words += ["dev", str(route["dev"])]
    for key in ("table", "scope", "src", "metric"):
        if route[key] is not None:
            words += [key, str(route[key])]
    return " ".join([*words, "proto", route["protocol"]])


def _checked_rule(rule: Rule) -> dict[str, Any]:
    src, dst, priority, table = rule.get("src"), rule.get("dst"), rule.get("priority"), rule.get("table")
    if table is None:
        raise Refused("a policy rule without a table to look up")
    return {"src": str(ipaddress.ip_network(src, strict=False)) if src else None,
            "dst": str(ipaddress.ip_network(dst, strict=False)) if dst else None,
            "table": _checked_table(table) or MAIN_TABLE,
            "priority": _checked_number("rule priority", priority, 0, MAX_U32) if priority is not None else None}


def _rule_line(verb: str, given: Rule) -> str:
    """`rule add` or `rule del`; without a priority an added rule takes the kernel's, before the
    rules already there, as networkd's do."""
    rule = _checked_rule(given)
    words = ["rule", verb]
    if rule["priority"] is not None:
        words += ["priority", str(rule["priority"])]
    for key, word in (("src", "from"), ("dst", "to")):
        if rule[key]:
            words += [word, rule[key]]
    return " ".join([*words, "table", str(rule["table"])])


def act(action: Action, target: Target, root: Path, tx: Path) -> None:
    """One step of a target's apply or revert: a command, the lab's network state, or a snapshot;
    `if_file`/`unless_file` make it depend on whether a file is (back) in place."""
    if "if_file" in action and not under(root, action["if_file"]).is_file():
        return
    if "unless_file" in action and under(root, action["unless_file"]).is_file():
        return
    if "run" in action:
        run(action["run"], root, timeout=float(action.get("timeout", 120)), stdin=action.get("stdin"))
    elif "ip_state" in action:
        apply_ip_state(target["ip_state"], root)
    elif "restore" in action:
        restore_snapshot(action["restore"], target, root, tx)
    else:
        raise Refused(f"unknown action {sorted(action)!r}")
