"""GPUDirect RDMA's path: no PCIe bridge between a GPU and its rail NIC redirecting peer traffic up
to the root complex (ACS; nccl-tests#112), an IOMMU that does not translate the NIC's DMA into the
GPU, and what NCCL reported using (`via NET/IB/<n>/GDRDMA`; nccl-tests#29)."""

from __future__ import annotations

from gpunet.checks.affinity import rail_nics
from gpunet.checks.base import NO_GPU_HERE, Context, FunctionCheck, Outcome, Verdict, no_gpu_here
from gpunet.model.rdma import PciDevice, RdmaHost
from gpunet.probe.pci import upstream_bridges

ACS_FIX = ("disable ACS redirect on {bridges}: in the BIOS (PCIe ACS / IO virtualization settings), or at every "
           "boot with `setpci -s <bridge> ECAP_ACS+0x6.w=0000` (a systemd oneshot before the jobs start)")


def _host(ctx: Context) -> tuple[RdmaHost | None, Outcome | None]:
    if ctx.node is None or ctx.node.gpus == 0 or not rail_nics(ctx):
        return None, Outcome("skip", evidence="GPUDirect RDMA needs GPUs and RDMA NICs on rails in the plan")
    if no_gpu_here(ctx):
        return None, NO_GPU_HERE
    return ctx.state.rdma_host, None


def acs_between(ctx: Context) -> list[Outcome]:
    host, skip = _host(ctx)
    if skip:
        return [skip]
    if host is None or host.pci is None or not host.pci_of_gpu:
        return [Outcome("skip", evidence="lspci -vvv or nvidia-smi's GPU bus ids could not be read here")]
    return [_acs_pair(host, gpu, iface.hca or "") for gpu, iface in rail_nics(ctx)]


def _acs_pair(host: RdmaHost, gpu: str, hca: str) -> Outcome:
    subject = f"{gpu} <-> {hca}"
    gpu_at, hca_at = host.pci_of_gpu.get(gpu), host.pci_of_hca.get(hca)
    if gpu_at is None or hca_at is None:
        return Outcome("skip", subject, evidence=f"no PCI address for {gpu if gpu_at is None else hca}")
    path = _bridges_between(host.pci or (), gpu_at, hca_at)
    redirecting = [b.address for b in path if b.acs is not None and b.acs.redirects]
    unknown = [b.address for b in path if b.acs is None]
    shown = ", ".join(f"{b.address} {_acs_text(b)}" for b in path) or "no bridge between them"
    if redirecting:
        return Outcome("fail", subject, shown, "no ReqRedir/CmpltRedir/EgressCtrl on the path", "lspci -vvv",
                       ACS_FIX.format(bridges=", ".join(redirecting)))
    if unknown and not any(b.acs is not None for b in path):
        return Outcome("skip", subject, evidence=f"ACS of {', '.join(unknown)} not shown (lspci -vvv needs root "
                                                 "to read capabilities)")
    return Outcome("pass", subject, shown, "no redirect", "lspci -vvv")


def _acs_text(bridge: PciDevice) -> str:
    if bridge.acs is None:
        return "ACS not shown"
    return "ACS redirect" if bridge.acs.redirects else "ACS no redirect"


def _bridges_between(devices: tuple[PciDevice, ...], a: str, b: str) -> list[PciDevice]:
    """The bridges a peer-to-peer transfer from a to b crosses: each side's path up to their nearest
    common bridge, that bridge included (where both hang off one root, its ports on both sides)."""
    up_a, up_b = upstream_bridges(devices, a), upstream_bridges(devices, b)
    common = next((x for x in up_a if x in up_b), None)
    side_a = up_a[:up_a.index(common) + 1] if common else up_a
    side_b = up_b[:up_b.index(common)] if common else up_b
    return side_a + side_b


def iommu_mode(ctx: Context) -> list[Outcome]:
    host, skip = _host(ctx)
    if skip:
        return [skip]
    if host is None or host.iommu is None:
        return [Outcome("skip", evidence="/proc/cmdline not readable here")]
    mode = host.iommu.mode
    shown = f"{mode} ({' '.join(host.iommu.cmdline) or 'no iommu option'}, {host.iommu.units} IOMMU unit(s))"
    if mode != "translated":
        return [Outcome("pass", "IOMMU", shown, "off or passthrough", "/proc/cmdline, /sys/class/iommu")]
    return [Outcome("warn", "IOMMU", shown, "off or passthrough", "/proc/cmdline, /sys/class/iommu",
                    "the IOMMU translates every DMA, the NIC's peer writes into GPU memory included (slower, or "
                    "refused without ATS): add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX in "
                    "/etc/default/grub, then update-grub and reboot), or turn the IOMMU off in the BIOS on "
                    "bare metal")]


def nccl_gdr(ctx: Context) -> list[Outcome]:
    host, skip = _host(ctx)
    if skip:
        return [skip]
    log = host.nccl_log if host else None
    if log is None:
        return [Outcome("skip", evidence="no NCCL_DEBUG=INFO log given to doctor (--nccl-log)")]
    if not log.net_channels:
        return [Outcome("skip", evidence="the NCCL log has no network channel line (a single-node job, or "
                                         "cut before the channels were set up)")]
    used, total = log.gdr_channels, len(log.net_channels)
    shown = f"{used} of {total} network channels via GDRDMA ({log.net_channels[0].transport}, ...)"
    verdict: Verdict = "pass" if used == total else "fail" if used == 0 else "warn"
    return [Outcome(verdict, "NCCL network channels", shown, "every channel via NET/.../GDRDMA", "NCCL log",
                    "" if verdict == "pass" else
                    "NCCL staged network data through host memory: load nvidia_peermem (modprobe nvidia_peermem, "
                    "and in /etc/modules-load.d) or use dma-buf (NCCL_DMABUF_ENABLE=1, kernel >= 5.12, driver >= "
                    "515); check NCCL_NET_GDR_LEVEL and the GPU-NIC distance (GN-AFF-02) and ACS (GN-ACS-01)")]


GPUDIRECT_CHECKS = [
    FunctionCheck("GN-ACS-01", "gpudirect", "no PCIe bridge between a GPU and its rail NIC redirects peer traffic "
                  "(ACS)", "", acs_between),
    FunctionCheck("GN-GDR-02", "gpudirect", "the IOMMU does not translate GPUDirect DMA (off or iommu=pt)", "",
                  iommu_mode),
    FunctionCheck("GN-GDR-03", "gpudirect", "NCCL's network channels use GPUDirect RDMA (GDRDMA)", "", nccl_gdr),
]
