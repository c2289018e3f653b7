"""`gpunet doctor` and `gpunet probe`: the troubleshooting checklist on this node against the Plan,
or on many nodes with their findings folded.

The one-node doctor imports only what it uses (the checks, the probe layer, a plan.json reader):
the rest of gpunet would double its start-up, and `doctor --peers` is meant to cost little more
than its interval. The fleet doctor and a spec to design are imported when asked for.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from gpunet.checks import Finding
from gpunet.checks.doctor import doctor_node
from gpunet.errors import UsageError
from gpunet.model.io import read_plan
from gpunet.model.nodeset import NodeSetError, parse_nodeset
from gpunet.model.plan import Plan
from gpunet.model.state import NodeState
from gpunet.probe.node import probe_node

if TYPE_CHECKING:
    from gpunet.fleet.doctor import FleetDoctorReport

__all__ = ["Finding", "FleetDoctorReport", "NodeState", "doctor", "fleet_doctor", "probe"]

FLEET_TIMEOUT_S = 120  # per node, beyond the counter interval


def doctor(plan: Path | None, node: str | None, *, peers: bool, interval: float, listen: bool = False,
           listening: str = "", skip_peers: str = "", nccl_log: Path | None = None) -> tuple[NodeState, list[Finding]]:
    """Every applicable check on this node (`node`: its name in the plan, default its hostname);
    with `peers`, every peer pinged and connected to on every plane, except `skip_peers`; with
    `nccl_log`, what a job's NCCL_DEBUG=INFO log says it used (GPUDirect RDMA, SHARP, HCAs)."""
    return doctor_node(_plan(plan), node, peers=peers, interval=interval, listen=listen,
                       listening=_names(listening), skip_peers=_names(skip_peers), nccl_log=nccl_log)


def _plan(source: Path | None) -> Plan | None:
    if source is None:
        return None
    if source.suffix == ".json":
        return read_plan(source)
    from gpunet.spec.plan import plan_of  # a spec is designed first

    return plan_of(source)


def _names(nodeset: str) -> frozenset[str]:
    try:
        return frozenset(parse_nodeset(nodeset)) if nodeset else frozenset()
    except NodeSetError as exc:
        raise UsageError(str(exc)) from None


def probe(interval: float) -> NodeState:
    """This node as it is: links, addresses, routes, bonds, InfiniBand, counters, settings."""
    return probe_node(interval=interval)


def fleet_doctor(nodes: str, *, lab: str | None, plan: Path | None, user: str | None, key: Path | None,
                 remote_plan: str | None, peers: bool, interval: float, prefix: str | None = None) -> FleetDoctorReport:
    """`gpunet doctor --json` on every node (a lab's servers over SSH, or nodes at the Plan's
    management addresses), findings folded across nodes. Each node runs `fleet install`'s venv under
    PREFIX (default /opt/gpunet; in a lab, under the server's own tree) when it is there, else its
    own Python's gpunet; a node whose gpunet is missing or another version than this one is named
    with the `fleet install` command that fixes it."""
    from gpunet.api.fleet import reach
    from gpunet.fleet import FleetResult
    from gpunet.fleet.doctor import doctor_command, fold_doctor
    from gpunet.fleet.node_gpunet import DEFAULT_PREFIX, install_command
    from gpunet.fleet.steps import run_each

    where = prefix or DEFAULT_PREFIX
    wanted, reached = reach(nodes, lab=lab, plan=plan, user=user, key=key, timeout=FLEET_TIMEOUT_S + interval)
    def command(gpunet: list[str]) -> list[str]:
        return doctor_command(gpunet, remote_plan or reached.remote_plan(), peers, interval, str(wanted))

    outcomes = run_each(reached.runner(), {n: command(reached.gpunet_argv(n, where)) for n in wanted},
                        timeout=FLEET_TIMEOUT_S + interval)
    result = FleetResult(command=shlex.join(command(["gpunet"])), outcomes=outcomes)
    return fold_doctor(result, fix=lambda folded: install_command(folded, reached.cli_words(), where))
