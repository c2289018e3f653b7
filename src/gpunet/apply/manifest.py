"""What the agent on one node is told to do: the rendered files, and per render target how its own
tool checks, applies and reverts them. Pure: the Plan, the node and where it runs in; nothing is
read from or sent to a node here."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from gpunet.errors import UsageError
from gpunet.model.plan import Node, Plan
from gpunet.node.contract import ROOT_MARK
from gpunet.render import NODE_RENDERERS, netplan, sysctl
from gpunet.render.firewall import NFT_PATH

DEFAULT_TARGETS = ("netplan", "sysctl", "nftables", "sshd")
# 0600 where the file may hold secrets or its reader insists (netplan warns on a readable file,
# NetworkManager ignores one), 0644 for what every user reads.
PRIVATE = ("etc/netplan/", "etc/NetworkManager/")

Action = dict[str, Any]


@dataclass(frozen=True)
class Where:
    """Where the node is: a real node (its own tools) or a lab server (the lab's stand-ins).

    In a lab (`lab_root`, from gpunet.reach), a server's files live in its own tree
    (`lab_root/<node>`), netplan is applied as `ip` commands (no systemd-networkd in a namespace),
    only per-namespace sysctls are set, and sshd is the server's own, reloaded by its pid file in
    `sshd_pid_dir`."""

    lab_root: str | None = None
    sshd_pid_dir: str | None = None

    @property
    def lab(self) -> bool:
        return self.lab_root is not None


def node_manifest(plan: Plan, node: Node, targets: tuple[str, ...], where: Where, *, txid: str, token: str,
                  timeout_s: float, change: Callable[[dict[str, str]], dict[str, str]] | None = None,
                  pause_at: str | None = None) -> dict[str, Any]:
    """The manifest for one node. `change` alters the rendered files before they are sent: fault
    injection for the tests and benchmarks (a bad change must be reverted), never the CLI."""
    files: dict[str, str] = {}
    for name in targets:
        files |= render_target(plan, node, name)
    if change is not None:
        files = change(dict(files))
    entries = [_target(name, files, node, where) for name in targets]
    return {"version": 1, "txid": txid, "node": node.name, "timeout_s": timeout_s,
            "token_sha256": hashlib.sha256(token.encode()).hexdigest(), "pause_at": pause_at,
            "files": [{"path": p, "content": text, "mode": 0o600 if p.startswith(PRIVATE) else 0o644}
                      for p, text in sorted(files.items())],
            "targets": entries}


def render_target(plan: Plan, node: Node, name: str) -> dict[str, str]:
    if name not in TARGETS:
        raise UsageError(f"--target {name!r}: apply knows {', '.join(TARGETS)}")
    return NODE_RENDERERS[name](plan, node)


def _target(name: str, files: dict[str, str], node: Node, where: Where) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "requires": [], "check": [], "apply": [], "revert": [], "snapshot": []}
    entry.update(TARGETS[name](files, node, where))
    return entry


def _run(*argv: str) -> Action:
    return {"run": list(argv)}


def _netplan(files: dict[str, str], node: Node, where: Where) -> dict[str, Any]:
    if where.lab:
        return {"requires": ["ip"], "ip_state": lab_network_state(files.get(netplan.PATH, "")),
                "apply": [{"ip_state": True}], "revert": [{"restore": "ip"}], "snapshot": ["ip"]}
    # `netplan generate` validates without touching a link; `netplan apply` reads the restored
    # files again on revert, as `netplan try` does.
    return {"requires": ["netplan"], "check": [_run("netplan", "generate")], "apply": [_run("netplan", "apply")],
            "revert": [_run("netplan", "apply")]}


def _networkmanager(files: dict[str, str], node: Node, where: Where) -> dict[str, Any]:
    del where
    ids = [path.rsplit("/", 1)[-1].removesuffix(".nmconnection") for path in files if path.endswith(".nmconnection")]
    up = [_run("nmcli", "connection", "up", "id", i) for i in ids]
    return {"requires": ["nmcli"], "apply": [_run("nmcli", "connection", "reload"), *up],
            "revert": [_run("nmcli", "connection", "reload"), *up]}


def _sysctl(files: dict[str, str], node: Node, where: Where) -> dict[str, Any]:
    # A lab server shares the host's kernel-wide keys: only the per-namespace file is applied there.
    applied = [sysctl.NET_PATH] if where.lab else [sysctl.NET_PATH, sysctl.HOST_PATH]
    values = {key.strip(): value.strip() for p in applied for line in files.get(p, "").splitlines()
              if not line.lstrip().startswith("#") for key, sep, value in [line.partition("=")] if sep}
    return {"requires": ["sysctl"], "sysctl_values": values, "snapshot": ["sysctl"],
            "revert": [{"restore": "sysctl"}],
            "apply": [_run("sysctl", "-q", "-p", ROOT_MARK + p) for p in applied if p in files]}


def _nftables(files: dict[str, str], node: Node, where: Where) -> dict[str, Any]:
    # The file replaces gpunet's own table only; so does the revert: the old file loaded again, or
    # the table removed where there was none. Other tables (container runtimes, fail2ban) stay.
    load = _run("nft", "-f", ROOT_MARK + NFT_PATH)
    # declared, then deleted: removed whether or not the apply got as far as creating it
    remove = _run("nft", "-f", "-") | {"stdin": "table inet gpunet\ndelete table inet gpunet\n",
                                       "unless_file": NFT_PATH}
    return {"requires": ["nft"], "check": [_run("nft", "-c", "-f", ROOT_MARK + NFT_PATH)], "apply": [load],
            "revert": [load | {"if_file": NFT_PATH}, remove]}


def _sshd(files: dict[str, str], node: Node, where: Where) -> dict[str, Any]:
    # Reloaded, or started again where it died: an sshd bound to an address the change removed
    # exits on reload, and the revert that puts the address back must bring it back too.
    if where.sshd_pid_dir:
        reload = _run("sh", "-c", 'pkill -HUP -F "$1" 2>/dev/null || exec /usr/sbin/sshd', "sh",
                      f"{where.sshd_pid_dir}/{node.name}.sshd.pid")
    else:
        reload = _run("sh", "-c", "systemctl reload-or-restart ssh 2>/dev/null || systemctl reload-or-restart sshd")
    # `sshd -t` reads the whole configuration with the new drop-in: a typo never reaches sshd.
    return {"requires": ["sshd"], "check": [_run("sshd", "-t")], "apply": [reload], "revert": [reload]}


def _files_only(reload: tuple[str, ...] = ()) -> Callable[[dict[str, str], Node, Where], dict[str, Any]]:
    def entry(files: dict[str, str], node: Node, where: Where) -> dict[str, Any]:
        del files, node
        again = [] if where.lab or not reload else [_run(*reload)]
        return {"apply": again, "revert": again}

    return entry


TARGETS: dict[str, Callable[[dict[str, str], Node, Where], dict[str, Any]]] = {
    "netplan": _netplan,
    "networkmanager": _networkmanager,
    "sysctl": _sysctl,
    "nftables": _nftables,
    "sshd": _sshd,
    "hosts": _files_only(),
    "nccl": _files_only(),
    "ntp": _files_only(("sh", "-c", "systemctl restart chrony 2>/dev/null || systemctl restart chronyd")),
}


def lab_network_state(text: str) -> dict[str, Any]:
    """A rendered netplan file as the links, addresses, MTU, routes (main and per-NIC tables) and
    policy rules a lab server gets: what `netplan apply` would have systemd-networkd set. A key the
    stand-in cannot set is refused, not dropped."""
    try:
        network = (yaml.safe_load(text) or {}).get("network", {})
    except yaml.YAMLError as exc:
        raise UsageError(f"the netplan file does not parse: {exc}") from exc
    refused = sorted(set(network) & {"bonds", "vlans", "bridges"})
    if refused:
        raise UsageError(f"the lab cannot apply netplan {', '.join(refused)} (no bonding or 802.1Q here)")
    links: dict[str, Any] = {}
    routes: list[dict[str, Any]] = []
    rules: list[dict[str, Any]] = []
    for dev, conf in (network.get("ethernets") or {}).items():
        links[dev] = {"mtu": conf.get("mtu"), "addresses": [str(a) for a in conf.get("addresses", [])]}
        routes += [_lab_route(dev, r) for r in conf.get("routes", [])]
        rules += [_lab_rule(dev, r) for r in conf.get("routing-policy", [])]
    return {"links": links, "routes": routes, "rules": rules}


ROUTE_KEYS = {"to": "to", "via": "via", "metric": "metric", "type": "type", "table": "table", "scope": "scope",
              "from": "src"}
RULE_KEYS = {"from": "src", "to": "dst", "table": "table", "priority": "priority"}


def _lab_route(dev: str, route: dict[str, Any]) -> dict[str, Any]:
    """A netplan route as the agent's: `from` is the preferred source address (`ip route ... src`)."""
    _only(dev, "route", route, ROUTE_KEYS)
    return {"dev": dev} | {ours: route.get(key) for key, ours in ROUTE_KEYS.items()}


def _lab_rule(dev: str, rule: dict[str, Any]) -> dict[str, Any]:
    """A netplan routing-policy entry as the agent's rule (`ip rule add from ... table ...`)."""
    _only(dev, "routing-policy", rule, RULE_KEYS)
    return {ours: rule.get(key) for key, ours in RULE_KEYS.items()}


def _only(dev: str, what: str, entry: dict[str, Any], known: dict[str, str]) -> None:
    if not isinstance(entry, dict):
        raise UsageError(f"{dev}'s {what} entry {entry!r} is not a mapping")
    extra = sorted(set(entry) - set(known))
    if extra:
        raise UsageError(f"the lab cannot apply {dev}'s {what} {', '.join(extra)} (it sets "
                         f"{', '.join(known)}): apply it to real nodes")
