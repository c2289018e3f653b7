"""Active probes from this node to its peers on every plane: ping, a don't-fragment ping at the
plane MTU, and TCP connects to the ports the Plan needs (a refusal proves the path is open; a
timeout means something drops it). Bounded: one packet each, a short timeout, in parallel."""

from __future__ import annotations

import errno
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from gpunet.model.plan import Interface, Node, Plan
from gpunet.runner import CommandRunner, run_local

NCCL_PROBE_PORT = 45871  # an ephemeral-range port nothing listens on: NCCL/MPI's kind of port
NFS_PORT = 2049
ICMP_IP_HEADERS = 28


@dataclass(frozen=True)
class PeerProbe:
    kind: str  # ping | pmtu | tcp
    peer: str
    plane: str
    source: str
    target: str
    port: int = 0
    size: int = 0


@dataclass(frozen=True)
class PeerResult:
    probe: PeerProbe
    ok: bool
    detail: str


def plan_probes(plan: Plan, node: Node) -> list[PeerProbe]:
    """Every peer on every plane this node shares with it, from this node's address there; the
    management gateway; and a duplicate-address probe of each of this node's addresses."""
    mine: dict[str, Interface] = {i.plane: i for i in node.interfaces if i.address and i.plane != "oob"}
    probes: list[PeerProbe] = [PeerProbe("dad", node.name, i.plane, i.name, _ip(i))
                               for i in node.interfaces if i.address and i.plane != "oob" and i.master is None]
    gateway = next((p.gateway for p in plan.planes if p.name == "management"), None)
    if gateway and "management" in mine:
        probes.append(PeerProbe("gateway", "gateway", "management", _ip(mine["management"]), gateway))
    for peer in (n for n in plan.nodes if n.name != node.name):
        for theirs in (i for i in peer.interfaces if i.address and i.plane in mine):
            probes += _probes_to(peer, mine[theirs.plane], theirs)
    return probes


def _probes_to(peer: Node, mine: Interface, theirs: Interface) -> list[PeerProbe]:
    source, target = _ip(mine), _ip(theirs)
    probes = [PeerProbe("ping", peer.name, theirs.plane, source, target),
              PeerProbe("pmtu", peer.name, theirs.plane, source, target, size=mine.mtu - ICMP_IP_HEADERS)]
    port = {"management": 22, "compute": NCCL_PROBE_PORT}.get(theirs.plane, 0)
    if theirs.plane == "storage" and peer.role == "storage":
        port = NFS_PORT  # clients must reach the storage servers' protocol port
    if port:
        probes.append(PeerProbe("tcp", peer.name, theirs.plane, source, target, port=port))
    return probes


def _ip(iface: Interface) -> str:
    assert iface.address is not None
    return iface.address.split("/")[0]


def run_probes(probes: list[PeerProbe], run: CommandRunner = run_local, timeout: float = 2.0) -> list[PeerResult]:
    with ThreadPoolExecutor(max_workers=32) as pool:
        return list(pool.map(lambda p: _run_one(p, run, timeout), probes))


def _run_one(probe: PeerProbe, run: CommandRunner, timeout: float) -> PeerResult:
    if probe.kind == "tcp":
        return _connect(probe, timeout)
    if probe.kind == "dad":
        return _duplicate(probe, run, timeout)
    size = ["-M", "do", "-s", str(probe.size)] if probe.kind == "pmtu" else []
    done = run(["ping", "-n", "-q", "-c", "1", "-W", str(max(1, round(timeout))), "-I", probe.source, *size,
                "--", probe.target], check=False, timeout=timeout + 5)
    detail = (done.stdout + done.stderr).strip().splitlines()
    return PeerResult(probe, done.returncode == 0, detail[-1] if detail else "")


def _duplicate(probe: PeerProbe, run: CommandRunner, timeout: float) -> PeerResult:
    """arping -D: duplicate address detection on the link (source is the interface here)."""
    done = run(["arping", "-D", "-c", "2", "-w", str(max(2, round(timeout))), "-I", probe.source, "--", probe.target],
               check=False, timeout=timeout + 5)
    if done.returncode == 127 or "not found" in done.stderr:
        return PeerResult(probe, True, "arping not installed: not checked")
    replies = [line for line in done.stdout.splitlines() if line.startswith("Unicast reply")]
    return PeerResult(probe, done.returncode == 0, replies[0] if replies else "no other host answers for it")


def _connect(probe: PeerProbe, timeout: float) -> PeerResult:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.bind((probe.source, 0))
            code = sock.connect_ex((probe.target, probe.port))
        except OSError as exc:
            return PeerResult(probe, False, str(exc))
    if code in (0, errno.ECONNREFUSED):
        return PeerResult(probe, True, "open" if code == 0 else "refused: reachable, nothing listening")
    return PeerResult(probe, False, "timed out: dropped on the way" if code in (errno.EAGAIN, errno.ETIMEDOUT,
                                                                                 errno.EINPROGRESS)
                      else errno.errorcode.get(code, str(code)))
