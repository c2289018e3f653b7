"""probe_node: read one node into a NodeState, through a command runner and a root path, with
counter rates from two samples `interval` seconds apart. Read-only."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from gpunet.errors import GpunetError
from gpunet.model.state import BondState, IbPort, InterfaceState, NicInfo, NodeState, SnmpCounters
from gpunet.probe import parsers
from gpunet.probe.extras import read_firewall, read_gpus, read_nics, read_rdma
from gpunet.probe.rdma_host import read_rdma_host
from gpunet.probe.sysfs import read_ib_ports, read_interfaces
from gpunet.runner import CommandRunner, run_local

SYSCTLS = (
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max", "net.core.wmem_max",
    "net.ipv4.tcp_mtu_probing", "net.ipv4.tcp_congestion_control", "net.ipv4.conf.all.rp_filter",
    "net.ipv4.conf.all.arp_ignore", "net.ipv4.conf.all.arp_announce",
)
NCCL_ENV = Path("etc/gpunet/nccl.env")
IP_ADDR = ["ip", "-j", "addr", "show"]
T = TypeVar("T")


def probe_node(
    run: CommandRunner = run_local, root: Path = Path("/"), hostnames: Iterable[str] = (),
    interval: float = 2.0, *, clock: Callable[[float], None] = time.sleep,
    meanwhile: Callable[[], object] | None = None, nccl_log: Path | None = None,
) -> NodeState:
    """Two counter samples `interval` apart. The configuration reads (addresses, routes, firewall,
    sshd, ...) and `meanwhile` (doctor's ICMP/UDP peer probes) run during the interval: they move no
    counter that a check rates, and a doctor then costs little more than its interval."""
    problems: list[str] = []
    first_ifs, first_snmp, first_ib = read_interfaces(root), read_snmp(root, problems), read_ib_ports(root)
    first_nics = read_nics(run, first_ifs, problems)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="gpunet-probe") as pool:
        configuration = pool.submit(_configuration, run, root, hostnames, problems, nccl_log)
        alongside = pool.submit(meanwhile) if meanwhile is not None else None
        if interval > 0:
            clock(interval)
        interfaces, snmp, ib_ports = read_interfaces(root), read_snmp(root, []), read_ib_ports(root)
        nics = read_nics(run, interfaces, [])
        facts = configuration.result()
        if alongside is not None:
            alongside.result()  # its own results are its caller's; this only surfaces its exceptions
    return NodeState(
        hostname=_hostname(root), interfaces=tuple(interfaces), ib_ports=tuple(ib_ports), snmp=snmp, nics=nics,
        interval_s=interval,
        rates=_rates(first_ifs, interfaces, first_snmp, snmp, interval)
        | _counter_rates(first_ib, ib_ports, first_nics, nics, interval),
        problems=tuple(problems), **facts,
    )


def _configuration(run: CommandRunner, root: Path, hostnames: Iterable[str], problems: list[str],
                   nccl_log: Path | None = None) -> dict[str, Any]:
    """What the node is configured with, as NodeState fields (no counters)."""
    return {
        "addresses": _parsed(run, IP_ADDR, parsers.parse_ip_addr_json, problems) or {},
        "routes": _parsed(run, ["ip", "-4", "-j", "route", "show", "table", "all"], parsers.parse_ip_route_json,
                          problems) or (),
        "bonds": tuple(read_bonds(root, problems)), "firewall": read_firewall(run, problems),
        "gpus": read_gpus(problems), "sysctls": _sysctls(root), "resolved": _resolve(hostnames),
        "sshd": _sshd(run, problems), "selinux": _selinux(root), "apparmor": _apparmor(root),
        "nccl_env": _nccl_env(root), "rdma": read_rdma(run, root, problems),
        "rdma_host": read_rdma_host(run, root, problems, nccl_log),
    }


def read_addresses(run: CommandRunner = run_local) -> dict[str, tuple[str, ...]]:
    """Every interface's addresses (`ip -j addr`); a failure raises (CommandError, ParseError)."""
    return parsers.parse_ip_addr_json(run(IP_ADDR, timeout=5).stdout)


def _hostname(root: Path) -> str:
    path = root / "proc/sys/kernel/hostname"
    return path.read_text().strip() if path.exists() else socket.gethostname()


def _parsed(run: CommandRunner, argv: list[str], parse: Callable[[str], T], problems: list[str]) -> T | None:
    """A command's output parsed, or None with the reason noted (per-probe failure is data)."""
    try:
        return parse(run(argv).stdout)
    except GpunetError as exc:
        problems.append(f"{' '.join(argv)}: {exc}")
        return None


def _parsed_file(path: Path, parse: Callable[[str], T], problems: list[str]) -> T | None:
    try:
        return parse(path.read_text())
    except (GpunetError, OSError) as exc:
        problems.append(f"{path}: {exc}")
        return None


def read_snmp(root: Path, problems: list[str]) -> SnmpCounters | None:
    groups: dict[str, dict[str, int]] = {}
    for name in ("snmp", "netstat"):
        path = root / "proc/net" / name
        counters = _parsed_file(path, parsers.parse_proc_snmp, problems) if path.exists() else None
        groups |= counters.groups if counters else {}
    return SnmpCounters(groups=groups) if groups else None


def read_bonds(root: Path, problems: list[str]) -> list[BondState]:
    base = root / "proc/net/bonding"
    paths = sorted(base.iterdir()) if base.exists() else []
    parsed = [_parsed_file(p, parsers.parse_proc_bonding, problems) for p in paths]
    return [b.model_copy(update={"name": p.name}) for p, b in zip(paths, parsed, strict=True) if b is not None]


def _sysctls(root: Path) -> dict[str, str]:
    values = {}
    for key in SYSCTLS:
        path = root / "proc/sys" / key.replace(".", "/")
        if path.exists():
            values[key] = " ".join(path.read_text().split())
    return values


def _resolve(hostnames: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """What this node's resolver says for each name (files, DNS: nsswitch order)."""
    result = {}
    for name in hostnames:
        try:
            infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
            result[name] = tuple(sorted({str(info[4][0]) for info in infos}))
        except OSError:
            result[name] = ()
    return result


def _sshd(run: CommandRunner, problems: list[str]) -> dict[str, str] | None:
    if not Path("/usr/sbin/sshd").exists():
        return None
    done = run(["/usr/sbin/sshd", "-T"], check=False)
    if done.returncode != 0:
        problems.append(f"sshd -T: {done.stderr.strip()[:200]}")
        return None
    try:
        return parsers.parse_sshd_t(done.stdout)
    except GpunetError as exc:
        problems.append(f"sshd -T: {exc}")
        return None


def _selinux(root: Path) -> str | None:
    enforce = root / "sys/fs/selinux/enforce"
    if not (root / "sys/fs/selinux").exists():
        return None
    return "enforcing" if enforce.exists() and enforce.read_text().strip() == "1" else "permissive"


def _apparmor(root: Path) -> bool | None:
    enabled = root / "sys/module/apparmor/parameters/enabled"
    return enabled.read_text().strip() == "Y" if enabled.exists() else None


def _nccl_env(root: Path) -> dict[str, str] | None:
    path = root / NCCL_ENV
    return parsers.parse_env_file(path.read_text()) if path.exists() else None


def _counter_rates(
    ib_before: list[IbPort], ib_after: list[IbPort], nics_before: dict[str, NicInfo], nics_after: dict[str, NicInfo],
    interval: float,
) -> dict[str, float]:
    """Per-second increase of InfiniBand port counters ("mlx5_0/1/symbol_error") and of NIC
    hardware counters ("ens1f0/ethtool/rx_crc_errors_phy")."""
    if interval <= 0:
        return {}
    rates = {}
    old_ports = {(p.ca, p.port): p.counters for p in ib_before}
    for port in ib_after:
        for key, value in port.counters.items():
            old = old_ports.get((port.ca, port.port), {}).get(key)
            if old is not None:
                rates[f"{port.ca}/{port.port}/{key}"] = (value - old) / interval
    for name, nic in nics_after.items():
        for key, value in nic.stats.items():
            old = nics_before.get(name, nic).stats.get(key)
            if old is not None:
                rates[f"{name}/ethtool/{key}"] = (value - old) / interval
    return rates


def _rates(
    before: list[InterfaceState], after: list[InterfaceState],
    snmp_before: SnmpCounters | None, snmp_after: SnmpCounters | None, interval: float,
) -> dict[str, float]:
    """Per-second increase of every interface counter and every TCP counter."""
    if interval <= 0:
        return {}
    first = {i.name: i.statistics for i in before}
    rates = {f"{i.name}/{k}": (v - first[i.name].get(k, v)) / interval
             for i in after if i.name in first for k, v in i.statistics.items()}
    if snmp_before and snmp_after:
        for group in ("Tcp", "TcpExt"):
            for key, value in snmp_after.groups.get(group, {}).items():
                old = snmp_before.get(group, key)
                if old is not None:
                    rates[f"{group}/{key}"] = (value - old) / interval
    return rates
