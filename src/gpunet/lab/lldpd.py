"""lldpd (Debian `lldpd`) in every lab namespace: servers and switches announce the Plan's names
and hear their neighbours over the veth cables, as real hosts and switches do over fibre.

Each daemon reads its own /etc/lldpd.d (ip netns exec mounts /etc/netns/<ns>/lldpd.d there), so a
server's configuration sits where a real server's would, and its control socket is at the same
path in every namespace: one `lldpcli` command line reaches any of them."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpunet.errors import ParseError
from gpunet.probe.lldp import parse_lldpcli_json

LLDPD = "lldpd"
CONF_DIR = "lldpd.d"  # under /etc/netns/<ns>/, seen as /etc/lldpd.d inside the namespace
SOCKET = "/etc/lldpd.d/gpunet-lab.socket"  # inside a lab namespace
TX_INTERVAL_S = 1  # lab: neighbours appear and expire within seconds (real default: 30 s)
TX_HOLD = 3  # a neighbour is forgotten after TX_INTERVAL_S * TX_HOLD without a frame
SETTLE_S = TX_INTERVAL_S * TX_HOLD + 1  # after a change, the longest until every table agrees


def lldpd_available() -> bool:
    """lldpd installed, and /etc/lldpd.d on the host for the per-namespace mount to land on."""
    return shutil.which(LLDPD) is not None and Path("/etc", CONF_DIR).is_dir()


def lldpcli_argv(*command: str) -> list[str]:
    """lldpcli against the lab daemon of the namespace it runs in."""
    return ["lldpcli", "-u", SOCKET, *command]


def config(system_name: str, skip: Sequence[str] = ()) -> str:
    """The device's own name as system name, interface names as port ids, a fast lab cadence; no
    LLDP on the `skip` patterns (a switch's management port is no cable of the Plan)."""
    pattern = f"configure system interface pattern {','.join(['*', *(f'!{p}' for p in skip)])}\n" if skip else ""
    return (f"configure system hostname {system_name}\n"
            "configure lldp portidsubtype ifname\n"
            f"configure lldp tx-interval {TX_INTERVAL_S}\n"
            f"configure lldp tx-hold {TX_HOLD}\n" + pattern)


def start_lldpd(etc: Path, system_name: str, prefix: Sequence[str], log: Path, skip: Sequence[str] = ()) -> int:
    """Write the namespace's /etc/lldpd.d and start lldpd in the foreground of its own session
    (no daemonizing: a daemon would write the host's /run/lldpd.pid). Returns its PID."""
    directory = etc / CONF_DIR
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "gpunet-lab.conf").write_text(config(system_name, skip))
    with log.open("ab") as out:
        process = subprocess.Popen([*prefix, LLDPD, "-d", "-u", SOCKET], stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return process.pid


def wait_for_sockets(etc_dirs: Sequence[Path], timeout_s: float = 30.0) -> list[Path]:
    """The namespaces whose lldpd has not opened its control socket within the timeout."""
    deadline = time.monotonic() + timeout_s
    waiting = list(etc_dirs)
    while waiting and time.monotonic() < deadline:
        waiting = [d for d in waiting if not (d / CONF_DIR / Path(SOCKET).name).exists()]
        time.sleep(0.05)
    return waiting


def wait_until_heard(expected: Mapping[tuple[str, str], str], prefix: Callable[[str], list[str]],
                     timeout_s: float = 30.0) -> list[str]:
    """Poll each (namespace, interface)'s neighbour table until it shows exactly the expected
    "system:port"; the ones still wrong at the timeout, as "interface: heard X"."""
    for ns in {ns for ns, _ in expected}:  # rescan interfaces now: a port moved in has a new ifindex
        subprocess.run([*prefix(ns), *lldpcli_argv("update")], capture_output=True, timeout=10, check=False)
    deadline = time.monotonic() + timeout_s
    wrong = [f"{i}: not read yet" for _, i in expected]
    while time.monotonic() < deadline:
        wrong = [f"{iface}: heard {heard or 'nobody'}" for (ns, iface), system in expected.items()
                 if (heard := _heard(prefix(ns), iface)) != [system]]
        if not wrong:
            return []
        time.sleep(0.25)
    return wrong


def silent_ports(ports: Mapping[str, set[str]], prefix: Callable[[str], list[str]], pool: ThreadPoolExecutor
                 ) -> list[str]:
    """One look at each namespace's whole neighbour table: the listed interfaces that have heard
    nobody yet, as "namespace:interface" (until they have, a fresh lab's cables read as missing)."""
    names = list(ports)
    heard = dict(zip(names, pool.map(lambda ns: _heard_on(prefix(ns)), names), strict=True))
    return sorted(f"{ns}:{interface}" for ns in names for interface in ports[ns] - heard[ns])


def _heard_on(prefix: list[str]) -> set[str]:
    """The local interfaces with at least one neighbour."""
    done = subprocess.run([*prefix, *lldpcli_argv("-f", "json", "show", "neighbors")], capture_output=True, text=True,
                          timeout=10, check=False)
    try:
        return {n.local_port for n in parse_lldpcli_json(done.stdout)}
    except ParseError:
        return set()


def _heard(prefix: list[str], interface: str) -> list[str]:
    done = subprocess.run([*prefix, *lldpcli_argv("-f", "json", "show", "neighbors", "ports", interface)],
                          capture_output=True, text=True, timeout=10, check=False)
    try:
        return sorted(f"{n.system_name}:{n.port_id}" for n in parse_lldpcli_json(done.stdout))
    except ParseError:
        return []
