"""The parts of a probe that ask tools: NIC driver and statistics (ethtool), what filters
traffic (nft, firewalld, iptables), and GPUs (NVML, when the driver is there)."""

from __future__ import annotations

import importlib
import shutil

from gpunet.errors import GpunetError
from gpunet.model.state import FirewallState, InterfaceState, NicInfo
from gpunet.probe.parsers import parse_ethtool_driver, parse_ethtool_stats, parse_nft_json
from gpunet.runner import CommandRunner


def read_nics(run: CommandRunner, interfaces: list[InterfaceState], problems: list[str]) -> dict[str, NicInfo]:
    """ethtool -i and -S of every physical NIC (virtual ones have no hardware counters)."""
    if shutil.which("ethtool") is None:
        problems.append("ethtool: not installed, NIC driver and hardware counters not read")
        return {}
    nics = {}
    for iface in (i for i in interfaces if not i.virtual):
        try:
            info = parse_ethtool_driver(run(["ethtool", "-i", iface.name]).stdout)
            stats = run(["ethtool", "-S", iface.name], check=False)
            counters = parse_ethtool_stats(stats.stdout) if stats.returncode == 0 else {}
        except GpunetError as exc:
            problems.append(f"ethtool {iface.name}: {exc}")
            continue
        nics[iface.name] = info.model_copy(update={"stats": counters})
    return nics


def read_firewall(run: CommandRunner, problems: list[str]) -> FirewallState:
    tables: tuple[str, ...] = ()
    if shutil.which("nft"):
        done = run(["nft", "-j", "list", "tables"], check=False)
        try:
            items = parse_nft_json(done.stdout) if done.returncode == 0 else []
            tables = tuple(f"{t['table']['family']} {t['table']['name']}" for t in items if "table" in t)
        except GpunetError as exc:
            problems.append(f"nft -j list tables: {exc}")
    firewalld = None
    if shutil.which("firewall-cmd"):
        firewalld = run(["firewall-cmd", "--state"], check=False).stdout.strip() or "not running"
    iptables = None
    if shutil.which("iptables-save"):
        saved = run(["iptables-save"], check=False)
        iptables = sum(line.startswith("-A ") for line in saved.stdout.splitlines()) if saved.returncode == 0 else None
    return FirewallState(nft_tables=tables, firewalld=firewalld, iptables_rules=iptables)


def read_gpus(problems: list[str]) -> tuple[str, ...] | None:
    """GPU names through NVML (nvidia-ml-py); None, with the reason noted, where it is absent."""
    try:
        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception as exc:
        problems.append(f"NVML: {type(exc).__name__}: no GPU driver or nvidia-ml-py here; GPU-NIC affinity not read")
        return None
    try:
        return tuple(str(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i)))
                     for i in range(nvml.nvmlDeviceGetCount()))
    finally:
        nvml.nvmlShutdown()
