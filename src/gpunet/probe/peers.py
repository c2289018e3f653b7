"""Active probes from this node to its peers on every plane: ping, a don't-fragment ping at the
plane MTU, and a connection to each port the Plan's flows need from this node (a real connect on the
flow's own port). Bounded: one packet each, a short timeout, in parallel.

Whether a refused connection means "blocked" depends on the other end: with nothing listening, a
closed port and a firewall's REJECT look the same. `doctor --fleet --peers` makes every node listen
on the ports of the flows it accepts while the others probe (listen_for_peers()), so there a refusal is a
finding; a single node's `doctor --peers` says it cannot tell."""

from __future__ import annotations

import errno
import re
import resource
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv4Network

from gpunet.model.flows import PROBE_PORT, Flow, sample_ports
from gpunet.model.nodeset import parse_nodeset
from gpunet.model.plan import Interface, Node, Plan
from gpunet.node import paths
from gpunet.runner import CommandRunner, run_local

ICMP_IP_HEADERS = 28
PATHS_PER_PEER = 32  # source ports per peer and plane: with 16 uplinks, each is hit with odds of 1 - (15/16)**32
# Multi-path probes at once, each with PATHS_PER_PEER sockets: all of an 8-server plane's together,
# fewer where the file limit is low (256 descriptors kept for everything else).
MULTIPATH_AT_ONCE = threading.BoundedSemaphore(
    max(1, min(16, (resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 256) // PATHS_PER_PEER)))
# The destination answers at most ~6 port-unreachables at once (icmp_ratelimit), so most source
# ports never hear "arrived"; a refusal (fragmentation needed) is exempt from that limit and comes
# back within a round trip. Two sends, each given this long, bound the wait for the silent ones.
MULTIPATH_TRIES, MULTIPATH_WAIT_S = 2, 0.4
DAD_WAIT_S = 1  # arping -D sends its two probes within this (its interval is whole seconds)
REFUSED_RETRIES = 10  # a peer's listener starts with its doctor: seconds later on a busy host
TIMED_OUT = (errno.EAGAIN, errno.ETIMEDOUT, errno.EINPROGRESS)
# ping's words for a packet refused for its size: a hop's ICMP fragmentation-needed, or this host's own
# interface ("local error" where the interface is smaller than the packet)
PING_REFUSED = re.compile(r"^From (?P<hop>[0-9.]{7,15}) icmp_seq=\d+ Frag needed and DF set \(mtu = (?P<mtu>\d{1,6})\)"
                          r"|local error: message too long, mtu=(?P<local>\d{1,6})", re.IGNORECASE | re.MULTILINE)
RETRY_AFTER_S = 1.0  # a lost echo or SYN is tried once more after this (a neighbour entry being resolved)
LINGER_S = 3.0  # listeners stay this long after the last probe they waited for (a peer's retry may follow)
# Listeners wait at most this long, from their start and beyond the counter interval, for the probes
# this run's peers will send (expected_probes): a peer's doctor starts over SSH, samples its counters
# for the interval, then connects 32 at a time with up to REFUSED_RETRIES retries each. A peer that
# died, or a firewall that drops or rejects a probe, ends the wait here; with LINGER_S it stays well
# inside the fleet's per-node limit (api/doctor.py FLEET_TIMEOUT_S, 120 s beyond the interval).
PEERS_WAIT_S = 60.0


@dataclass(frozen=True)
class PeerProbe:
    kind: str  # ping | pmtu | tcp | udp | dad | gateway
    peer: str
    plane: str
    source: str
    target: str
    port: int = 0
    size: int = 0
    service: str = ""  # the flow a tcp/udp probe stands for


@dataclass(frozen=True)
class Refusal:
    """A hop that refused a packet for its size, and the path of the flow it refused (hop
    addresses by TTL, "" where none answered): the hop after it is the far end of the cable."""

    hop: str
    mtu: int
    path: tuple[str, ...] = ()


@dataclass(frozen=True)
class PeerResult:
    probe: PeerProbe
    ok: bool | None  # None: the probe cannot tell (a refusal where nobody was asked to listen)
    detail: str
    refusals: tuple[Refusal, ...] = ()  # pmtu: where and on which paths a packet was too big


def plan_probes(plan: Plan, node: Node) -> list[PeerProbe]:
    """Every peer on every plane this node shares with it, from this node's address there; the
    flows it opens, to each of their receivers; the management gateway; and a duplicate-address
    probe of each of this node's addresses."""
    mine = _own_addresses(node)
    probes: list[PeerProbe] = [PeerProbe("dad", node.name, i.plane, i.name, _ip(i))
                               for i in node.interfaces if i.address and i.plane != "oob" and i.master is None]
    gateway = next((p.gateway for p in plan.planes if p.name == "management"), None)
    if gateway and "management" in mine:
        probes.append(PeerProbe("gateway", "gateway", "management", _ip(mine["management"]), gateway))
    for peer in (n for n in plan.nodes if n.name != node.name):
        for theirs in (i for i in peer.interfaces if i.address and i.plane in mine):
            source, target = _ip(mine[theirs.plane]), _ip(theirs)
            probes += [PeerProbe("ping", peer.name, theirs.plane, source, target),
                       PeerProbe("pmtu", peer.name, theirs.plane, source, target,
                                 size=mine[theirs.plane].mtu - ICMP_IP_HEADERS)]
    return probes + flow_probes(plan, node, mine)


def flow_probes(plan: Plan, node: Node, mine: dict[str, Interface]) -> list[PeerProbe]:
    """A connection for each flow this node opens, to each receiver, on the flow's first sample port."""
    probes = []
    for position, flow in enumerate(plan.flows):
        if not _opens(plan, position, mine):
            continue
        for peer in (plan.node(name) for name in parse_nodeset(flow.to_nodes) if name != node.name):
            probe = _flow_probe(flow, mine, peer) if peer is not None else None
            probes += [probe] if probe is not None else []
    return probes


def expected_probes(plan: Plan, node: Node, senders: frozenset[str],
                    skip_peers: frozenset[str] = frozenset()) -> frozenset[PeerProbe]:
    """The tcp/udp probes the `senders`' doctors send to this node (each runs flow_probes with its
    own addresses): the same steps, for the flows this node accepts. No probe where the senders are
    told to leave this node out (`skip_peers`), as their doctors then do."""
    if node.name in skip_peers:
        return frozenset()
    accepted = {id(flow) for flow in plan.inbound_flows.get(node.name, [])}
    expected = set()
    for sender in (plan.node(name) for name in sorted(senders) if name != node.name):
        mine = _own_addresses(sender) if sender is not None else {}
        for position, flow in enumerate(plan.flows):
            probe = _flow_probe(flow, mine, node) if id(flow) in accepted and _opens(plan, position, mine) else None
            expected |= {probe} if probe is not None else set()
    return frozenset(expected)


def _own_addresses(node: Node) -> dict[str, Interface]:
    """plane -> the interface a node probes from there (out-of-band management is not probed)."""
    return {i.plane: i for i in node.interfaces if i.address and i.plane != "oob"}


def _opens(plan: Plan, position: int, mine: dict[str, Interface]) -> bool:
    """Whether a node with these addresses opens the flow: it has receivers, and the node an address
    on its plane that is one of its sources."""
    flow = plan.flows[position]
    return bool(flow.to_nodes) and flow.plane in mine and _sends(plan, position, _ip(mine[flow.plane]))


def _flow_probe(flow: Flow, mine: dict[str, Interface], peer: Node) -> PeerProbe | None:
    """The connection from these addresses to the peer for the flow, if the peer has an address on its plane."""
    theirs = next((i for i in peer.interfaces if i.plane == flow.plane and i.address), None)
    if theirs is None:
        return None
    protocol = "tcp" if flow.protocol == "any" else flow.protocol
    return PeerProbe(protocol, peer.name, flow.plane, _ip(mine[flow.plane]), _ip(theirs),
                     port=sample_ports(flow)[0], service=flow.service)


def _sends(plan: Plan, position: int, address: str) -> bool:
    """Whether the flow comes from this address: one of its nodes', or inside its ranges (not
    "anywhere": the way in is probed from outside, not from every node)."""
    sources = plan.flow_sources[position]
    return sources != ("0.0.0.0/0",) and any(IPv4Address(address) in IPv4Network(s) for s in sources)


def _ip(iface: Interface) -> str:
    assert iface.address is not None
    return iface.address.split("/")[0]


def run_probes(probes: list[PeerProbe], run: CommandRunner = run_local, timeout: float = 2.0,
               listening: frozenset[str] = frozenset()) -> list[PeerResult]:
    """Every probe, 32 at a time. `listening`: the peers whose doctor listens on their flows' ports
    in this same run (doctor --fleet --peers), where a refused connection is a block."""
    with ThreadPoolExecutor(max_workers=32) as pool:
        return list(pool.map(lambda p: _run_one(p, run, timeout, p.peer in listening), probes))


def _run_one(probe: PeerProbe, run: CommandRunner, timeout: float, peer_listens: bool) -> PeerResult:
    if probe.kind in ("tcp", "udp"):
        return _connect(probe, timeout, peer_listens)
    if probe.kind == "dad":
        return _duplicate(probe, run, timeout)
    result = _ping(probe, run, timeout)
    if not result.ok and _ping_refusal(result.detail) is None:
        time.sleep(RETRY_AFTER_S)  # one lost echo is noise on a busy host, not a fault (a refusal is not)
        result = _ping(probe, run, timeout)
    if probe.kind == "pmtu":
        return _path_mtu(probe, result, timeout)
    return result


def _path_mtu(probe: PeerProbe, ping: PeerResult, timeout: float) -> PeerResult:
    """Every path is probed whether the ping passed or not: the ping's own path may be the one with
    the small MTU (which path ICMP takes depends on the addresses and the fabric's hash seed), and
    then its last line says only that it failed, where the multi-path probe names the hop and its
    MTU. A ping that failed while no path refused the size fails on its own words (lost, unreachable)."""
    refused_ping = None if ping.ok else _ping_refusal(ping.detail)
    every = _every_path_mtu(probe, timeout, refused_ping)
    if ping.ok or every.ok is False:
        return every
    return ping


def _ping_refusal(output: str) -> str | None:
    """Where ping's output says its packet was refused for its size: "HOP (next-hop MTU N)"."""
    found = PING_REFUSED.search(output)
    if found is None:
        return None
    if found["local"]:  # the kernel refused it before it left: its interface, or a hop's refusal it keeps
        return f"this host (next-hop MTU {found['local']}: its own interface's, or a path MTU it cached from a hop)"
    return f"{found['hop']} (next-hop MTU {found['mtu']})"


def _every_path_mtu(probe: PeerProbe, timeout: float, refused_ping: str | None = None) -> PeerResult:
    """The ping takes one of the equal-cost paths (ICMP hashes on addresses alone); plane-MTU UDP
    packets with Don't Fragment from PATHS_PER_PEER source ports take the others. A hop that
    cannot forward one says so (fragmentation needed), naming itself and its MTU. `refused_ping`:
    where the ping itself was refused, as "HOP (next-hop MTU N)"."""
    size = probe.size + ICMP_IP_HEADERS
    flows = [paths.Flow(n, probe.source, probe.target, 0, PROBE_PORT) for n in range(PATHS_PER_PEER)]
    try:
        with MULTIPATH_AT_ONCE:
            refused = {fid: r for fid, r in paths.mtu(flows, size, tries=MULTIPATH_TRIES,
                                                      wait=min(timeout, MULTIPATH_WAIT_S)).items() if r}
    except OSError as exc:
        refused, unsent = {}, f"multi-path probe not sent: {exc}"
    else:
        unsent = ""
    hops = {f"{r['hop'] or 'this host'} (next-hop MTU {r['mtu']})" for r in refused.values()}
    hops |= {refused_ping} if refused_ping else set()
    if not hops:
        return (PeerResult(probe, None, unsent) if unsent else
                PeerResult(probe, True, f"{size}-byte packets passed on {PATHS_PER_PEER} source ports (paths)"))
    who = f"{len(refused)} of {PATHS_PER_PEER} source ports (equal-cost paths)" + (" and the ping" * bool(refused_ping))
    where = ", ".join(sorted(hops))
    return PeerResult(probe, False, f"{who} refused {size}-byte packets: fragmentation needed at {where}",
                      _traced(probe, refused))


TRACE_HOPS = 8  # leaf, spine, core and back down, with room: a refusing hop is found long before


def _traced(probe: PeerProbe, refused: dict[int, dict[str, object]]) -> tuple[Refusal, ...]:
    """One refused flow per refusing hop traced with its own 5-tuple (small packets pass the cable
    that refused the big ones), so the hop after the refuser says which cable was too small."""
    chosen = {str(r["hop"]): r for r in refused.values() if r.get("hop")}
    flows = [paths.Flow(n, probe.source, probe.target, int(str(r["sport"])), PROBE_PORT)
             for n, r in enumerate(chosen.values()) if r.get("sport")]  # no port: no path to retrace
    try:
        traced = paths.trace(flows, TRACE_HOPS, tries=2) if flows else {}
    except OSError:
        traced = {}
    return tuple(Refusal(hop, int(str(r["mtu"])), tuple(traced.get(n, {}).get("hops", ())))
                 for n, (hop, r) in enumerate(chosen.items()))


def _ping(probe: PeerProbe, run: CommandRunner, timeout: float) -> PeerResult:
    # not quiet for the path MTU, so a hop's fragmentation-needed line is in the output (-M probe, which
    # would not stop at a path MTU cached from an earlier refusal, is not in every iputils: 20221126 lacks it)
    size = ["-M", "do", "-s", str(probe.size)] if probe.kind == "pmtu" else ["-q"]
    done = run(["ping", "-n", "-c", "1", "-W", str(max(1, round(timeout))), "-I", probe.source, *size,
                "--", probe.target], check=False, timeout=timeout + 5)
    output = done.stdout + done.stderr
    refusal = PING_REFUSED.search(output)
    if done.returncode != 0 and refusal is not None:  # the words that say where, not the summary line
        return PeerResult(probe, False, refusal[0])
    detail = output.strip().splitlines()
    return PeerResult(probe, done.returncode == 0, detail[-1] if detail else "")


def _duplicate(probe: PeerProbe, run: CommandRunner, timeout: float) -> PeerResult:
    """arping -D: duplicate address detection on the link (source is the interface here)."""
    done = run(["arping", "-D", "-c", "2", "-w", str(DAD_WAIT_S), "-I", probe.source, "--", probe.target],
               check=False, timeout=timeout + 5)
    if done.returncode == 127 or "not found" in done.stderr:
        return PeerResult(probe, True, "arping not installed: not checked")
    replies = [line for line in done.stdout.splitlines() if line.startswith("Unicast reply")]
    return PeerResult(probe, done.returncode == 0, replies[0] if replies else "no other host answers for it")


def _connect(probe: PeerProbe, timeout: float, peer_listens: bool) -> PeerResult:
    """A connection on the flow's port: open passes, a timeout is a drop; a refusal is a block when
    the peer listens there (fleet), else it cannot tell a closed port from a firewall's REJECT."""
    code = _retried(probe, timeout, peer_listens)
    if code == 0:
        return PeerResult(probe, True, "open")
    if code == errno.ECONNREFUSED:
        if peer_listens:
            return PeerResult(probe, False, "refused while the peer listens there: a firewall rejects it")
        return PeerResult(probe, None, "refused: reachable, but nothing listens, so a closed port and a firewall's "
                                       "REJECT look the same (doctor --fleet --peers makes every peer listen)")
    if code not in TIMED_OUT:
        return PeerResult(probe, False, errno.errorcode.get(code, str(code)))
    if probe.kind == "udp" and not peer_listens:  # a closed port's ICMP answer may be rate-limited away
        return PeerResult(probe, None, "no answer, and nothing was asked to echo: a drop cannot be told from "
                                       "silence (doctor --fleet --peers makes every peer echo)")
    return PeerResult(probe, False, "timed out: dropped on the way")


def _retried(probe: PeerProbe, timeout: float, peer_listens: bool) -> int:
    """The attempt's errno, after one more try on a timeout and, where the peer listens, up to
    REFUSED_RETRIES more on a refusal (its listener may not be up yet)."""
    code = _attempt(probe, timeout)
    if code in TIMED_OUT and (probe.kind == "tcp" or peer_listens):  # else silence tells nothing, twice
        time.sleep(RETRY_AFTER_S)
        code = _attempt(probe, timeout)
    for _ in range(REFUSED_RETRIES if peer_listens else 0):
        if code != errno.ECONNREFUSED:
            break
        time.sleep(RETRY_AFTER_S)
        code = _attempt(probe, timeout)
    return code


def _attempt(probe: PeerProbe, timeout: float) -> int:
    """0 for an open port (tcp connected, or udp answered), else an errno."""
    kind = socket.SOCK_STREAM if probe.kind == "tcp" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.settimeout(timeout)
        try:
            sock.bind((probe.source, 0))
            if probe.kind == "tcp":
                return sock.connect_ex((probe.target, probe.port))
            sock.connect((probe.target, probe.port))  # connected: a closed port's ICMP error arrives as ECONNREFUSED
            sock.send(b"gpunet")
            sock.recv(16)
            return 0
        except TimeoutError:
            return errno.ETIMEDOUT
        except OSError as exc:
            return exc.errno or errno.EIO


@contextmanager
def listen_for_peers(plan: Plan, node: Node, expected: frozenset[PeerProbe] = frozenset(),
                     wait_s: float = PEERS_WAIT_S) -> Iterator[int]:
    """Listen on the sample ports of every flow this node accepts (tcp: accept and close; udp:
    echo), on its address of the flow's plane, while the body runs; then until each `expected`
    probe (expected_probes(): what this run's peers will send here) has arrived at least once, or
    `wait_s` after the listening began, whichever is first; then LINGER_S more. A peer that finishes
    last must still find its listeners: one that stopped would make its refusal read as a firewall's.
    Yields the number of sockets. A port some service already holds (sshd on 22) answers for itself,
    so a probe of it is not waited for."""
    deadline = time.monotonic() + wait_s
    sockets = list(_bound(plan, node))
    ours = {(kind, sock.getsockname()) for sock, kind in sockets}
    arrivals = _Arrivals({(p.kind, p.source, (p.target, p.port)) for p in expected
                          if (p.kind, (p.target, p.port)) in ours})
    stop = threading.Event()
    threads = [threading.Thread(target=_serve, args=(sock, kind, stop, arrivals), daemon=True)
               for sock, kind in sockets]
    for thread in threads:
        thread.start()
    try:
        yield len(sockets)
        arrivals.all_seen.wait(max(0.0, deadline - time.monotonic()))
        time.sleep(LINGER_S)
    finally:
        stop.set()
        for sock, _ in sockets:
            sock.close()


Arrival = tuple[str, str, tuple[str, int]]  # protocol, the sender's address, this node's (address, port)


class _Arrivals:
    """The probes still awaited; `all_seen` is set once none is (at once where none was expected)."""

    def __init__(self, awaited: set[Arrival]) -> None:
        self.awaited = awaited
        self.lock = threading.Lock()
        self.all_seen = threading.Event()
        if not awaited:
            self.all_seen.set()

    def seen(self, arrival: Arrival) -> None:
        with self.lock:
            self.awaited.discard(arrival)
            if not self.awaited:
                self.all_seen.set()


def _bound(plan: Plan, node: Node) -> Iterator[tuple[socket.socket, str]]:
    for flow in plan.inbound_flows.get(node.name, []):
        local = next((i for i in node.interfaces if i.plane == flow.plane and i.address), None)
        protocol = "tcp" if flow.protocol == "any" else flow.protocol
        for port in sample_ports(flow) if local and local.address else ():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM if protocol == "tcp" else socket.SOCK_DGRAM)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((str(IPv4Interface(local.address).ip), port))  # type: ignore[union-attr]
                if protocol == "tcp":
                    sock.listen(64)
                sock.settimeout(0.2)
            except OSError:
                sock.close()
                continue
            yield sock, protocol


def _serve(sock: socket.socket, kind: str, stop: threading.Event, arrivals: _Arrivals) -> None:
    local = sock.getsockname()
    while not stop.is_set():
        try:
            if kind == "tcp":
                connection, peer = sock.accept()
                connection.close()
            else:
                data, peer = sock.recvfrom(64)
                sock.sendto(data, peer)
        except (TimeoutError, OSError):
            continue
        arrivals.seen((kind, peer[0], local))
