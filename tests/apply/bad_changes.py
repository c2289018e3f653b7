"""Bad changes an admin could push, injected into a lab server's rendered files: each must be
reverted with SSH to the server working afterwards. Seven kinds, eight variants each (56), one
variant per server index so eight servers take eight different variants at once."""

from __future__ import annotations

import re
from collections.abc import Callable
from ipaddress import ip_interface, ip_network
from typing import Any

import yaml

from gpunet.render.firewall import NFT_PATH
from gpunet.render.netplan import PATH as NETPLAN
from gpunet.render.ssh import SSHD_PATH

Files = dict[str, str]
MGMT, DATA = "eth0", "ens1"


def _netplan(files: Files, edit: Callable[[dict[str, Any]], None]) -> Files:
    doc = yaml.safe_load(files[NETPLAN])
    edit(doc["network"]["ethernets"])
    return files | {NETPLAN: yaml.safe_dump(doc, sort_keys=False)}


def wrong_gateway(v: int) -> Callable[[Files], Files]:
    """A default route via an address of the node's own management subnet that nothing answers at
    (on-link, so `ip` takes it and only verification can tell; whatever block the lab was given)."""
    def edit(eth: dict[str, Any]) -> None:
        subnet = ip_interface(eth[MGMT]["addresses"][0]).network
        eth[MGMT]["routes"] = [{"to": "default", "via": str(subnet.network_address + 240 + v)}]
    return lambda files: _netplan(files, edit)


PREFIXES = (32, 30, 16, 25, 28, 20, 8, 31)


def wrong_prefix(v: int) -> Callable[[Files], Files]:
    def edit(eth: dict[str, Any]) -> None:
        eth[MGMT]["addresses"] = [a.split("/")[0] + f"/{PREFIXES[v]}" for a in eth[MGMT]["addresses"]]
    return lambda files: _netplan(files, edit)


def management_address_removed(v: int) -> Callable[[Files], Files]:
    def edit(eth: dict[str, Any]) -> None:
        eth[MGMT]["addresses"] = []
        if v % 2:  # without its route too, so the apply itself succeeds and only the guard can save it
            eth[MGMT].pop("routes", None)
    return lambda files: _netplan(files, edit)


MTUS = (9000, 1400, 1280, 4000, 9216, 1200, 2000, 1000)


def mtu_mismatch(v: int) -> Callable[[Files], Files]:
    def edit(eth: dict[str, Any]) -> None:
        eth[MGMT]["mtu"] = MTUS[v]
    return lambda files: _netplan(files, edit)


# {admin}: the admin range as the node's ruleset names it (its lab block's); {next}: the same range one
# /24 on, {half}: 128 addresses on (neither holds the host that logs in).
SSH_RULE_EDITS = (
    ("tcp dport 22 accept", "tcp dport 22 drop"),
    ("tcp dport 22 accept", "tcp dport 22 reject"),
    ("ip saddr {admin} tcp dport 22", "ip saddr {next} tcp dport 22"),
    ('iifname "eth0" ip saddr {admin} tcp dport 22', 'iifname "ens1" ip saddr {admin} tcp dport 22'),
    ("tcp dport 22 accept", "tcp dport 2222 accept"),
    ("ct state established,related accept", "tcp dport 22 drop\n\t\tct state established,related accept"),
    ("tcp dport 22 accept", "tcp dport 22 counter drop"),
    ("ip saddr {admin} tcp dport 22", "ip saddr {half} tcp dport 22"),
)
ADMIN_RULE = re.compile(r"ip saddr (\d+\.\d+\.\d+\.\d+/\d+) tcp dport 22")


def _ranges(ruleset: str) -> dict[str, str]:
    admin = ip_network(ADMIN_RULE.search(ruleset).group(1))  # type: ignore[union-attr]
    moved = {name: ip_network((int(admin.network_address) + step, admin.prefixlen)) for name, step in
             (("next", 256), ("half", 128))}
    return {"admin": str(admin)} | {name: str(net) for name, net in moved.items()}


def firewall_drops_ssh(v: int) -> Callable[[Files], Files]:
    def change(files: Files) -> Files:
        old, new = (text.format(**_ranges(files[NFT_PATH])) for text in SSH_RULE_EDITS[v])
        assert old in files[NFT_PATH], old
        return files | {NFT_PATH: files[NFT_PATH].replace(old, new, 1)}
    return change


SSHD_REFUSALS = (
    "PubkeyAuthentication no", "AuthorizedKeysFile /nonexistent/keys", "AllowUsers nobody", "DenyUsers root",
    "PermitRootLogin no", "AuthorizedKeysFile none", "AllowGroups nogroup", "PubkeyAcceptedAlgorithms ssh-rsa",
)


def sshd_refuses_admin_key(v: int) -> Callable[[Files], Files]:
    line = SSHD_REFUSALS[v]
    # first in the drop-in: sshd takes the first value of a keyword
    return lambda files: files | {SSHD_PATH: f"{line}\n" + files[SSHD_PATH].replace("PubkeyAuthentication yes\n", "")}


# Routes into the management subnet M (its network address + host index / prefix), via the data
# subnet D (+ host index) or of a blocking type: the lab host that logs in sits in M.
BLACKHOLES = (
    {"to": (0, 25), "via": 254}, {"to": (1, 32), "via": 254}, {"to": (0, 26), "type": "blackhole"},
    {"to": (0, 28), "via": 253}, {"to": (1, 32), "type": "unreachable"}, {"to": (0, 30), "via": 250},
    {"to": (0, 25), "type": "prohibit"}, {"to": (0, 27), "via": 251},
)


def data_route_blackholes_management(v: int) -> Callable[[Files], Files]:
    def edit(eth: dict[str, Any]) -> None:
        management = ip_interface(eth[MGMT]["addresses"][0]).network.network_address
        data = ip_interface(eth[DATA]["addresses"][0]).network.network_address
        shape = BLACKHOLES[v]
        index, prefix = shape["to"]  # type: ignore[misc]
        route: dict[str, str] = {"to": f"{management + index}/{prefix}"}
        route |= {"via": str(data + shape["via"])} if "via" in shape else {"type": str(shape["type"])}
        eth[DATA].setdefault("routes", []).append(route)
    return lambda files: _netplan(files, edit)


KINDS: dict[str, Callable[[int], Callable[[Files], Files]]] = {
    "wrong gateway": wrong_gateway,
    "wrong prefix": wrong_prefix,
    "management address removed": management_address_removed,
    "MTU mismatch on management": mtu_mismatch,
    "firewall dropping SSH": firewall_drops_ssh,
    "sshd refusing the admin key": sshd_refuses_admin_key,
    "data-plane route black-holing management": data_route_blackholes_management,
}
VARIANTS = 8
