"""Reach: the one place that knows how to get at machines.

A `Reach` is built once from a command's options — a lab (its servers through `ip netns exec`, or
over real SSH with the lab's key), an InfiniBand simulator, real nodes over SSH at the Plan's
management addresses, or this host — and hands the views what they need: the Plan those machines
are named in, a runner for many nodes, an argv for one, callables for the fabric's own devices.
Lab ids, namespace names, key paths and the lab's stand-ins live here and in `lab/`, nowhere else:
no view imports `lab/` to find a namespace (DESIGN.md, "Reach").
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from ClusterShell.NodeSet import NodeSet

from gpunet.errors import UsageError
from gpunet.fabric.counters import EthPortErrors
from gpunet.fleet import ClusterShellRunner, FleetResult, lab_runner
from gpunet.fleet.groups import resolve_nodes
from gpunet.fleet.node_gpunet import launch_argv
from gpunet.lab.access import (
    COUNTERS_NOTE,
    DeviceRun,
    apply_paths,
    device_runners,
    hop_addresses,
    lab_key,
    lab_plan_path,
    node_argv,
)
from gpunet.lab.access import switch_counters as lab_switch_counters
from gpunet.lab.ibsim import run_tool, sim_plan
from gpunet.lab.ibsim_topology import SIM_SPEED_CAP
from gpunet.lab.lldp_lab import ensure_lldp
from gpunet.lab.state import LabState, check_id, lab_dir, read_state
from gpunet.model.io import read_plan
from gpunet.model.nodeset import describe
from gpunet.model.plan import Plan
from gpunet.model.types import USER
from gpunet.runner import run_local
from gpunet.spec.plan import plan_of

Kind = Literal["lab", "ibsim", "ssh", "here"]
Transport = Literal["exec", "ssh"]
LAB_SSH_OPTIONS = ("-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR")
REMOTE_PLAN = "/etc/gpunet/plan.json"  # where the plan sits on real nodes for `doctor --fleet` and apply


@dataclass(frozen=True)
class Reach:
    """How this command gets at the machines it names; see the module docstring."""

    kind: Kind = "here"
    lab: str | None = None  # kind "lab": the lab id; kind "ibsim": the simulator id
    transport: Transport = "exec"  # kind "lab": ip netns exec, or real SSH with the lab's key
    plan_path: Path | None = None  # kind "ssh": the plan (or spec) whose management addresses are dialled
    user: str | None = None
    key: Path | None = None
    fanout: int = 64
    connect_timeout: float = 10
    timeout: float = 600
    ssh_options: tuple[str, ...] = ()  # kind "ssh": more `ssh -o` words (tests: a lab's host keys)

    def __post_init__(self) -> None:
        if self.fanout < 1:
            raise UsageError(f"--fanout {self.fanout}: at least one connection at a time")
        if not 0 < self.connect_timeout <= 3600:
            raise UsageError(f"--connect-timeout {self.connect_timeout}: above 0 and at most 3600 seconds")
        if self.user is not None and not USER.fullmatch(self.user):
            raise UsageError(f"--user {self.user!r} is not a user name (lowercase letters, digits, '_' and '-')")

    @classmethod
    def of_lab(cls, lab: str, transport: Transport = "exec", *, fanout: int = 64, connect_timeout: float = 10,
               timeout: float = 600) -> Reach:
        """A lab (refused, when it is used, unless it is up)."""
        check_id(lab)
        return cls(kind="lab", lab=lab, transport=transport, fanout=fanout, connect_timeout=connect_timeout,
                   timeout=timeout)

    @classmethod
    def of_ibsim(cls, sim: str) -> Reach:
        return cls(kind="ibsim", lab=sim)

    @classmethod
    def of_nodes(cls, plan_path: Path | None, user: str | None = None, key: Path | None = None, *,
                 fanout: int = 64, connect_timeout: float = 10, timeout: float = 600) -> Reach:
        """Real nodes over SSH, at the management addresses of plan_path (by name without one)."""
        return cls(kind="ssh", plan_path=plan_path, user=user, key=key, fanout=fanout,
                   connect_timeout=connect_timeout, timeout=timeout)

    def with_timeout(self, timeout: float) -> Reach:
        return replace(self, timeout=timeout)

    # ------------------------------------------------------------------ the Plan and the nodes

    def plan(self) -> Plan | None:
        """The Plan the machines are named in: a lab's or simulator's own (lab addresses, sliced),
        else the one given (None: no plan)."""
        if self.kind == "lab":
            path = lab_plan_path(self.lab or "")
            if not path.exists():
                raise UsageError(f"no lab {self.lab!r}; `gpunet lab up` builds one")
            return read_plan(path)
        if self.kind == "ibsim":
            return sim_plan(self.lab or "")
        return plan_of(self.plan_path) if self.plan_path else None

    def require_plan(self, why: str = "the plan.json (or spec) to compare with") -> Plan:
        plan = self.plan()
        if plan is None:
            raise UsageError(f"--plan: {why}")
        return plan

    def nodes(self, pattern: str) -> NodeSet:
        """A NodeSet; with a plan, `@role:gpu`, `@leaf:NAME`, `@rail:N`, `@plane:NAME`, `@GROUP` too.
        In a lab, only its servers."""
        nodes = resolve_nodes(pattern, self.plan())
        if self.kind == "lab":
            servers = _lab_state(self.lab or "").servers
            unknown = [n for n in nodes if n not in servers]
            if unknown:
                raise UsageError(f"not servers of lab {self.lab}: {describe(unknown)}; servers: "
                                 f"{describe(list(servers))}")
        return nodes

    # ------------------------------------------------------------------ running on nodes

    def runner(self) -> ClusterShellRunner:
        """Many nodes at once through ClusterShell (a node's failure is data)."""
        lab = self.lab or ""
        if self.kind == "lab" and self.transport == "exec":
            return lab_runner(lab, str(lab_dir(lab) / "uts"), self.timeout)
        if self.kind == "lab":
            return self._ssh_runner(_lab_state(lab).mgmt_addresses)
        if self.kind != "ssh":
            raise UsageError("name the nodes' plan (--plan) or a lab (--lab) to reach them")
        plan = self.plan()
        return self._ssh_runner({n.name: n.management_ip for n in plan.nodes if n.management_ip} if plan else {})

    def on_switches(self, command: Sequence[str], switches: Sequence[str]) -> FleetResult:
        """`command` on switches over SSH at their management addresses (the fleet runner, so a
        switch that does not answer is data, not a stop): a real fabric's from the Plan, a lab's
        at the addresses its switches' sshd listens on, with the lab's key."""
        if self.kind == "lab":
            runner = self._ssh_runner(_lab_state(self.lab or "").switch_mgmt)
        elif self.kind == "ssh":
            plan = self.require_plan("the plan.json (or spec) with the switches' management addresses")
            runner = self._ssh_runner({s.name: s.management.split("/")[0] for s in plan.switches if s.management})
        else:
            raise UsageError("switches are reached over SSH at the plan's management addresses: give --plan")
        return runner.run(command, NodeSet.fromlist([s for s in switches if s in runner.addresses]))

    def _ssh_runner(self, addresses: dict[str, str]) -> ClusterShellRunner:
        """The fleet runner over SSH to these addresses: a lab's as root with its key (host keys
        not kept: each lab makes new ones), real machines' with this reach's user, key and options."""
        user: str | None
        key: str | None
        options: tuple[str, ...]
        if self.kind == "lab":
            user, key, options = "root", str(lab_key(self.lab or "")), LAB_SSH_OPTIONS
        else:
            user, key, options = self.user, str(self.key) if self.key else None, self.ssh_options
        return ClusterShellRunner(user=user, key=key, addresses=addresses, fanout=self.fanout,
                                  command_timeout=self.timeout, connect_timeout=self.connect_timeout,
                                  ssh_options=options)

    def node_argv(self, node: str, command: Sequence[str]) -> list[str]:
        """argv that runs `command` on one node (a lab server's namespace, or ssh to the node)."""
        if self.kind == "lab":
            return node_argv(self.lab or "", node, command)
        plan = self.plan()
        found = plan.node(node) if plan else None
        return self.ssh_argv(found.management_ip if found and found.management_ip else node, command)

    def ssh_argv(self, address: str, command: Sequence[str]) -> list[str]:
        """ssh to a real node or switch at `address` with this reach's user and key, never asking."""
        return ["ssh", *self._ssh_words(), "--", address, shlex.join(command)]

    def _ssh_words(self) -> list[str]:
        words = ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout:g}", *self.ssh_options]
        words += ["-l", self.user] if self.user else []
        return words + (["-i", str(self.key)] if self.key else [])

    def lab_scale(self) -> float | None:
        """A lab's Mbit/s per plan Gbit/s on its shaped links; None on real hardware."""
        return _lab_state(self.lab or "").scale_mbit_per_gbit if self.kind == "lab" else None

    def counter_root(self, node: str) -> str:
        """Where a node's /sys and /proc are read from for its counters: its own, or in a lab the
        server's own file tree (where a test replays recorded NIC counters; the lab has no NICs)."""
        return self.node_root(node)

    def node_root(self, node: str) -> str:
        """The root of a node's own files: "/", or in a lab the server's own tree (the servers
        share this machine's filesystem: what one installs must never land in another's, or ours)."""
        return str(apply_paths(self.lab or "")[0] / node) if self.kind == "lab" else "/"

    def node_path(self, node: str, path: str) -> str:
        """An absolute path as this node sees its own files (in a lab, under the server's tree)."""
        root = self.node_root(node)
        return path if root == "/" else root + path

    def node_python(self) -> str:
        """The nodes' own Python: python3 on real nodes; a lab's servers share this machine's files,
        so this very interpreter (never its site-packages: installs go into a venv of their own)."""
        return sys.executable if self.kind == "lab" else "python3"

    def gpunet_argv(self, node: str, prefix: str) -> list[str]:
        """gpunet on a node: `fleet install`'s venv under PREFIX (in the node's own tree) when it is
        there, else the node's Python; its version checked against this one first."""
        return launch_argv(self.node_path(node, prefix), self.node_python())

    def cli_words(self) -> list[str]:
        """The options that reach these nodes again the same way (for a fix to paste)."""
        if self.kind == "lab":
            return ["--lab", self.lab or ""]
        words = ["--plan", str(self.plan_path)] if self.plan_path else []
        words += ["--user", self.user] if self.user else []
        return words + (["--key", str(self.key)] if self.key else [])

    def remote_plan(self) -> str:
        """The plan's path on the nodes: the lab's own plan in a lab, else where it is installed."""
        return str(lab_plan_path(self.lab or "")) if self.kind == "lab" else REMOTE_PLAN

    def apply_paths(self) -> tuple[Path, Path]:
        """A lab's stand-ins for apply: each server's own file tree, and its sshd's pid files."""
        if self.kind != "lab":
            raise UsageError("only a lab's servers have stand-in trees")
        return apply_paths(self.lab or "")

    # ------------------------------------------------------------------ the fabric's own devices

    def lldp_running(self) -> None:
        """Before LLDP is read: a lab starts its lldpd now if `lab up` did not (lab/lldp_lab.py) and
        returns once every cable end has heard its neighbour; real devices run their own."""
        if self.kind == "lab":
            ensure_lldp(self.lab or "")

    def devices(self) -> dict[str, DeviceRun]:
        """The fabric's devices this reach can run a command on, by planned name: a lab's servers
        and switches, each in its namespace."""
        if self.kind != "lab":
            raise UsageError("only a lab's switches can be reached yet: give --lab")
        return device_runners(_lab_state(self.lab or ""))

    def switches(self, plan: Plan) -> dict[str, DeviceRun]:
        """The Plan's switches this reach can run a command on, by name: a lab's, each in its
        namespace; real ones over SSH at their management address (a switch without one is left out)."""
        if self.kind == "lab":
            devices = self.devices()
            return {s.name: devices[s.name] for s in plan.switches if s.name in devices}
        if self.kind != "ssh":
            raise UsageError("name the switches' plan (--plan) or a lab (--lab) to reach them")
        return {s.name: self._ssh_device(s.management.split("/")[0]) for s in plan.switches if s.management}

    def _ssh_device(self, address: str) -> DeviceRun:
        def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
            return run_local(self.ssh_argv(address, argv), check=False, timeout=timeout)

        return run

    def hop_addresses(self) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
        """Where the switches' addresses sit: address -> (switch, port), and address -> switch."""
        plan = self.require_plan()
        return hop_addresses(_lab_state(self.lab or ""), plan)

    def switch_counters(self) -> list[EthPortErrors]:
        """Every switch's port error counters now (a lab's switches: `ip -s -s -j link`)."""
        return lab_switch_counters(_lab_state(self.lab or ""), self.require_plan())

    def notes(self) -> tuple[str, ...]:
        """What this reach's facts cannot show, said with every result drawn from them."""
        return (COUNTERS_NOTE,) if self.kind == "lab" else ()

    def infiniband_tool(self, argv: Sequence[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """An infiniband-diags command against the simulator, or on this host (attached to the fabric)."""
        if self.kind == "ibsim":
            return run_tool(self.lab or "", argv, timeout=timeout)
        return run_local(list(argv), check=False, timeout=timeout)

    def infiniband_speed_cap(self) -> str | None:
        """The fastest speed the fabric can report (the simulator knows speeds up to HDR)."""
        return SIM_SPEED_CAP if self.kind == "ibsim" else None

    def describe(self) -> str:
        return {"lab": f"lab {self.lab} ({'SSH' if self.transport == 'ssh' else 'ip netns exec'})",
                "ibsim": f"ibsim {self.lab}", "ssh": "SSH to the nodes", "here": "this host"}[self.kind]


def _lab_state(lab: str) -> LabState:
    state = read_state(lab)
    if state is None:
        raise UsageError(f"no lab {lab!r}; `gpunet lab up` builds one")
    return state
