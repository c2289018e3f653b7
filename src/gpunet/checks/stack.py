"""The software NCCL needs on the planned RDMA NICs ("make sure the drivers and libraries are
installed correctly"): kernel modules, rdma-core's provider, the HCAs as verbs sees them, the NCCL
library, and GPUDirect RDMA. Each skips with its reason where the node has nothing to judge."""

from __future__ import annotations

from gpunet.checks.base import NO_GPU_HERE, Context, FunctionCheck, Outcome, no_gpu_here
from gpunet.model.plan import Interface
from gpunet.model.state import VerbsDevice

VERBS_MODULES = ("ib_core", "ib_uverbs")  # every RDMA NIC: the verbs core and its user-space door
FAMILY_MODULES = {"mlx5": ("mlx5_core", "mlx5_ib"), "mlx4": ("mlx4_core", "mlx4_ib"), "bnxt_re": ("bnxt_re",),
                  "irdma": ("irdma",), "efa": ("efa",)}
ROCE_MODULES = ("rdma_cm", "rdma_ucm")  # RoCE: connections by IP address (NCCL_IB_GID_INDEX, rdma_cm)
LINK_LAYERS = {"infiniband": "InfiniBand", "roce": "Ethernet"}


def _hcas(ctx: Context) -> list[Interface]:
    return [i for i in ctx.planned() if i.hca]


def _family(hca: str) -> str:
    """mlx5_3 -> mlx5; a renamed device (ibp12s0) has no family to go by."""
    head, _, tail = hca.rpartition("_")
    return head if tail.isdigit() else ""


def _technology(ctx: Context, iface: Interface) -> str:
    assert ctx.plan is not None
    return next(p.technology for p in ctx.plan.planes if p.name == iface.plane)


def kernel_modules(ctx: Context) -> list[Outcome]:
    hcas = _hcas(ctx)
    loaded = ctx.state.rdma.kernel_modules
    if not hcas:
        return [Outcome("skip", evidence="no RDMA NIC in the plan for this node")]
    if loaded is None:
        return [Outcome("skip", evidence="/proc/modules not readable (a container, or built-in drivers)")]
    wanted = list(VERBS_MODULES)
    for iface in hcas:
        wanted += FAMILY_MODULES.get(_family(iface.hca or ""), ())
        wanted += ROCE_MODULES if _technology(ctx, iface) == "roce" else ()
    missing = [m for m in dict.fromkeys(wanted) if m not in loaded]
    observed = f"{', '.join(missing)} not loaded" if missing else "loaded"
    return [Outcome("fail" if missing else "pass", "modules", observed, ", ".join(dict.fromkeys(wanted)),
                    "/proc/modules", f"modprobe -a {' '.join(missing)}")]


def providers(ctx: Context) -> list[Outcome]:
    families = {_family(i.hca or "") for i in _hcas(ctx)} - {""}
    if not families:
        return [Outcome("skip", evidence="no RDMA NIC of a known family (mlx5_N, ...) in the plan for this node")]
    present = set(ctx.state.rdma.providers)
    missing = sorted(families - present)
    return [Outcome("fail" if missing else "pass", "rdma-core",
                    f"no provider for {', '.join(missing)}" if missing else f"lib{', lib'.join(sorted(families))}",
                    ", ".join(f"lib{f}" for f in sorted(families)), "libibverbs provider directory",
                    "install rdma-core's providers (Debian/Ubuntu: ibverbs-providers; RHEL: libibverbs)")]


def verbs_devices(ctx: Context) -> list[Outcome]:
    hcas = _hcas(ctx)
    devices = ctx.state.rdma.verbs_devices
    if not hcas:
        return [Outcome("skip", evidence="no RDMA NIC in the plan for this node")]
    if devices is None:
        return [Outcome("skip", evidence="ibv_devinfo not installed (Debian/Ubuntu: ibverbs-utils)")]
    if not devices:
        return [Outcome("skip", evidence="ibv_devinfo finds no RDMA device here (none installed, or no RDMA in the "
                                         "kernel): nothing to compare with the plan")]
    seen = {d.hca: d for d in devices}
    return [_device(ctx, iface, seen) for iface in hcas]


def _device(ctx: Context, iface: Interface, seen: dict[str, VerbsDevice]) -> Outcome:
    device = seen.get(iface.hca or "")
    layer = LINK_LAYERS.get(_technology(ctx, iface), "")
    if device is None:
        return Outcome("fail", f"{iface.hca}", "not seen by ibv_devinfo", f"{iface.hca} with an active {layer} port",
                       fix=f"check the driver and firmware of {iface.hca} (ibv_devinfo -d {iface.hca}; dmesg)")
    active = [p for p in device.ports if p.state == "PORT_ACTIVE" and (not layer or p.link_layer == layer)]
    shown = ", ".join(f"port {p.port} {p.state} {p.link_layer}" for p in device.ports)
    return Outcome("pass" if active else "fail", f"{iface.hca}", shown, f"a PORT_ACTIVE {layer} port",
                   "ibv_devinfo", f"ibv_devinfo -d {iface.hca}; cable, switch port and subnet manager (IB)")


def nccl_library(ctx: Context) -> list[Outcome]:
    if ctx.node is None or ctx.node.gpus == 0:
        return [Outcome("skip", evidence="no GPUs in the plan for this node")]
    if no_gpu_here(ctx):
        return [NO_GPU_HERE]
    library = ctx.state.rdma.nccl
    if library is None:
        return [Outcome("warn", "libnccl", "not in the dynamic linker's cache", "libnccl.so.2",
                        "ldconfig -p", "jobs in containers bring their own NCCL; on the host: install libnccl2 "
                        "(NVIDIA's CUDA repository)")]
    version = library.removeprefix("libnccl.so.")
    return [Outcome("pass", "libnccl", version, "libnccl.so.2", "ldconfig -p")]


def gpudirect(ctx: Context) -> list[Outcome]:
    if ctx.node is None or ctx.node.gpus == 0 or not _hcas(ctx):
        return [Outcome("skip", evidence="GPUDirect RDMA needs GPUs and RDMA NICs on this node in the plan")]
    loaded = ctx.state.rdma.kernel_modules
    if loaded is None or "nvidia" not in loaded:
        return [Outcome("skip", evidence="no NVIDIA kernel module loaded here: the GPU side cannot be judged")]
    if "nvidia_peermem" in loaded:
        return [Outcome("pass", "GPUDirect RDMA", "nvidia_peermem loaded", "nvidia_peermem or dma-buf")]
    return [Outcome("warn", "GPUDirect RDMA", "nvidia_peermem not loaded", "nvidia_peermem or dma-buf",
                    "/proc/modules", "modprobe nvidia_peermem; or, with kernel >= 5.12 and driver >= 515, NCCL "
                    "uses dma-buf (NCCL_DMABUF_ENABLE=1): without either, NCCL copies through host memory")]


STACK_CHECKS = [
    FunctionCheck("GN-RDMA-01", "rdma", "the kernel modules of the planned RDMA NICs are loaded", "", kernel_modules),
    FunctionCheck("GN-RDMA-02", "rdma", "rdma-core has a provider for the planned RDMA NICs", "", providers),
    FunctionCheck("GN-RDMA-03", "rdma", "ibv_devinfo shows each planned HCA with an active port", "", verbs_devices),
    FunctionCheck("GN-NCCL-02", "nccl", "the NCCL library is installed", "", nccl_library),
    FunctionCheck("GN-GDR-01", "rdma", "GPUDirect RDMA is available (nvidia_peermem or dma-buf)", "", gpudirect),
]
