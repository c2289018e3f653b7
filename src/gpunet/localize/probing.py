"""Path-aware probing of a routed plane: pick node pairs across leaves, give each pair enough
source ports that every equal-cost uplink carries probes, learn each flow's path (the probe
agent's trace), count each flow's losses (send and serve), and turn the hops into the Plan's
cables. The blame itself is tomography.blame, a pure function.

Hops name cables by the address of the port the probe came in on (a switch answering from its
inbound port: the lab sets icmp_errors_use_inbound_ifaddr). A hop that names no known port, or a
path that does not follow the Plan's cables, leaves its flow out: it is counted, never guessed."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gpunet.errors import LabError
from gpunet.fabric.cabling import cable_name
from gpunet.fabric.observed import End, cables_by_end
from gpunet.localize.tomography import PathSample, candidates
from gpunet.model.flows import PROBE_PORT
from gpunet.model.plan import Link, Plan

NodeCommand = Callable[[str, Sequence[str]], list[str]]  # (node, argv) -> the argv that runs it there
FIRST_SOURCE_PORT = 40000
AGENT = (sys.executable, "-m", "gpunet.node.paths")
AGENT_FILE = Path(__file__).resolve().parents[1] / "node" / "paths.py"  # standard library only (a test says so)


@dataclass(frozen=True)
class Endpoint:
    node: str
    interface: str
    address: str
    leaf: str
    cable: Link


@dataclass(frozen=True)
class ProbeFlow:
    flow: int
    src: Endpoint
    dst: Endpoint
    sport: int

    def agent(self) -> dict[str, Any]:
        return {"flow": self.flow, "src": self.src.address, "dst": self.dst.address, "sport": self.sport,
                "dport": PROBE_PORT}


@dataclass(frozen=True)
class ProbeSettings:
    flows_per_pair: int = 12
    packets: int = 60  # per flow
    rate: float = 3000.0  # packets per second per sending node: far below every lab link's shaped rate
    size: int = 64  # bytes of UDP payload
    seconds: float = 45.0  # the most a receiver waits for its senders
    follow_up_links: int = 6  # after the sweep, the links that best explain its losses ...
    follow_up_factor: int = 4  # ... get this many times the packets again, on every flow through them


@dataclass
class TraceStats:
    retried: int = 0  # hop answers that came only when asked again, paced: a rate-limiting switch
    silent: int = 0  # flows with a hop that stayed silent through every try: cannot tell


@dataclass
class PlaneProbe:
    plane: str
    flows: int = 0
    learned: int = 0  # flows whose whole path was learned
    samples: list[PathSample] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)  # cables some learned flow crossed
    cables: set[str] = field(default_factory=set)  # the plane's cables
    notes: list[str] = field(default_factory=list)
    mtu: int = 0  # the plane's, the size the path-MTU sweep sent
    trace: TraceStats = field(default_factory=TraceStats)
    too_big: dict[str, list[str]] = field(default_factory=dict)  # cable -> the refusals that name it


class HopMap:
    """A hop's address -> the switch port it answered from, and the cable there."""

    def __init__(self, plan: Plan, ports: Mapping[str, End], devices: Mapping[str, str]) -> None:
        self.ports = dict(ports)  # addresses of switch ports
        self.device_of = {**devices, **{address: end.device for address, end in ports.items()}}
        self.cable_at = cables_by_end(plan)

    def path(self, flow: ProbeFlow, hops: Sequence[str]) -> tuple[str, ...] | None:
        """The cables a flow crossed, or None when its hops do not follow the Plan's cables."""
        answered = list(hops)
        while answered and not answered[-1]:
            answered.pop()
        if not answered or "" in answered or self.device_of.get(answered[0]) != flow.src.leaf:
            return None  # the first hop answers from a port with no address of its own: its device is enough
        cables = [flow.src.cable]
        device = flow.src.leaf
        for address in answered[1:]:
            end = self.ports.get(address)
            link = self.cable_at.get(end) if end else None
            if end is None or link is None or device not in (link.a.device, link.b.device):
                return None
            cables.append(link)
            device = end.device
        if device != flow.dst.leaf:
            return None
        cables.append(flow.dst.cable)
        return tuple(cable_name(c) for c in cables)


