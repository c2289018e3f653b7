"""Probes along the paths of fixed UDP 5-tuples, for `gpunet localize` and doctor: run on a node as
`python -m gpunet.node.paths MODE`, the work as JSON on stdin, the result as JSON on stdout.
Standard library only, no root needed.

* trace: for each flow (a fixed UDP 5-tuple), the hops of its path, Paris-traceroute style: the
  same ports at every TTL so ECMP hashes every probe onto the same path; hops answer through the
  socket's error queue (IP_RECVERR), the destination with port-unreachable (nothing listens yet).
* send: each flow's packets, paced, then an end mark to every destination.
* serve: counts the packets that arrive, per source address and port, until every expected
  source has sent its end mark (or the time is up).
* mtu: one packet of the given size per flow with Don't Fragment; a hop that cannot forward it
  says so (ICMP fragmentation needed), naming itself and its MTU."""

from __future__ import annotations

import contextlib
import errno
import json
import select
import socket
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

IP_RECVERR = 11  # linux/in.h
IP_MTU_DISCOVER = 10
IP_PMTUDISC_PROBE = 3  # set DF, ignore the route's cached path MTU: probe it
ICMP_TIME_EXCEEDED = 11
ICMP_UNREACHABLE = 3
ICMP_PORT_UNREACHABLE = 3
ICMP_FRAG_NEEDED = 4
SO_EE_ORIGIN_ICMP = 2
EXTENDED_ERR = struct.Struct("=IBBBBII")  # struct sock_extended_err
MEASURE, TRACE, END = b"M", b"T", b"E"


@dataclass
class Flow:
    flow: int
    src: str
    dst: str
    sport: int
    dport: int


@dataclass
class IcmpError:
    kind: int
    code: int
    offender: str
    info: int  # the next-hop MTU for fragmentation needed
    payload: bytes


def open_flow(flow: Flow) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((flow.src, flow.sport))
    sock.connect((flow.dst, flow.dport))
    sock.setsockopt(socket.SOL_IP, IP_RECVERR, 1)
    sock.setblocking(False)
    return sock


def wait_for_any(sockets: list[socket.socket], timeout: float) -> bool:
    """Until one socket has data or a queued error (poll: no FD_SETSIZE limit, unlike select)."""
    poller = select.poll()
    for sock in sockets:
        poller.register(sock, select.POLLIN | select.POLLERR)
    return bool(poller.poll(timeout * 1000))


def read_errors(sock: socket.socket) -> list[IcmpError]:
    found: list[IcmpError] = []
    while True:
        try:
            payload, ancdata, _, _ = sock.recvmsg(2048, 512, socket.MSG_ERRQUEUE)
        except (BlockingIOError, InterruptedError):
            return found
        except OSError:
            return found
        for level, kind, data in ancdata:
            if level == socket.SOL_IP and kind == IP_RECVERR and len(data) >= EXTENDED_ERR.size + 8:
                _, origin, icmp_type, code, _, info, _ = EXTENDED_ERR.unpack_from(data)
                if origin == SO_EE_ORIGIN_ICMP:
                    offender = socket.inet_ntoa(data[EXTENDED_ERR.size + 4:EXTENDED_ERR.size + 8])
                    found.append(IcmpError(icmp_type, code, offender, info, payload))


PACE_S = 0.01  # a retry's probes from one source address: 100/s, what a switch's ICMP limit refills at


def trace(flows: list[Flow], max_hops: int, last: dict[int, list[str]] | None = None, tries: int = 4, *,
          wait: float = 0.25, pace: float = PACE_S) -> dict[int, dict[str, Any]]:
    """Per flow: hops (addresses by TTL, "" where none answered), whether the destination did, and
    how many of its hops answered only when asked again. `last` gives, per flow, the addresses of
    the switch before its destination: once one answers, the path is whole. One TTL at a time on
    every flow's socket (an ICMP error pending on a socket fails its next send). The first round
    goes out at once; a hop that stayed silent is asked again paced, each source address at most
    once per `pace` seconds, as a switch that rate-limits its TTL-expired answers (a real switch
    does) can answer; a hop silent through every try is left "", never guessed."""
    tracer = _Tracer(flows, max_hops, last)
    try:
        for attempt in range(tries):
            for ttl in range(1, max_hops + 1):
                tracer.round(ttl, attempt, wait=wait, pace=pace)
    finally:
        tracer.close()
    return tracer.result()


