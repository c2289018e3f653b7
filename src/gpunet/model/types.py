"""Constrained types for every name and value that crosses into a command, a rendered file or a
path (DESIGN.md #16). The spec and plan.json loading use the same ones: a loaded plan is
untrusted input, validated like a spec.

Each type keeps its value a plain `str` (plan.json does not change shape); what it admits is
the intersection of what every consumer can hold unquoted: a shell word, an `ip -batch` line,
an nftables string, an ssh_config token, a netplan key, a file name. Anything else is refused
where it enters, with a message naming the rule."""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Interface,
    IPv6Network,
    ip_address,
)
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

# One DNS label (RFC 1123): what OpenSSH, systemd and /etc/hosts accept as a host name.
HOSTNAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"
HOSTNAME = re.compile(HOSTNAME_PATTERN)
# Linux interface names: at most 15 bytes, no '/', ':' or whitespace (the kernel's dev_valid_name).
DEVICE_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$"
# Names the kernel or sysctl gives a meaning of their own: a NIC called `all` would be
# net.ipv4.conf.all, one called `lo` the loopback.
RESERVED_DEVICES = frozenset({"lo", "all", "default", "bonding_masters"})
# RDMA device names (mlx5_3, ibp12s0, rocep1s0f0): NCCL_IB_HCA lists them with ':' and ','.
HCA_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
# Vendor model names: BOM lines, summaries, Grafana titles; no spaces, quotes or separators.
MODEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$"
NAME_PATTERN = r"^[a-z][a-z0-9-]*$"  # site and node-group names
USER_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"  # POSIX user names (useradd's default rule)
USER = re.compile(USER_PATTERN)
MAX_DOMAIN = 253


def check_device(value: str) -> str:
    if value in RESERVED_DEVICES:
        raise ValueError(f"{value!r} is a name the kernel reserves; name the NIC as the node does (eno1, ens1f0)")
    return value


def check_domain(value: str) -> str:
    """A DNS name of one or more labels (gpu001, su1.example), at most 253 characters."""
    labels = value.split(".")
    if len(value) > MAX_DOMAIN or not all(HOSTNAME.fullmatch(label) for label in labels):
        raise ValueError(f"{value!r} is not a DNS name (labels of letters, digits and '-', joined by '.')")
    return value


def check_host(value: str) -> str:
    """A DNS name or a unicast IP address (NTP servers)."""
    try:
        return _as_any_address(value)
    except ValueError:
        return check_domain(value)


def _as_any_address(value: str) -> str:
    """An IPv4 or IPv6 host address: no zone, not loopback, multicast or unspecified."""
    _no_zone(value)
    address = ip_address(value)
    _refuse_special(IPv4Network(f"{address}/32") if address.version == 4 else IPv6Network(f"{address}/128"))
    return str(address)


# Address blocks no cluster plane may use, whatever the plan says: they mean something else to
# every host (this network, loopback, link-local, multicast, the future-use block, broadcast).
IPV4_NOT_FOR_PLANES = tuple(IPv4Network(n) for n in (
    "0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4"))
IPV6_NOT_FOR_PLANES = tuple(IPv6Network(n) for n in (
    "::/8", "fe80::/10", "ff00::/8"))  # ::/8 holds :: and ::1; fe80::/10 link-local; multicast


IPV4_HOST_RANGES = tuple((int(b.network_address), int(b.broadcast_address), b) for b in IPV4_NOT_FOR_PLANES)


def _refuse_special(network: IPv4Network | IPv6Network) -> None:
    blocks: tuple[IPv4Network | IPv6Network, ...] = (
        IPV4_NOT_FOR_PLANES if network.version == 4 else IPV6_NOT_FOR_PLANES)
    for block in blocks:
        if network.overlaps(block):
            raise _special(network, block)


def _refuse_special_host(address: IPv4Address) -> None:
    """_refuse_special for one IPv4 host, by integer range: a plan.json read back at 1M GPUs holds
    over a million addresses, and a /32 network and five overlap tests each cost ~10 us."""
    value = int(address)
    for low, high, block in IPV4_HOST_RANGES:
        if low <= value <= high:
            raise _special(f"{address}/32", block)


def _special(network: object, block: object) -> ValueError:
    return ValueError(f"{network} overlaps {block}, which is not a unicast host range (loopback, "
                      "this-network, link-local, multicast or reserved); use a private or "
                      "routable block such as 10.0.0.0/8 or fd00::/8")


def _no_zone(text: object) -> object:
    if isinstance(text, str) and "%" in text:
        raise ValueError(f"{text!r}: a scope zone (%IFACE) has no place in a plan; write the address alone")
    return text


def check_subnet(value: IPv4Network) -> IPv4Network:
    _refuse_special(value)
    return value


def check_subnet6(value: IPv6Network) -> IPv6Network:
    _refuse_special(value)
    return value


# 10.0.0.5/24 already in normal form: no leading zeros, a prefix length. plan.json holds a million
# of these at 1M GPUs; IPv4Interface takes ~20 us each, this ~2. Anything else takes the slow path.
OCTET = r"(0|[1-9][0-9]{0,2})"
CANONICAL_INTERFACE = re.compile(rf"{OCTET}\.{OCTET}\.{OCTET}\.{OCTET}/(0|[1-9][0-9]?)", re.ASCII)


# The same normal form, its octets at most 255 and its prefix at most 32, and no address of
# IPV4_NOT_FOR_PLANES (first octet 0, 127 or 224 and above; 169.254): what the integer path below
# returns as it came, told by one match. IPV4_HOST_RANGES would need this changed with them.
OCTET_255 = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
FIRST_OCTET = r"(?:2[01][0-9]|22[0-3]|1[013-9][0-9]|12[0-689]|[1-9][0-9]?)"  # 1-223 but 127
PLANE_INTERFACE = re.compile(rf"(?!169\.254\.){FIRST_OCTET}(?:\.{OCTET_255}){{3}}/(?:3[0-2]|[12][0-9]|[0-9])")