def endpoints(plan: Plan, plane: str) -> list[Endpoint]:
    """Every addressed, cabled node interface of the plane, under its leaf."""
    cable_at = {(link.a.device, link.a.port): link for link in plan.links if link.tier == "node_leaf"}
    found = []
    for node in plan.nodes:
        for iface in node.interfaces:
            link = cable_at.get((node.name, iface.name))
            if iface.plane == plane and iface.address and link is not None:
                found.append(Endpoint(node.name, iface.name, iface.address.split("/")[0], link.b.device, link))
    return found


def pairs(found: Sequence[Endpoint]) -> list[tuple[Endpoint, Endpoint]]:
    """Each endpoint sends to one on another leaf, leaves taken in turn so every leaf sends to and
    receives from several others; on a one-leaf plane, to the next endpoint. Linear: the leaf is
    picked by position among the others (a million endpoints over 12 000 leaves listed every other
    leaf per endpoint), the peer among that leaf's endpoints skipping only the sender's own."""
    by_leaf: dict[str, list[Endpoint]] = defaultdict(list)
    for endpoint in found:
        by_leaf[endpoint.leaf].append(endpoint)
    leaves = sorted(by_leaf)
    position = {leaf: i for i, leaf in enumerate(leaves)}
    nodes_on = {leaf: {e.node for e in on} for leaf, on in by_leaf.items()}
    chosen = []
    for index, endpoint in enumerate(found):
        if len(leaves) > 1:
            k = index % (len(leaves) - 1)  # the k-th of the leaves other than the sender's
            leaf = leaves[k if k < position[endpoint.leaf] else k + 1]
            candidates = by_leaf[leaf]
            if endpoint.node in nodes_on[leaf]:
                candidates = [e for e in candidates if e.node != endpoint.node] or candidates
            chosen.append((endpoint, candidates[index % len(candidates)]))
        elif len(found) > 1:
            chosen.append((endpoint, found[(index + 1) % len(found)]))
    return chosen


def make_flows(chosen: Sequence[tuple[Endpoint, Endpoint]], per_pair: int, first_id: int = 0,
               first_port: int = FIRST_SOURCE_PORT) -> list[ProbeFlow]:
    flows: list[ProbeFlow] = []
    for number, (src, dst) in enumerate(chosen):
        for k in range(per_pair):
            flows.append(ProbeFlow(first_id + len(flows), src, dst, first_port + number * per_pair + k))
    return flows


def shipped_agent(command: NodeCommand, python: str = "python3") -> NodeCommand:
    """Probing nodes that need not have gpunet: the agent's one file is sent as `python3 -c`, so
    the agent that probes is this gpunet's, whatever the node has installed."""
    source = AGENT_FILE.read_text(encoding="utf-8")

    def on_node(node: str, argv: Sequence[str]) -> list[str]:
        if tuple(argv[:len(AGENT)]) == AGENT:
            return command(node, [python, "-I", "-c", source, *argv[len(AGENT):]])  # -I: the node's env aside
        return command(node, argv)

    return on_node