class _Tracer:
    def __init__(self, flows: list[Flow], max_hops: int, last: dict[int, list[str]] | None) -> None:
        self.sockets = {f.flow: open_flow(f) for f in flows}
        self.max_hops = max_hops
        self.hops: dict[int, dict[int, str]] = {f.flow: {} for f in flows}
        self.retried: dict[int, int] = dict.fromkeys(self.sockets, 0)
        self.reached: dict[int, int] = {}
        self.ends = {fid: set(addresses) for fid, addresses in (last or {}).items()}
        self.source = {f.flow: f.src for f in flows}

    def whole(self, fid: int) -> int:
        """The TTL past which nothing is left to learn."""
        answered = [t for t, a in self.hops[fid].items() if a in self.ends.get(fid, ())]
        return min([self.reached.get(fid, self.max_hops + 1), *(t + 1 for t in answered)])

    def round(self, ttl: int, attempt: int, *, wait: float, pace: float) -> None:
        waiting = [fid for fid in self.sockets if ttl not in self.hops[fid] and ttl < self.whole(fid)]
        if not waiting:
            return
        if attempt:
            waiting = _interleaved(waiting, self.source)
        gap = pace / len({self.source[f] for f in waiting}) if attempt else 0.0
        for fid in waiting:
            for error in _probe(self.sockets[fid], ttl):
                _note(error, fid, self.hops, self.reached)
            time.sleep(gap)
        _collect({fid: self.sockets[fid] for fid in waiting}, self.hops, self.reached, wait, ttl)
        for fid in waiting:
            self.retried[fid] += bool(attempt) and ttl in self.hops[fid]

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()

    def result(self) -> dict[int, dict[str, Any]]:
        return {fid: {"hops": [self.hops[fid].get(t, "") for t in range(1, self.whole(fid))],
                      "reached": fid in self.reached, "retried": self.retried[fid]} for fid in self.sockets}


def _interleaved(flows: list[int], source: dict[int, str]) -> list[int]:
    """The flows, source addresses taken in turn: each source's probes spread over the round."""
    by_source: dict[str, list[int]] = {}
    for fid in flows:
        by_source.setdefault(source[fid], []).append(fid)
    queues = list(by_source.values())
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def _probe(sock: socket.socket, ttl: int) -> list[IcmpError]:
    """Send one probe; the errors of earlier probes read on the way (a pending one fails a send)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
    errors: list[IcmpError] = []
    for _ in range(2):
        try:
            sock.send(TRACE + bytes([ttl]))
            break
        except OSError:
            errors += read_errors(sock)
    return errors


def _note(error: IcmpError, fid: int, hops: dict[int, dict[int, str]], reached: dict[int, int]) -> None:
    ttl = error.payload[1] if len(error.payload) > 1 and error.payload[:1] == TRACE else 0
    if not ttl:
        return
    if error.kind == ICMP_TIME_EXCEEDED:
        hops[fid][ttl] = error.offender
    elif error.kind == ICMP_UNREACHABLE and error.code == ICMP_PORT_UNREACHABLE:
        reached[fid] = min(ttl, reached.get(fid, ttl))


def _collect(sockets: dict[int, socket.socket], hops: dict[int, dict[int, str]], reached: dict[int, int],
             wait: float, ttl: int) -> None:
    """Read the sockets' error queues until each answered `ttl` or `wait` has passed (errors
    arrive as POLLERR)."""
    deadline = time.monotonic() + wait
    pending = dict(sockets)
    while pending and time.monotonic() < deadline:
        wait_for_any(list(pending.values()), max(0.0, min(0.05, deadline - time.monotonic())))
        for fid, sock in list(pending.items()):
            for error in read_errors(sock):
                _note(error, fid, hops, reached)
            if ttl in hops[fid] or reached.get(fid, ttl + 1) <= ttl:
                del pending[fid]


def send(flows: list[Flow], packets: int, rate: float, size: int) -> dict[int, int]:
    """`packets` per flow, round-robin over the flows at `rate` packets per second in all; then
    five end marks to each destination. Returns what each flow sent."""
    sockets = {f.flow: open_flow(f) for f in flows}
    sent: Counter[int] = Counter()
    body = b"\0" * max(0, size - 1)
    gap = 1.0 / rate if rate > 0 else 0.0
    start = time.monotonic()
    count = 0
    try:
        for _ in range(packets):
            for fid, sock in sockets.items():
                try:
                    sock.send(MEASURE + body)
                    sent[fid] += 1
                except OSError:
                    read_errors(sock)
                count += 1
                ahead = start + count * gap - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        time.sleep(0.05)
        for flow in {(f.src, f.dst): f for f in flows}.values():  # every source address, to each receiver
            for _ in range(5):
                with contextlib.suppress(OSError):
                    sockets[flow.flow].send(END + flow.src.encode())
            time.sleep(0.002)
    finally:
        for sock in sockets.values():
            sock.close()
    return dict(sent)


def serve(port: int, sources: list[str], seconds: float) -> dict[str, Any]:
    """Counts measurement packets per "source:port" until every source sent its end mark; says
    "ready" on stderr once listening, so senders start only then."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 2**20)
    sock.bind(("0.0.0.0", port))
    print("ready", file=sys.stderr, flush=True)
    counts: Counter[str] = Counter()
    ended: set[str] = set()
    deadline = time.monotonic() + seconds
    grace = None
    while time.monotonic() < deadline and (grace is None or time.monotonic() < grace):
        if not wait_for_any([sock], 0.1):
            continue
        data, (address, sport) = sock.recvfrom(65535)
        if data[:1] == MEASURE:
            counts[f"{address}:{sport}"] += 1
        elif data[:1] == END:
            ended.add(data[1:].decode(errors="replace"))
            if ended >= set(sources) and grace is None:
                grace = time.monotonic() + 0.2  # late packets of the last flows
    sock.close()
    return {"counts": dict(counts), "ended": sorted(ended)}


