"""read_rdma_host: the GPU node's RDMA path, read through a command runner (nvidia-smi, lspci,
mlnx_qos) and a root path (sysfs, /proc), as RdmaHost. A tool that is absent or fails leaves its part
None, noted in `problems`: the checks then skip with that reason."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gpunet.errors import GpunetError
from gpunet.model.rdma import EcnState, GidEntry, HostIommu, NcclLog, RdmaHost, RoceNic
from gpunet.probe.nccl_log import parse_nccl_debug_log
from gpunet.probe.pci import parse_lspci
from gpunet.probe.roce import parse_gpu_bus_ids, parse_mlnx_qos
from gpunet.probe.sysfs import _read
from gpunet.probe.topo import parse_nvidia_smi_topo
from gpunet.runner import CommandRunner

T = TypeVar("T")
IB = "sys/class/infiniband"
MAX_LOG = 8 << 20  # an NCCL log read at most this far: the init lines come first
MAX_PKEYS = 128
IOMMU_OPTIONS = ("intel_iommu=", "amd_iommu=", "iommu=", "iommu.passthrough=")
GPU_BUS_IDS = ["nvidia-smi", "--query-gpu=index,pci.bus_id", "--format=csv,noheader"]


def read_rdma_host(run: CommandRunner, root: Path, problems: list[str], nccl_log: Path | None = None) -> RdmaHost:
    hcas = sorted(p.name for p in (root / IB).iterdir()) if (root / IB).is_dir() else []
    return RdmaHost(
        topo=_tool(run, ["nvidia-smi", "topo", "-m"], parse_nvidia_smi_topo, problems),
        pci=_tool(run, ["lspci", "-vvv"], parse_lspci, problems),
        pci_of_gpu=_tool(run, GPU_BUS_IDS, parse_gpu_bus_ids, problems) or {},
        pci_of_hca={h: a for h in hcas if (a := _device_address(root / IB / h))},
        numa_of_hca={h: n for h in hcas if (n := _numa(root / IB / h)) is not None},
        iommu=_iommu(root), modules=_modules(root),
        roce=tuple(_roce_nic(run, root, hca, problems) for hca in hcas if _link_layer(root, hca) == "Ethernet"),
        gids=tuple(g for hca in hcas for g in _gids(root, hca)) if hcas else None,
        pkeys={key: table for hca in hcas for key, table in _pkeys(root, hca).items()} if hcas else None,
        nccl_log=_nccl_log(nccl_log, problems),
    )


def _tool(run: CommandRunner, argv: list[str], parse: Callable[[str], T], problems: list[str]) -> T | None:
    try:
        done = run(argv, check=False, timeout=30)
    except GpunetError as exc:  # not installed: the runner says so
        problems.append(f"{' '.join(argv)}: {exc}")
        return None
    if done.returncode != 0:
        problems.append(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()[:200]}")
        return None
    try:
        return parse(done.stdout)
    except GpunetError as exc:
        problems.append(f"{' '.join(argv)}: {exc}")
        return None


def _device_address(hca_dir: Path) -> str | None:
    """The HCA's PCI address from its `device` link (../../../0000:18:00.0)."""
    try:
        return os.path.basename(os.readlink(hca_dir / "device")).lower() or None
    except OSError:
        return None


def _numa(hca_dir: Path) -> int | None:
    text = _read(hca_dir / "device" / "numa_node")
    return int(text) if text is not None and text.isdigit() else None


def _iommu(root: Path) -> HostIommu | None:
    cmdline = _read(root / "proc/cmdline")
    if cmdline is None:
        return None
    units = root / "sys/class/iommu"
    count = len(list(units.iterdir())) if units.is_dir() else 0
    return HostIommu(cmdline=tuple(w for w in cmdline.split() if w.startswith(IOMMU_OPTIONS)), units=count)


def _modules(root: Path) -> tuple[str, ...] | None:
    path = root / "proc/modules"
    if not path.is_file():
        return None
    return tuple(line.split()[0] for line in path.read_text(errors="replace").splitlines() if line.strip())


