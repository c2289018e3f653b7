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
CLONE_NEWUTS = 0x04000000
MS_BIND = 4096
NAMESPACE = re.compile(r"gn[a-z0-9]{1,4}-[A-Za-z0-9._-]{1,64}")  # the lab's own names only
PROC_NET = Path("/proc/thread-self/net")
PROC_SYS = Path("/proc/sys")
PER_INTERFACE = ("net.ipv4.conf.", "net.ipv6.conf.", "net.ipv4.neigh.", "net.ipv6.neigh.")
TCP_LISTEN = 10
NETLINK_ROUTE, NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY = 0, 4, 20
RTM_NEWROUTE, RTM_GETROUTE = 24, 26
RT_TABLE_MAIN, RTN_UNICAST = 254, 1
RTA_DST, RTA_MULTIPATH, RTA_TABLE = 1, 9, 15
RTNH_F_DEAD, RTNH_F_LINKDOWN = 0x1, 0x10  # a next hop the kernel does not forward by
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TENTATIVE, DADFAILED = 0x40, 0x08  # IFA_F_* in /proc/net/if_inet6's flags column
ICMP_ECHO, ICMP_ECHO_REPLY = 8, 0
NOT_ANSWERED = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EHOSTDOWN, errno.EADDRNOTAVAIL, errno.EINVAL,
                errno.EPERM, errno.EACCES, errno.ENOBUFS}  # no route yet, the address not up yet, a firewall
ECHO_TIMEOUT_S = 0.5  # a lab answers in milliseconds; one not answered yet is asked again next round
MAX_PROC_BYTES = 1 << 22  # a lab namespace's socket or address table: a few kB; read no further

_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int, kind: int = CLONE_NEWNET) -> None:
    if int(_libc.setns(fd, kind)) != 0:
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


