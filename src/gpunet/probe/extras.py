"""The parts of a probe that ask tools: NIC driver and statistics (ethtool), what filters
traffic (nft, firewalld, iptables), and GPUs (NVML, when the driver is there)."""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

from gpunet.errors import GpunetError
from gpunet.model.ruleset import Ruleset
from gpunet.model.state import FirewallState, InterfaceState, NicInfo, RdmaStack, VerbsDevice
from gpunet.probe.parsers import parse_ethtool_driver, parse_ethtool_stats, parse_ibv_devinfo
from gpunet.probe.rulesets import parse_iptables_save, parse_nft_ruleset
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
    """Tables, firewalld's state, and the rules of nftables and iptables. Tables iptables-nft keeps
    in nftables are read from iptables-save instead (their xt matches are opaque in nft's JSON)."""
    iptables, backend = _iptables(run, problems)
    nft = _nft(run, problems)
    if nft is not None and iptables is not None and backend == "nf_tables":
        mirrored = {(c.family, c.table) for c in iptables.chains}
        nft = nft.model_copy(update={"chains": tuple(c for c in nft.chains if (c.family, c.table) not in mirrored)})
    tables = tuple(dict.fromkeys(f"{c.family} {c.table}" for c in nft.chains)) if nft else ()
    firewalld = None
    if shutil.which("firewall-cmd"):
        firewalld = run(["firewall-cmd", "--state"], check=False).stdout.strip() or "not running"
    rules = sum(len(c.rules) for c in iptables.chains) if iptables else None
    return FirewallState(nft_tables=tables, firewalld=firewalld, iptables_rules=rules, nft=nft, iptables=iptables,
                         iptables_backend=backend)


def _nft(run: CommandRunner, problems: list[str]) -> Ruleset | None:
    if shutil.which("nft") is None:
        return None
    done = run(["nft", "-j", "list", "ruleset"], check=False)
    try:
        return parse_nft_ruleset(done.stdout) if done.returncode == 0 else None
    except GpunetError as exc:
        problems.append(f"nft -j list ruleset: {exc}")
        return None


def _iptables(run: CommandRunner, problems: list[str]) -> tuple[Ruleset | None, str | None]:
    if shutil.which("iptables-save") is None:
        return None, None
    version = run(["iptables", "-V"], check=False).stdout
    backend = "legacy" if "legacy" in version else "nf_tables" if "nf_tables" in version else None
    saved = run(["iptables-save"], check=False)
    try:
        return (parse_iptables_save(saved.stdout) if saved.returncode == 0 else None), backend
    except GpunetError as exc:
        problems.append(f"iptables-save: {exc}")
        return None, backend


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


VERBS_UNAVAILABLE = ("Failed to get IB devices list", "No IB devices found")  # no device, or no RDMA in the kernel
PROVIDER_DIRS = ("usr/lib/*/libibverbs", "usr/lib64/libibverbs", "usr/lib/libibverbs")


def read_rdma(run: CommandRunner, root: Path, problems: list[str]) -> RdmaStack:
    """What NCCL's RDMA transport needs, as found: kernel modules, the verbs devices ibv_devinfo sees,
    rdma-core's provider libraries, and the NCCL library ldconfig finds."""
    modules_file = root / "proc" / "modules"
    modules = tuple(line.split()[0] for line in modules_file.read_text().splitlines() if line.strip()) \
        if modules_file.exists() else None
    providers = tuple(sorted({p.name.split("-rdmav")[0].removeprefix("lib") for pattern in PROVIDER_DIRS
                              for p in root.glob(f"{pattern}/lib*-rdmav*.so")}))
    modules_dir = root / "sys" / "module"  # present without /proc/modules (a kernel with no loadable modules)
    return RdmaStack(kernel_modules=modules, verbs_devices=_verbs(run, problems), providers=providers,
                     nccl=_nccl_library(run, root),
                     nvidia_driver=(modules_dir / "nvidia").is_dir() if modules_dir.is_dir() else None)


def _verbs(run: CommandRunner, problems: list[str]) -> tuple[VerbsDevice, ...] | None:
    if shutil.which("ibv_devinfo") is None:
        return None
    done = run(["ibv_devinfo"], check=False, timeout=20)
    text = done.stdout + done.stderr
    if any(message in text for message in VERBS_UNAVAILABLE):
        return ()
    try:
        return parse_ibv_devinfo(done.stdout)
    except GpunetError as exc:
        problems.append(f"ibv_devinfo: {exc}")
        return None


def _nccl_library(run: CommandRunner, root: Path) -> str | None:
    """libnccl's real file name (its version: libnccl.so.2.21.5), from ldconfig's cache."""
    if shutil.which("ldconfig") is None:
        return None
    listed = run(["ldconfig", "-p"], check=False).stdout
    path = next((line.split("=>")[-1].strip() for line in listed.splitlines() if "libnccl.so" in line), None)
    if path is None:
        return None
    return Path(os.path.realpath(root / path.lstrip("/"))).name
