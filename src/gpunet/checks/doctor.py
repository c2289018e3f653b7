"""One node's doctor: probe it, probe its peers, run every check. Kept free of the design,
lab, bench and monitor packages, so `gpunet doctor` starts in the time of what it uses."""

from __future__ import annotations

import socket
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from gpunet.checks import Context, Finding, run_checks
from gpunet.errors import UsageError
from gpunet.model.plan import Node, Plan
from gpunet.model.state import NodeState
from gpunet.probe.node import probe_node
from gpunet.probe.peers import PEERS_WAIT_S, PeerResult, expected_probes, listen_for_peers, plan_probes, run_probes
from gpunet.runner import CommandRunner, run_local


def doctor_node(
    plan: Plan | None, node_name: str | None, *, peers: bool, interval: float,
    run: CommandRunner = run_local, root: Path = Path("/"), listen: bool = False,
    listening: frozenset[str] = frozenset(), skip_peers: frozenset[str] = frozenset(),
    nccl_log: Path | None = None,
) -> tuple[NodeState, list[Finding]]:
    """Probe this node, compare it with the Plan (when given), optionally probe its peers. With
    `listen` (doctor --fleet --peers sets it on every node), this node listens on the ports of the
    flows it accepts while it runs and until the peers doing the same in this run (`listening`,
    whose refusals count as blocks) have probed it. `skip_peers` are not probed (apply's
    verification leaves out the nodes changing in its own batch: each is judged on its own node, and
    a probe of one whose change broke it would only wait out its timeout). `nccl_log`: an
    NCCL_DEBUG=INFO log of a job on this node, for the checks of what NCCL used (GPUDirect RDMA,
    CollNet/SHARP)."""
    name = node_name or socket.gethostname()
    node = plan.node(name) if plan else None
    if plan is not None and node is None:
        raise UsageError(f"{name!r} is not a node of the plan; name it with --node")
    hostnames = [i.hostname for n in plan.nodes for i in n.interfaces if i.hostname] if plan else []
    probes = [p for p in plan_probes(plan, node) if p.peer not in skip_peers] if peers and plan and node else []
    quiet = [p for p in probes if p.kind != "tcp"]  # no TCP segment: run while the counters are sampled
    results: list[PeerResult] = []
    with _listener(plan, node, listening, skip_peers, interval) if listen else nullcontext():
        state = probe_node(run, root, hostnames, interval,
                           meanwhile=lambda: results.extend(run_probes(quiet, run, listening=listening)),
                           nccl_log=nccl_log)
        results += run_probes([p for p in probes if p.kind == "tcp"], run, listening=listening)
    return state, run_checks(Context(state=state, plan=plan, node=node, peer_results=results))


def _listener(plan: Plan | None, node: Node | None, listening: frozenset[str], skip_peers: frozenset[str],
              interval: float) -> AbstractContextManager[object]:
    """Listening until this run's peers have sent every probe they will send here (the same probe
    generation they run), or PEERS_WAIT_S beyond the interval: a peer still probing when this node
    is done must not find its ports closed, which would read as a firewall's refusal."""
    if plan is None or node is None:
        return nullcontext()
    return listen_for_peers(plan, node, expected_probes(plan, node, listening, skip_peers), interval + PEERS_WAIT_S)