def pin_hostname(file: Path, hostname: str) -> None:
    """A UTS namespace of its own named `hostname`, kept by a bind mount of it on `file` (an empty
    file), as `unshare --uts=FILE hostname NAME` makes one, from this thread: unshare(2) gives the
    thread alone a new UTS namespace, which it names, pins and leaves again."""
    home = os.open("/proc/thread-self/ns/uts", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _checked(_libc.unshare(CLONE_NEWUTS), "unshare(CLONE_NEWUTS)")
        try:
            name = hostname.encode()
            _checked(_libc.sethostname(name, len(name)), f"sethostname {hostname!r}")
            _checked(_libc.mount(b"/proc/thread-self/ns/uts", os.fsencode(file), None, MS_BIND, None),
                     f"mount --bind of a UTS namespace on {file}")
        finally:
            _back(home, CLONE_NEWUTS)
    finally:
        os.close(home)


def _checked(result: int, what: str) -> None:
    if int(result) != 0:
        code = ctypes.get_errno()
        raise LabError(f"{what}: {os.strerror(code)}")


def _back(home: int, kind: int = CLONE_NEWNET) -> None:
    try:
        _setns(home, kind)
    except OSError as exc:  # never seen: the thread would go on in the lab's namespace, so stop here
        raise SystemExit(f"gpunet: could not return a thread to its own namespace: {exc}") from exc


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
    """(address, port) of every listening TCP socket in the namespace, IPv4 and IPv6, asked of the
    kernel's sock_diag as `ss -lt` asks it: a dump of listeners only walks the listening table
    (/proc/net/tcp walks every connection of the machine for each namespace read: 6 ms each).
    Parsed by `diag_listeners`."""
    with inside(namespace):
        diag = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
    with diag:
        diag.settimeout(10)
        found = set()
        for family in (socket.AF_INET, socket.AF_INET6):
            diag.send(_listeners_request(family))
            found |= diag_listeners(_dump(diag))
    return found


def _listeners_request(family: int) -> bytes:
    """nlmsghdr + inet_diag_req_v2 (family, TCP, no extensions, states = LISTEN only, any socket)."""
    request = struct.pack("=BBBxI48x", family, socket.IPPROTO_TCP, 0, 1 << TCP_LISTEN)
    return struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + request


def _dump(diag: socket.socket) -> bytes:
    """The dump's messages, up to NLMSG_DONE (bounded: a namespace's listeners are a handful)."""
    messages = bytearray()
    while len(messages) < MAX_PROC_BYTES:
        chunk = diag.recv(1 << 16)
        if not chunk:
            break
        messages += chunk
        if _last_type(chunk) in (NLMSG_DONE, NLMSG_ERROR):
            break
    return bytes(messages)


def _last_type(chunk: bytes) -> int:
    offset, kind = 0, -1
    while offset + 16 <= len(chunk):
        length, kind = struct.unpack_from("=IH", chunk, offset)
        offset += max(16, (length + 3) & ~3)
    return kind


def diag_listeners(messages: bytes) -> set[tuple[str, int]]:
    """(address, port) of the inet_diag_msg records in a sock_diag answer that are listening; a
    record cut short or of another type is skipped, an error message raises LabError."""
    found = set()
    for kind, body in _netlink_messages(messages, "sock_diag refused the dump"):
        if kind != SOCK_DIAG_BY_FAMILY or len(body) < 24:
            continue
        family, state, port = body[0], body[1], struct.unpack_from(">H", body, 4)[0]
        size = 4 if family == socket.AF_INET else 16
        if state == TCP_LISTEN and family in (socket.AF_INET, socket.AF_INET6):
            found.add((str(ipaddress.ip_address(body[8:8 + size])), port))
    return found


def _netlink_messages(messages: bytes, refused: str) -> Iterator[tuple[int, bytes]]:
    """(type, body) of each whole message of a netlink answer; one cut short ends it (nothing after
    it is whole either); an error message with a non-zero code raises LabError("<refused>: why")."""
    offset = 0
    while offset + 16 <= len(messages):
        length, kind = struct.unpack_from("=IH", messages, offset)
        if length < 16 or offset + length > len(messages):
            return
        body = messages[offset + 16:offset + length]
        offset += (length + 3) & ~3
        code = struct.unpack_from("=i", body)[0] if kind == NLMSG_ERROR and len(body) >= 4 else 0
        if code != 0:  # -errno; INT_MIN has no errno (strerror would overflow)
            raise LabError(f"{refused}: {os.strerror(-code) if code > -(1 << 31) else f'error {code}'}")
        yield kind, body


def route_widths(namespace: str) -> dict[str, int]:
    """prefix -> the next hops the kernel forwards by, for each IPv4 unicast route of the
    namespace's main table, asked of rtnetlink as `ip route` asks (a 256-server lab's leaf holds
    hundreds of ECMP routes: FRR's `show ip route json` of them is 800 kB per switch, seconds of
    CPU to write and read for every look). Parsed by `kernel_route_widths`."""
    with inside(namespace):
        rtnl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
    with rtnl:
        rtnl.settimeout(10)
        rtnl.send(_routes_request())
        return kernel_route_widths(_dump(rtnl))


def _routes_request() -> bytes:
    """nlmsghdr + rtmsg asking for every IPv4 route (the table is picked from the answer)."""
    request = struct.pack("=BBBBBBBBI", socket.AF_INET, 0, 0, 0, 0, 0, 0, 0, 0)
    return struct.pack("=IHHII", 16 + len(request), RTM_GETROUTE, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + request


def kernel_route_widths(messages: bytes) -> dict[str, int]:
    """prefix ("198.18.4.17/32") -> next hops not dead nor link-down, of the RTM_NEWROUTE records
    of an rtnetlink route dump that are IPv4 unicast routes of the main table (the widest where a
    prefix has several). LabError for an error answer, or a dump that does not end (cut short at
    the read bound: what is missing would read as routes not there)."""
    widths: dict[str, int] = {}
    ended = False
    for kind, body in _netlink_messages(messages, "rtnetlink refused the route dump"):
        ended = ended or kind == NLMSG_DONE
        route = _unicast_route(body) if kind == RTM_NEWROUTE else None
        if route is not None:
            widths[route[0]] = max(route[1], widths.get(route[0], 0))
    if not ended:
        raise LabError(f"the route dump did not end within {len(messages)} bytes")
    return widths


def _unicast_route(body: bytes) -> tuple[str, int] | None:
    """(prefix, width) of one rtmsg and its attributes; None for another family, table or type."""
    if len(body) < 12:
        return None
    family, dst_len, _, _, table, _, _, kind, flags = struct.unpack_from("=BBBBBBBBI", body)
    attributes = dict(_attributes(body, 12))
    if RTA_TABLE in attributes and len(attributes[RTA_TABLE]) >= 4:
        table = struct.unpack_from("=I", attributes[RTA_TABLE])[0]
    destination = attributes.get(RTA_DST, b"\0\0\0\0" if dst_len == 0 else b"")
    if family != socket.AF_INET or table != RT_TABLE_MAIN or kind != RTN_UNICAST or dst_len > 32 \
            or len(destination) != 4:
        return None
    prefix = f"{ipaddress.IPv4Address(destination)}/{dst_len}"
    if RTA_MULTIPATH in attributes:
        return prefix, _live_next_hops(attributes[RTA_MULTIPATH])
    return prefix, 0 if flags & (RTNH_F_DEAD | RTNH_F_LINKDOWN) else 1


def _records(data: bytes, offset: int, header: int) -> Iterator[tuple[int, int]]:
    """(start, length) of each record from `offset` that begins with its 16-bit length, covering at
    least its `header` bytes, and is padded to 4 (an rtattr, an rtnexthop); one cut short ends the list."""
    while offset + header <= len(data):
        length = struct.unpack_from("=H", data, offset)[0]
        if length < header or offset + length > len(data):
            return
        yield offset, length
        offset += (length + 3) & ~3


def _attributes(data: bytes, offset: int) -> Iterator[tuple[int, bytes]]:
    """(type, payload) of each rtattr (length, type, payload) from `offset`."""
    for start, length in _records(data, offset, 4):
        yield struct.unpack_from("=H", data, start + 2)[0], data[start + 4:start + length]


def _live_next_hops(multipath: bytes) -> int:
    """rtnexthop records (length, flags, hops, ifindex) of an RTA_MULTIPATH that the kernel forwards by."""
    return sum(not multipath[start + 2] & (RTNH_F_DEAD | RTNH_F_LINKDOWN) for start, _ in _records(multipath, 0, 8))


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

def answers(namespace: str, source: str, target: str, timeout_s: float = ECHO_TIMEOUT_S) -> bool:
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
            if exc.errno in NOT_ANSWERED:
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
