"""What a target changes besides files, and its steps: commands (with @root/ paths), the lab's
stand-in for `netplan apply` (links, addresses and routes set with `ip -batch`), and snapshots of the
runtime (sysctl values, addresses and routes) taken before the apply and put back on revert."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from gpunet.node.contract import ROOT_MARK, Action, IpState, Link, Route, Target
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
    """The runtime state a target will change, saved before it does."""
    where = tx / "backup" / "runtime"
    where.mkdir(parents=True, exist_ok=True)
    if kind == "sysctl":
        values = {k: read_sysctl(k) for k in target.get("sysctl_values", {})}
        (where / "sysctl.json").write_text(json.dumps(values))
    elif kind == "ip":
        snapshot = {"addr": ip_json(root, "-4", "addr", "show"), "route": ip_json(root, "-4", "route", "show")}
        (where / "ip.json").write_text(json.dumps(snapshot))


def read_sysctl(key: str) -> str | None:
    try:
        return Path("/proc/sys", key.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def restore_snapshot(kind: str, target: Target, root: Path, tx: Path) -> None:
    where = tx / "backup" / "runtime"
    if kind == "sysctl":
        values = json.loads((where / "sysctl.json").read_text())
        settable = [f"{k}={v}" for k, v in values.items() if v is not None]
        if settable:
            run(["sysctl", "-q", "-w", *settable], root)
    elif kind == "ip":
        snapshot = json.loads((where / "ip.json").read_text())
        apply_ip_state(_state_of(snapshot, set(target.get("ip_state", {}).get("links", {}))), root, force=True)


def _state_of(snapshot: dict[str, Any], links: set[str]) -> IpState:
    """`ip -j` output as the state apply_ip_state sets: links, their addresses and MTU, routes."""
    state: IpState = {"links": {}, "routes": []}
    for link in snapshot["addr"]:
        if link.get("ifname") in links:
            state["links"][link["ifname"]] = {
                "mtu": link.get("mtu"),
                "addresses": [f"{a['local']}/{a['prefixlen']}" for a in link.get("addr_info", [])
                              if a.get("family") == "inet"]}
    for r in snapshot["route"]:
        if r.get("protocol") != "kernel":
            state["routes"].append({"to": r.get("dst", "default"), "via": r.get("gateway"), "dev": r.get("dev"),
                                    "metric": r.get("metric"), "type": r.get("type"),
                                    "protocol": r.get("protocol", "boot")})
    return state


def apply_ip_state(state: IpState, root: Path, force: bool = False) -> None:
    """Links' MTU and IPv4 addresses exactly as given; the main table's static routes replaced (the
    lab's stand-in for `netplan apply`, which needs systemd-networkd)."""
    lines = []
    for dev, raw in state.get("links", {}).items():
        link = _checked_link(dev, raw)
        if link["mtu"]:
            lines.append(f"link set dev {dev} mtu {link['mtu']}")
        lines.append(f"addr flush dev {dev}")
        lines += [f"addr add {a} dev {dev}" for a in link["addresses"]]
    lines += ["route flush table main proto boot", "route flush table main proto static"]
    lines += [_route_line(r) for r in state.get("routes", [])]
    with tempfile.NamedTemporaryFile("w", suffix=".ip") as script:
        script.write("\n".join(lines) + "\n")
        script.flush()
        run(["ip", "-4", *(["-force"] if force else []), "-batch", script.name], root)


DEVICE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
ROUTE_TYPES = ("blackhole", "unreachable", "prohibit")
PROTOCOL = re.compile(r"^[a-z0-9]{1,16}$")  # boot, static, dhcp, ...: restored as they were


def _checked_link(dev: str, link: Link) -> Link:
    """A link's name and addresses as `ip` words, or Refused: they go into an `ip -batch` file."""
    if not DEVICE.match(dev):
        raise Refused(f"bad interface name {dev!r}")
    mtu = link.get("mtu")
    return {"mtu": int(mtu) if mtu else None,
            "addresses": [str(ipaddress.ip_interface(a)) for a in link.get("addresses", [])]}


def _checked_route(route: Route) -> dict[str, Any]:
    to = str(route.get("to") or "default")
    via, dev, metric = route.get("via"), route.get("dev"), route.get("metric")
    return {"to": to if to == "default" else str(ipaddress.ip_network(to, strict=False)),
            "via": str(ipaddress.ip_address(via)) if via else None,
            "dev": dev if dev and DEVICE.match(dev) else None,
            "metric": int(metric) if metric is not None else None,
            "type": route["type"] if route.get("type") in ROUTE_TYPES else None,
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
    if route["metric"] is not None:
        words += ["metric", str(route["metric"])]
    return " ".join([*words, "proto", route["protocol"]])


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
