"""Options every `fleet` command shares: which nodes, how to reach them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from ClusterShell.NodeSet import NodeSet

from gpunet.errors import UsageError
from gpunet.fleet import ClusterShellRunner
from gpunet.model.plan import Plan

NodesArg = Annotated[str, typer.Argument(help="NodeSet: gpu[001-032],login01; with a plan or lab also "
                                              "@role:gpu, @leaf:NAME, @rail:N, @plane:NAME, @GROUP.")]
LabOpt = Annotated[str | None, typer.Option("--lab", help="This lab's servers (ip netns exec).")]
SshLabOpt = Annotated[str | None, typer.Option(
    "--ssh-lab", help="SSH to this lab's servers with the lab key (the real SSH path).")]
PlanOpt = Annotated[Path | None, typer.Option("--plan", help="Connect to each node's management address.")]
UserOpt = Annotated[str | None, typer.Option("--user", help="SSH user.")]
KeyOpt = Annotated[Path | None, typer.Option("--key", help="SSH private key.")]
FanoutOpt = Annotated[int, typer.Option(help="Connections at once.")]
ConnectTimeoutOpt = Annotated[float, typer.Option(
    "--connect-timeout", help="Seconds to wait for each node's SSH connection (a dead node costs this much).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def reach(nodes: str, *, lab: str | None, ssh_lab: str | None, plan: Path | None, user: str | None,
          key: Path | None, fanout: int = 64, timeout: float = 600,
          connect_timeout: float = 10) -> tuple[NodeSet, ClusterShellRunner]:
    """The nodes a NodeSet names and the runner that reaches them (bad input: exit 2)."""
    from gpunet import api

    if not 0 < connect_timeout <= 3600:
        raise UsageError(f"--connect-timeout {connect_timeout}: above 0 and at most 3600 seconds")
    wanted = api.fleet_nodes(nodes, plan=plan, lab=lab or ssh_lab)
    runner = api.fleet_runner(lab=lab, ssh_lab=ssh_lab, plan=plan, user=user, key=key, fanout=fanout,
                              timeout=timeout)
    return wanted, replace(runner, connect_timeout=connect_timeout)


def plan_of(plan: Path | None, lab: str | None) -> Plan | None:
    """The plan the nodes were named against: a lab's own (lab addresses), or --plan."""
    from gpunet import api
    from gpunet.lab.state import lab_dir

    source = lab_dir(lab) / "plan.json" if lab else plan
    return api.load_plan(source) if source else None
