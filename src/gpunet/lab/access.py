"""How the rest of gpunet gets at a lab that is up, through `gpunet.reach` only: its plan (in lab
addresses), its key, a runner per device (servers and switches, each in its namespace, lldpcli
and vtysh pointed at the lab daemons' sockets), the switches' port counters and the map from a hop address
to the switch port that holds it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from gpunet.errors import LabUsageError
from gpunet.fabric.counters import EthPortErrors, parse_ip_link_stats
from gpunet.lab.frr import vtysh_argv
from gpunet.lab.lldpd import lldpcli_argv
from gpunet.lab.routes import port_number
from gpunet.lab.sshd import servers_root, sshd_pid_dir
from gpunet.lab.state import LAB_PLAN, LabState, lab_dir, read_state
from gpunet.model.plan import Plan
from gpunet.runner import run_local

DeviceRun = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]
COUNTERS_NOTE = ("loss faults are nftables drops: they move no interface error counter, so `gpunet localize --lab` "
                 "finds them by probing every equal-cost path; port-counter localization runs on `gpunet ibsim`")


def node_argv_for(lab_id: str, namespace: str, command: Sequence[str]) -> list[str]:
    uts = lab_dir(lab_id) / "uts" / namespace
    return ["nsenter", f"--uts={uts}", "ip", "netns", "exec", namespace, *command]


def device_prefix(lab_id: str, namespace: str, kind: str) -> list[str]:
    """How a command runs in a lab device: a server with its own hostname, a switch in its namespace."""
    return node_argv_for(lab_id, namespace, []) if kind == "server" else ["ip", "netns", "exec", namespace]


def node_argv(lab_id: str, node: str, command: Sequence[str]) -> list[str]:
    """argv that runs `command` inside a lab server (its network, hostname and /etc/hosts)."""
    state = read_state(lab_id)
    if state is None:
        raise LabUsageError(f"no lab {lab_id!r}; `gpunet lab up` builds one")
    if node not in state.servers:
        raise LabUsageError(f"no server {node!r} in lab {lab_id}; servers: {', '.join(sorted(state.servers))}")
    return node_argv_for(lab_id, state.servers[node], command)


def lab_plan_path(lab_id: str) -> Path:
    """The lab's own plan: sliced to the lab's servers, in lab addresses."""
    return lab_dir(lab_id) / LAB_PLAN


def lab_key(lab_id: str) -> Path:
    """The private key every lab server's sshd accepts for root."""
    return lab_dir(lab_id) / "id_ed25519"


def apply_paths(lab_id: str) -> tuple[Path, Path]:
    """Where apply writes each server's files (its own tree) and finds each server's sshd pid file."""
    directory = lab_dir(lab_id)
    return servers_root(directory), sshd_pid_dir(directory)


def device_runners(state: LabState) -> dict[str, DeviceRun]:
    """Planned device name -> run(argv, timeout) inside its namespace (servers with their own
    hostname); `lldpcli` talks to that namespace's lab daemon."""
    prefix = f"gn{state.lab_id}-"
    return {ns.removeprefix(prefix): _runner(state, ns) for ns in state.namespaces}


def _runner(state: LabState, ns: str) -> DeviceRun:
    server = ns in state.servers.values()

    def run(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        command = _lab_daemon(state, ns, argv)
        wrapped = node_argv_for(state.lab_id, ns, command) if server else ["ip", "netns", "exec", ns, *command]
        return run_local(wrapped, check=False, timeout=timeout)

    return run


def _lab_daemon(state: LabState, ns: str, argv: Sequence[str]) -> list[str]:
    """`lldpcli` and `vtysh` pointed at the namespace's own lab daemons' sockets."""
    if argv and argv[0] == "lldpcli":
        return lldpcli_argv(*argv[1:])
    if argv and argv[0] == "vtysh":
        return vtysh_argv(lab_dir(state.lab_id), ns, *argv[1:])
    return list(argv)


def switch_counters(state: LabState, plan: Plan) -> list[EthPortErrors]:
    """`ip -s -s -j link` in every switch namespace: its ports' counters, as a Linux switch OS shows them."""
    found: list[EthPortErrors] = []
    runners = device_runners(state)
    for switch in plan.switches:
        if switch.name not in runners:
            continue
        done = runners[switch.name](["ip", "-s", "-s", "-j", "link"], 30)
        if done.returncode == 0:
            found += parse_ip_link_stats(done.stdout, switch.name)
    return found


def hop_addresses(state: LabState, plan: Plan) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Every switch namespace's addresses: (address -> (switch, port)) for port addresses, and
    (address -> switch) for all of them (loopbacks too)."""
    ports: dict[str, tuple[str, str]] = {}
    devices: dict[str, str] = {}
    switches = {s.name for s in plan.switches}
    for ns, lines in state.addresses.items():
        device = ns.removeprefix(f"gn{state.lab_id}-")
        if device not in switches:
            continue
        for line in lines:  # "addr add 198.18.4.5/31 dev swp3"
            words = line.split()
            address, interface = words[2].split("/")[0], words[-1]
            devices[address] = device
            if (number := port_number(interface)) is not None:
                ports[address] = (device, number)
    return ports, devices