def mtu(flows: list[Flow], size: int, tries: int = 3, wait: float = 0.3) -> dict[int, dict[str, Any]]:
    """Per flow: a hop that refused a `size`-byte packet with DF (its address and MTU, and the
    flow's source port: a trace of the same 5-tuple takes the same path), or {}. A port-unreachable
    from the destination means the packet arrived whole: that flow is done."""
    sockets = {f.flow: open_flow(f) for f in flows}
    ports = {fid: sock.getsockname()[1] for fid, sock in sockets.items()}
    for sock in sockets.values():
        sock.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_PROBE)
    refused: dict[int, dict[str, Any]] = {}
    arrived: set[int] = set()
    payload = TRACE + bytes([0]) + b"\0" * max(0, size - 28 - 2)  # 28: the IPv4 and UDP headers
    try:
        for _ in range(tries):
            waiting = {fid: sock for fid, sock in sockets.items() if fid not in refused and fid not in arrived}
            if not waiting:
                break
            for fid, sock in waiting.items():
                _send_big(sock, payload, fid, refused, arrived)
            _await_refusals(waiting, refused, arrived, wait)
    finally:
        for sock in sockets.values():
            sock.close()
    return {f.flow: {**refused[f.flow], "sport": ports[f.flow]} if f.flow in refused else {} for f in flows}


def _send_big(sock: socket.socket, payload: bytes, fid: int, refused: dict[int, dict[str, Any]],
              arrived: set[int]) -> None:
    for _ in range(2):
        try:
            sock.send(payload)
            return
        except OSError as exc:
            if exc.errno == errno.EMSGSIZE:  # this host's own interface is smaller
                refused[fid] = {"hop": "", "mtu": 0, "local": str(exc)}
                return
            _sort_errors(read_errors(sock), fid, refused, arrived)  # an earlier answer is pending: read it


def _await_refusals(sockets: dict[int, socket.socket], refused: dict[int, dict[str, Any]], arrived: set[int],
                    wait: float) -> None:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and any(f not in refused and f not in arrived for f in sockets):
        wait_for_any(list(sockets.values()), 0.05)
        for fid, sock in sockets.items():
            _sort_errors(read_errors(sock), fid, refused, arrived)


def _sort_errors(errors: list[IcmpError], fid: int, refused: dict[int, dict[str, Any]], arrived: set[int]) -> None:
    for error in errors:
        if error.kind == ICMP_UNREACHABLE and error.code == ICMP_FRAG_NEEDED:
            refused[fid] = {"hop": error.offender, "mtu": error.info}
        elif error.kind == ICMP_UNREACHABLE and error.code == ICMP_PORT_UNREACHABLE:
            arrived.add(fid)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    work = json.load(sys.stdin)
    flows = [Flow(**f) for f in work.get("flows", [])]
    if mode == "trace":
        last = {int(fid): addresses for fid, addresses in work.get("last", {}).items()}
        result: Any = trace(flows, int(work["max_hops"]), last)
    elif mode == "send":
        result = send(flows, int(work["packets"]), float(work["rate"]), int(work.get("size", 64)))
    elif mode == "serve":
        result = serve(int(work["port"]), list(work["sources"]), float(work["seconds"]))
    elif mode == "mtu":
        result = mtu(flows, int(work["size"]))
    else:
        raise SystemExit("usage: python -m gpunet.node.paths trace|send|serve|mtu < work.json")
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