def _link_layer(root: Path, hca: str) -> str | None:
    ports = root / IB / hca / "ports"
    first = sorted(ports.iterdir())[0] if ports.is_dir() and any(ports.iterdir()) else None
    return _read(first / "link_layer") if first else None


def _netdev(root: Path, hca: str) -> str | None:
    """The HCA's network device: the entries of its PCI device's net/ directory (mlx5: one)."""
    net = root / IB / hca / "device" / "net"
    names = sorted(p.name for p in net.iterdir()) if net.is_dir() else []
    return names[0] if names else None


def _roce_nic(run: CommandRunner, root: Path, hca: str, problems: list[str]) -> RoceNic:
    netdev = _netdev(root, hca) or ""
    qos = _tool(run, ["mlnx_qos", "-i", netdev], parse_mlnx_qos, problems) if netdev else None
    tclass = _read(root / IB / hca / "tc/1/traffic_class")  # MLNX_OFED: "Global tclass=106"
    number = tclass.rsplit("=", 1)[-1].strip() if tclass else ""
    return RoceNic(netdev=netdev, hca=hca, qos=qos, ecn=_ecn(root / "sys/class/net" / netdev / "ecn") if netdev
                   else None, traffic_class=int(number) if number.isdigit() else None)


def _ecn(ecn: Path) -> EcnState | None:
    if not ecn.is_dir():
        return None
    return EcnState(np=_enables(ecn / "roce_np/enable"), rp=_enables(ecn / "roce_rp/enable"))


def _enables(directory: Path) -> dict[int, bool]:
    if not directory.is_dir():
        return {}
    return {int(p.name): _read(p) == "1" for p in sorted(directory.iterdir()) if p.name.isdigit()}


def _gids(root: Path, hca: str) -> list[GidEntry]:
    """Populated GIDs of every port (an all-zero GID is an empty slot), as show_gids lists them."""
    entries = []
    for port in sorted((root / IB / hca / "ports").iterdir()) if (root / IB / hca / "ports").is_dir() else []:
        gids = port / "gids"
        for path in sorted(gids.iterdir(), key=lambda p: int(p.name)) if gids.is_dir() else []:
            gid = _read(path) or ""
            if not gid or set(gid) <= {"0", ":"}:
                continue
            kind = _read(port / "gid_attrs/types" / path.name) or ""
            entries.append(GidEntry(hca=hca, port=int(port.name), index=int(path.name), gid=gid,
                                    ipv4=_mapped_ipv4(gid), version="v2" if "v2" in kind else "v1" if kind else None,
                                    netdev=_read(port / "gid_attrs/ndevs" / path.name)))
    return entries


def _mapped_ipv4(gid: str) -> str | None:
    """0000:...:ffff:ac13:003c -> 172.19.0.60 (an IPv4-mapped GID)."""
    groups = gid.split(":")
    if len(groups) != 8 or groups[:6] != ["0000"] * 5 + ["ffff"]:
        return None
    value = int(groups[6] + groups[7], 16)
    return ".".join(str(value >> shift & 255) for shift in (24, 16, 8, 0))


def _pkeys(root: Path, hca: str) -> dict[str, tuple[int, ...]]:
    tables = {}
    ports = root / IB / hca / "ports"
    for port in sorted(ports.iterdir()) if ports.is_dir() else []:
        directory = port / "pkeys"
        if not directory.is_dir():
            continue
        values = []
        for index in range(MAX_PKEYS):
            text = _read(directory / str(index))
            if text is None:
                break
            values.append(int(text, 16) if re.fullmatch(r"0x[0-9a-fA-F]{1,4}", text) else 0)
        tables[f"{hca}/{port.name}"] = tuple(values)
    return tables


def _nccl_log(path: Path | None, problems: list[str]) -> NcclLog | None:
    if path is None:
        return None
    try:
        with path.open(errors="replace") as handle:
            return parse_nccl_debug_log(handle.read(MAX_LOG))
    except (OSError, GpunetError) as exc:
        problems.append(f"{path}: {exc}")
        return None