def run_agents(command: NodeCommand, mode: str, work: Mapping[str, dict[str, Any]], timeout: float
               ) -> dict[str, Any]:
    """One agent per node, all at once; their JSON results by node. A failed agent raises."""
    processes = {node: subprocess.Popen(command(node, [*AGENT, mode]), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for node in work}
    results = {}
    for node, process in processes.items():
        out, err = process.communicate(json.dumps(work[node]), timeout=timeout)
        if process.returncode != 0:
            raise LabError(f"probe agent ({mode}) on {node} exited {process.returncode}: {err.strip()[-300:]}")
        results[node] = json.loads(out)
    return results


def trace_paths(command: NodeCommand, flows: Sequence[ProbeFlow], hop_map: HopMap, max_hops: int,
                stats: TraceStats | None = None) -> dict[int, tuple[str, ...]]:
    by_node = _by_source(flows)
    leaf_addresses: dict[str, list[str]] = defaultdict(list)
    for address, device in hop_map.device_of.items():
        leaf_addresses[device].append(address)
    work = {node: {"flows": [f.agent() for f in fl], "max_hops": max_hops,
                   "last": {str(f.flow): leaf_addresses[f.dst.leaf] for f in fl}} for node, fl in by_node.items()}
    traced = run_agents(command, "trace", work, timeout=120)
    index = {f.flow: f for f in flows}
    paths = {}
    for result in traced.values():
        for fid, answer in result.items():
            if stats is not None:
                stats.retried += int(answer.get("retried", 0))
                stats.silent += "" in answer["hops"]
            path = hop_map.path(index[int(fid)], answer["hops"])
            if path is not None:
                paths[int(fid)] = path
    return paths


READY_LINES = 50  # what a node's shell or ssh may print on stderr before the agent says it listens


def until_ready(stderr: IO[str]) -> str | None:
    """None once the receiver says "ready"; else what it said instead. Lines before it are a real
    node's noise (a login script's warning, ssh's own notices), not a failure."""
    seen = []
    for _ in range(READY_LINES):
        line = stderr.readline()
        if not line:
            break
        if line.strip() == "ready":
            return None
        seen.append(line)
    return "".join(seen)


def measure(command: NodeCommand, flows: Sequence[ProbeFlow], settings: ProbeSettings) -> dict[int, tuple[int, int]]:
    """(sent, lost) per flow: receivers first (each says when it listens), then the senders."""
    to_node: dict[str, set[str]] = defaultdict(set)
    for f in flows:
        to_node[f.dst.node].add(f.src.address)
    receivers = {node: subprocess.Popen(command(node, [*AGENT, "serve"]), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for node in to_node}
    try:
        for node, process in receivers.items():
            assert process.stdin is not None and process.stderr is not None
            process.stdin.write(json.dumps({"port": PROBE_PORT, "sources": sorted(to_node[node]),
                                            "seconds": settings.seconds}))
            process.stdin.close()
            process.stdin = None  # written and closed: communicate() below only reads
            said = until_ready(process.stderr)
            if said is not None:
                raise LabError(f"probe receiver on {node} did not start: {said[-300:]}")
        work = {node: {"flows": [f.agent() for f in fl], "packets": settings.packets, "rate": settings.rate,
                       "size": settings.size} for node, fl in _by_source(flows).items()}
        sent = {int(fid): n for result in run_agents(command, "send", work, timeout=settings.seconds).values()
                for fid, n in result.items()}
        counts: dict[str, int] = {}
        for node, process in receivers.items():
            out, err = process.communicate(timeout=settings.seconds + 10)
            if process.returncode != 0:
                raise LabError(f"probe receiver on {node} exited {process.returncode}: {err.strip()[-300:]}")
            counts |= json.loads(out)["counts"]
    finally:
        for process in receivers.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return {f.flow: (sent.get(f.flow, 0), max(0, sent.get(f.flow, 0) - counts.get(f"{f.src.address}:{f.sport}", 0)))
            for f in flows}


def _by_source(flows: Sequence[ProbeFlow]) -> dict[str, list[ProbeFlow]]:
    by_node: dict[str, list[ProbeFlow]] = defaultdict(list)
    for f in flows:
        by_node[f.src.node].append(f)
    return dict(by_node)


def _follow_up(command: NodeCommand, learned: Sequence[ProbeFlow], paths: Mapping[int, tuple[str, ...]],
               samples: Sequence[PathSample], settings: ProbeSettings) -> list[PathSample]:
    """Targeted probes: more packets on every flow through the links that best explain the losses
    seen, so a low drop rate gets enough evidence and links the sweep left tied get told apart."""
    suspects = set(candidates(samples, settings.follow_up_links))
    chosen = [f for f in learned if suspects & set(paths[f.flow])]
    if not chosen:
        return []
    closer = dataclasses.replace(settings, packets=settings.packets * settings.follow_up_factor)
    measured = measure(command, chosen, closer)
    return [PathSample(paths[f.flow], *measured[f.flow], confirming=True) for f in chosen]


def mtu_sweep(plan: Plan, command: NodeCommand, flows: Sequence[ProbeFlow], paths: Mapping[int, tuple[str, ...]],
              *, hop_map: HopMap, size: int) -> tuple[dict[str, list[str]], list[str]]:
    """One plane-MTU packet with Don't Fragment on every learned flow (its own 5-tuple, so its
    own path): a hop that cannot forward it names itself and its next-hop MTU, and the flow's
    learned path says which cable it could not send into. Cable -> what refused there; notes."""
    work = {node: {"flows": [f.agent() for f in fl], "size": size} for node, fl in _by_source(flows).items()}
    answers = {int(fid): r for result in run_agents(command, "mtu", work, timeout=60).values()
               for fid, r in result.items() if r}
    links = {cable_name(link): link for link in plan.links}
    index = {f.flow: f for f in flows}
    found: dict[str, list[str]] = defaultdict(list)
    local: set[str] = set()
    for fid, refused in answers.items():
        flow, hop = index[fid], str(refused.get("hop", ""))
        if not hop:
            local.add(f"{flow.src.node}:{flow.src.interface}")
            continue
        device = hop_map.device_of.get(hop, "")
        cable = egress(links, paths[fid], flow.src.node, device)
        if cable is not None:
            found[cable].append(f"{device} refused a {size}-byte packet with Don't Fragment (next-hop MTU "
                                f"{refused.get('mtu')}) on flow {flow.src.node} -> {flow.dst.node} sport {flow.sport}")
    notes = [f"{len(local)} interface(s) refused a {size}-byte packet before it left, e.g. {sorted(local)[0]}: "
             "their own MTU is below the plane's (gpunet doctor, check GN-MTU-01)"] if local else []
    return dict(found), notes


def egress(links: Mapping[str, Link], path: Sequence[str], source: str, device: str) -> str | None:
    """The cable of `path` (cable names from `source` on) that leaves `device`."""
    here = source
    for name in path:
        link = links.get(name)
        if link is None:
            return None
        ends = (link.a.device, link.b.device)
        if here == device and here in ends:
            return name
        here = ends[1] if ends[0] == here else ends[0]
    return None


MIN_PROBES_PER_UPLINK = 8  # flows expected through each switch-to-switch cable, each way counted once
MAX_FLOWS_PER_PAIR = 64


def flows_per_pair(plan: Plan, plane: str, pairs_count: int, least: int) -> int:
    """Enough source ports that every switch-to-switch cable expects MIN_PROBES_PER_UPLINK flows
    (each flow crosses about two): a plane with few endpoints and many uplinks (storage) gets more
    per pair than the default."""
    uplinks = sum(1 for link in plan.links if link.plane == plane and link.tier != "node_leaf")
    if not pairs_count:
        return least
    wanted = -(-MIN_PROBES_PER_UPLINK * uplinks // (2 * pairs_count))  # ceiling division
    return max(least, min(MAX_FLOWS_PER_PAIR, wanted))


def plane_cables(plan: Plan, plane: str) -> set[str]:
    return {cable_name(link) for link in plan.links if link.plane == plane}


def probe_plane(plan: Plan, plane: str, command: NodeCommand, hop_map: HopMap, *, settings: ProbeSettings,
                max_hops: int) -> PlaneProbe:
    found = endpoints(plan, plane)
    result = PlaneProbe(plane, cables=plane_cables(plan, plane))
    chosen = pairs(found)
    flows = make_flows(chosen, flows_per_pair(plan, plane, len(chosen), settings.flows_per_pair))
    if not flows:
        result.notes.append(f"{plane}: fewer than two addressed endpoints, nothing to probe")
        return result
    stats = result.trace
    paths = trace_paths(command, flows, hop_map, max_hops, stats)
    learned = [f for f in flows if f.flow in paths]
    measured = measure(command, learned, settings) if learned else {}
    result.flows, result.learned = len(flows), len(learned)
    for f in learned:
        sent, lost = measured[f.flow]
        result.samples.append(PathSample(paths[f.flow], sent, lost))
        result.covered.update(paths[f.flow])
    result.samples += _follow_up(command, learned, paths, result.samples, settings)
    result.mtu = next((p.mtu for p in plan.planes if p.name == plane), 0)
    if learned and result.mtu:
        result.too_big, notes = mtu_sweep(plan, command, learned, paths, hop_map=hop_map,
                                                size=result.mtu)
        result.notes += notes
    if stats.retried:
        result.notes.append(f"{plane}: {stats.retried} hop answer(s) came only when asked again, paced: switches "
                            "rate-limit their TTL-expired answers (ICMP rate limits)")
    if stats.silent:
        result.notes.append(f"{plane}: {stats.silent} probe flow(s) had a hop that stayed silent through every "
                            "paced try (rate-limited, or not answering): cannot tell, left out, never blamed")
    if len(learned) < len(flows):
        result.notes.append(f"{plane}: the paths of {len(flows) - len(learned)} of {len(flows)} probe flows were not "
                            "learned (a hop did not answer or named no planned port); those flows are left out")
    return result