def _as_interface(value: str) -> str:
    """10.0.0.5/24, normalized; a unicast host address. The scope-zone check is made here, on the
    slow path only (normal form holds no '%'), not in a validator of its own: a million fewer
    Python calls reading a 1M-GPU plan back, the same refusal. Most addresses (every one a plan
    gpunet writes holds) are told by one match: 1.5 million of them in a 1M-GPU plan."""
    if PLANE_INTERFACE.fullmatch(value) is not None:
        return value
    fast = CANONICAL_INTERFACE.fullmatch(value)
    if fast is not None:
        a, b, c, d, prefix = map(int, fast.groups())
        if max(a, b, c, d) <= 255 and prefix <= 32:
            _refuse_special_host(IPv4Address((a << 24) | (b << 16) | (c << 8) | d))
            return value
    _no_zone(value)
    interface = IPv4Interface(value)
    if "/" not in value:
        raise ValueError(f"{value!r}: write the address with its prefix (10.0.0.5/24)")
    _refuse_special_host(interface.ip)
    return str(interface)


def _as_interface6(value: str) -> str:
    _no_zone(value)
    interface = IPv6Interface(value)
    if "/" not in value:
        raise ValueError(f"{value!r}: write the address with its prefix (fd00::5/64)")
    _refuse_special(IPv6Network(f"{interface.ip}/128"))
    return str(interface)


def _as_address(value: str) -> str:
    _no_zone(value)
    address = IPv4Address(value)
    _refuse_special_host(address)
    return str(address)


def _as_network(value: str) -> str:
    """10.0.0.0/24, normalized: no host bits, not in a special block. One already in normal form
    (every /31 of a routed plane's cables: 10^5 of them at 1M GPUs) is checked by integers."""
    fast = CANONICAL_INTERFACE.fullmatch(value)
    if fast is not None:
        a, b, c, d, prefix = map(int, fast.groups())
        if max(a, b, c, d) <= 255 and prefix <= 32:
            first, host = (a << 24) | (b << 16) | (c << 8) | d, (1 << (32 - prefix)) - 1
            special = any(low <= first | host and first <= high for low, high, _ in IPV4_HOST_RANGES)
            if first & host == 0 and not special:
                return value
    _no_zone(value)
    return str(check_subnet(IPv4Network(value)))


def _as_network6(value: str) -> str:
    _no_zone(value)
    return str(check_subnet6(IPv6Network(value)))


Hostname = Annotated[str, StringConstraints(pattern=HOSTNAME_PATTERN)]
DomainName = Annotated[str, AfterValidator(check_domain)]
HostOrAddress = Annotated[str, AfterValidator(check_host)]
Device = Annotated[str, StringConstraints(pattern=DEVICE_PATTERN), AfterValidator(check_device)]
# A cable end on a node is an interface; on a switch a port number; the lab's host port is "host".
PortName = Annotated[str, StringConstraints(pattern=DEVICE_PATTERN)]
HcaName = Annotated[str, StringConstraints(pattern=HCA_PATTERN)]
ModelName = Annotated[str, StringConstraints(pattern=MODEL_PATTERN)]
Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=40)]
UserName = Annotated[str, StringConstraints(pattern=USER_PATTERN)]
Subnet = Annotated[IPv4Network, BeforeValidator(_no_zone), AfterValidator(check_subnet)]
Subnet6 = Annotated[IPv6Network, BeforeValidator(_no_zone), AfterValidator(check_subnet6)]
# The same, kept as text in plan.json
# (each checks for a scope zone itself: see _as_interface)
SubnetText = Annotated[str, AfterValidator(_as_network)]
Subnet6Text = Annotated[str, AfterValidator(_as_network6)]
AddressText = Annotated[str, AfterValidator(_as_address)]
AnyAddressText = Annotated[str, AfterValidator(_as_any_address)]  # DNS servers, IPv4 or IPv6
InterfaceText = Annotated[str, AfterValidator(_as_interface)]
Interface6Text = Annotated[str, AfterValidator(_as_interface6)]


# A one-line reason, shown in firewall comments (nft's double quotes, XML comments): no quote,
# backslash or shell character.
WHY_PATTERN = r"^[A-Za-z0-9 ,.:;()/_+=@'-]{0,200}$"
Why = Annotated[str, StringConstraints(pattern=WHY_PATTERN)]
PORTS = re.compile(r"(\d{1,5})(?:-(\d{1,5}))?")
EPHEMERAL_PORTS = "32768-59999"  # ip_local_port_range on every node: below Slurm's srun range
SRUN_PORTS = "60001-63000"  # Slurm's documented SrunPortRange


@dataclass(frozen=True)
class PortRange:
    low: int
    high: int

    def __str__(self) -> str:
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"

    def overlaps(self, other: PortRange) -> bool:
        return self.low <= other.high and other.low <= self.high


def port_range(text: str) -> PortRange | None:
    """'22' -> 22-22; '60001-63000'; '' -> None (any port). ValueError for what is not a range."""
    if text == "":
        return None
    match = PORTS.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a port or a port range (22, 60001-63000)")
    low, high = int(match[1]), int(match[2] or match[1])
    if not 1 <= low <= high <= 65535:
        raise ValueError(f"{text!r}: ports run from 1 to 65535, the low one first")
    return PortRange(low, high)


def _check_ports(text: str) -> str:
    port_range(text)
    return text


PortsText = Annotated[str, AfterValidator(_check_ports)]  # "22", "60001-63000"; "" for any port
