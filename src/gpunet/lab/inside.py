"""Looking into a lab namespace, and setting its sysctls, from a thread of this process.

setns(2) with CLONE_NEWNET moves only the calling thread: a socket it opens there, and what it
reads under /proc/thread-self/net and /proc/sys/net, belong to that namespace, while every other
thread stays where it was. `lab up` of 64 servers used to start a process (two, with `ip netns
exec`) for every sysctl write, address look, listening-socket look and ping: over a thousand, and
seconds of CPU on two cores; each of these is now a file read or a socket here. Only what needs a
program of its own (ip and tc batches, sshd, lldpd, FRR) still starts one.

/proc/self/net is the thread-group leader's namespace, never this thread's: always thread-self."""

from __future__ import annotations

import ctypes
import errno
import ipaddress
import os
import re
import secrets
import select
import socket
import struct
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from gpunet.errors import LabError

NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
NAMESPACE = re.compile(r"gn[a-z0-9]{1,4}-[A-Za-z0-9._-]{1,64}")  # the lab's own names only
PROC_NET = Path("/proc/thread-self/net")
PROC_SYS = Path("/proc/sys")
PER_INTERFACE = ("net.ipv4.conf.", "net.ipv6.conf.", "net.ipv4.neigh.", "net.ipv6.neigh.")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
TENTATIVE, DADFAILED = 0x40, 0x08  # IFA_F_* in /proc/net/if_inet6's flags column
ICMP_ECHO, ICMP_ECHO_REPLY = 8, 0
MAX_PROC_BYTES = 1 << 22  # a lab namespace's socket or address table: a few kB; read no further

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if int(_libc.setns(fd, CLONE_NEWNET)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


@contextmanager
def inside(namespace: str) -> Iterator[None]:
    """This thread in the lab namespace `namespace` until the block ends, whatever it raised. A
    name that is not one of a lab's (gn<id>-<device>) is refused: it would be a path."""
    if not NAMESPACE.fullmatch(namespace) or ".." in namespace:
        raise LabError(f"not a lab namespace name: {namespace[:80]!r}")
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        there = os.open(NETNS_DIR / namespace, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(there)
        finally:
            os.close(there)
        try:
            yield
        finally:
            _back(home)
    finally:
        os.close(home)


def _back(home: int) -> None:
    try:
        _setns(home)
    except OSError as exc:  # never seen: the thread would go on in the lab's namespace, so stop here
        raise SystemExit(f"gpunet: could not return a thread to its own network namespace: {exc}") from exc


def _read(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(MAX_PROC_BYTES).decode(errors="replace")


# --- sysctls -------------------------------------------------------------------------------------

def sysctl_path(key: str) -> Path:
    """/proc/sys path of a dotted sysctl name; an interface's own keys keep the dots of its name
    (net.ipv4.conf.eth0.100.rp_filter is eth0.100's), as sysctl(8) reads them."""
    parts = key.split(".")
    prefix = next((p for p in PER_INTERFACE if key.startswith(p)), None)
    if prefix is not None and len(parts) > 4:
        parts = [*prefix.rstrip(".").split("."), ".".join(parts[3:-1]), parts[-1]]
    if any(p in ("", ".", "..") or "/" in p for p in parts) or parts[0] != "net":
        raise LabError(f"not a network sysctl: {key[:120]!r}")
    return PROC_SYS.joinpath(*parts)


def write_sysctls(namespace: str, values: Mapping[str, str]) -> None:
    """Each value written in the namespace, in order; LabError naming the first the kernel refuses."""
    with inside(namespace):
        for key, value in values.items():
            try:
                with sysctl_path(key).open("w") as handle:
                    handle.write(value)
            except OSError as exc:
                raise LabError(f"sysctl {key}={value} in {namespace}: {exc.strerror or exc}") from exc


# --- what a namespace shows: listening sockets, addresses ----------------------------------------

def tcp_listeners(namespace: str) -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket in the namespace, IPv4 and IPv6."""
    with inside(namespace):
        texts = [_read(PROC_NET / name) if (PROC_NET / name).exists() else "" for name in ("tcp", "tcp6")]
    return listeners(texts[0]) | listeners(texts[1])


def listeners(proc_net_tcp: str) -> set[tuple[str, int]]:
    """Parse /proc/net/tcp or tcp6: the listening sockets' local address and port. A line of
    another shape is skipped (the header, or a kernel that adds columns: the first four stay)."""
    found = set()
    for line in proc_net_tcp.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != LISTEN or ":" not in fields[1]:
            continue
        address, _, port = fields[1].partition(":")
        try:
            found.add((_proc_address(address), int(port, 16)))
        except ValueError:
            continue
    return found


def _proc_address(hexed: str) -> str:
    """/proc/net/tcp* writes addresses as the kernel holds them: 32-bit words in host order."""
    raw = bytes.fromhex(hexed)
    if len(raw) not in (4, 16):
        raise ValueError(hexed)
    words = b"".join(struct.pack("=I", struct.unpack(">I", raw[i:i + 4])[0]) for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def unsettled_inet6(if_inet6: str, only: str | None = None) -> list[str]:
    """Parse /proc/net/if_inet6: the addresses still in duplicate-address detection (tentative) or
    that failed it, as "interface address/prefix flag" (`only`: one interface). IPv4 has no such
    state. A line of another shape counts as unsettled: looked at again, never taken as settled."""
    found = []
    for line in if_inet6.splitlines():
        fields = line.split()
        if len(fields) != 6:
            found.append(f"unreadable if_inet6 line {line[:60]!r}")
            continue
        hexed, _, prefix, _, flags, name = fields
        if only is not None and name != only:
            continue
        try:
            state = int(flags, 16)
            address = ipaddress.IPv6Address(bytes.fromhex(hexed))
        except ValueError:
            found.append(f"unreadable if_inet6 line {line[:60]!r}")
            continue
        flag = "dadfailed" if state & DADFAILED else "tentative" if state & TENTATIVE else ""
        if flag:
            found.append(f"{name} {address}/{int(prefix, 16)} {flag}")
    return found


def namespace_unsettled(namespace: str | None, only: str | None = None) -> list[str]:
    """unsettled_inet6 of a lab namespace, or of this host's own (None), where IPv6 is on at all."""
    if namespace is None:
        return unsettled_inet6(_read(Path("/proc/net/if_inet6")), only) if Path("/proc/net/if_inet6").exists() else []
    with inside(namespace):
        text = _read(PROC_NET / "if_inet6") if (PROC_NET / "if_inet6").exists() else ""
    return unsettled_inet6(text, only)


# --- one ICMP echo ---------------------------------------------------------------------------------

def answers(namespace: str, source: str, target: str, timeout_s: float = 1.0) -> bool:
    """One echo from `source` (bound: the rule for its per-NIC table applies, as `ping -I address`)
    to `target` in the namespace, and whether the target answered within the timeout. A raw socket
    sees every ICMP packet of its namespace, so the answer is matched by peer, identifier and
    sequence number (random, so concurrent pings in one namespace never take each other's)."""
    ident, sequence = secrets.randbits(16), secrets.randbits(16)
    payload = b"gpunet lab ready"
    with inside(namespace):
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    with sock:
        try:
            sock.bind((source, 0))
            sock.sendto(_echo(ident, sequence, payload), (target, 0))
        except OSError as exc:
            if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL, errno.EINVAL):
                return False
            raise
        return _reply_within(sock, target, ident, sequence, time.monotonic() + timeout_s)


def _reply_within(sock: socket.socket, target: str, ident: int, sequence: int, deadline: float) -> bool:
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([sock], [], [], left)[0]:
            return False
        packet, (peer, _) = sock.recvfrom(4096)
        header = (packet[0] & 0x0F) * 4  # raw IPv4 sockets get the IP header too
        if peer == target and len(packet) >= header + 8:
            kind, _, _, got_ident, got_sequence = struct.unpack("!BBHHH", packet[header:header + 8])
            if kind == ICMP_ECHO_REPLY and (got_ident, got_sequence) == (ident, sequence):
                return True
    return False


def _echo(ident: int, sequence: int, payload: bytes) -> bytes:
    unsummed = struct.pack("!BBHHH", ICMP_ECHO, 0, 0, ident, sequence) + payload
    return struct.pack("!BBHHH", ICMP_ECHO, 0, _checksum(unsummed), ident, sequence) + payload


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return int(~total & 0xFFFF)
