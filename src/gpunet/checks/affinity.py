"""GPU-to-NIC affinity against the Plan's rails: GPU i's nearest NIC (nvidia-smi topo -m) should be the
NIC the Plan gives rail i, not one across the CPU interconnect, and the NCCL_IB_HCA a job ran with
should list every GPU's nearest NIC (nccl#1435: GPUs 0,1 slower than 6,7 through affinity)."""

from __future__ import annotations

from gpunet.checks.base import NO_GPU_HERE, Context, FunctionCheck, Outcome, no_gpu_here
from gpunet.model.plan import Interface
from gpunet.model.rdma import TopoMatrix

NCCL_PLANE = "compute"  # the plane NCCL's RDMA traffic rides (model/tuning.py)


def rail_nics(ctx: Context) -> list[tuple[str, Interface]]:
    """(GPU<i>, the compute interface of rail i) for the node's GPUs, in rail order: NCCL's ranks of a
    node use GPU i with NIC i on a rail-optimized fabric."""
    ifaces = sorted((i for i in ctx.planned() if i.plane == NCCL_PLANE and i.hca and i.rail is not None),
                    key=lambda i: i.rail or 0)
    gpus = ctx.node.gpus if ctx.node else 0
    return [(f"GPU{n}", iface) for n, iface in enumerate(ifaces[:gpus])]


def _topology(ctx: Context) -> tuple[TopoMatrix | None, Outcome | None]:
    """The node's topology, or the skip that says why there is none to judge."""
    if ctx.node is None or ctx.node.gpus == 0 or not rail_nics(ctx):
        return None, Outcome("skip", evidence="no GPUs with RDMA NICs on rails in the plan for this node")
    if no_gpu_here(ctx):
        return None, NO_GPU_HERE
    topo = ctx.state.rdma_host.topo if ctx.state.rdma_host else None
    if topo is None:
        return None, Outcome("skip", evidence="nvidia-smi topo -m could not be read here (no NVIDIA driver, or "
                                              "nvidia-smi missing): GPU-NIC distances unknown")
    return topo, None


def nearest_is_rail(ctx: Context) -> list[Outcome]:
    topo, skip = _topology(ctx)
    if topo is None:
        return [skip] if skip else []
    return [_nearest(topo, gpu, iface) for gpu, iface in rail_nics(ctx)
            if topo.links.get(gpu, {}).get(iface.hca or "") != "SYS"]  # across sockets: GN-AFF-02's


def _nearest(topo: TopoMatrix, gpu: str, iface: Interface) -> Outcome:
    hca = iface.hca or ""
    nearest = topo.nearest(gpu)
    link = topo.links.get(gpu, {}).get(hca)
    subject = f"{gpu} rail {iface.rail} ({hca})"
    if link is None:
        return Outcome("fail", subject, f"{hca} not in nvidia-smi topo -m", f"{hca} nearest to {gpu}",
                       "nvidia-smi topo -m", f"check the spec's nics.compute.hcas: this node's NICs are "
                                                 f"{', '.join(topo.nics)}")
    shown = f"{hca} is {link}; nearest {', '.join(nearest)} ({topo.links[gpu][nearest[0]]})"
    if hca in nearest:
        return Outcome("pass", subject, shown, f"{hca} nearest", "nvidia-smi topo -m")
    return Outcome("fail", subject, shown, f"{hca} nearest to {gpu}", "nvidia-smi topo -m",
                   f"list the HCAs in GPU order in the spec (nics.compute.hcas: {_gpu_order(topo)}) and "
                   "re-render, or re-cable so rail i's NIC sits on GPU i's PCIe switch")


def _gpu_order(topo: TopoMatrix) -> str:
    return "[" + ", ".join(topo.nearest(g)[0] for g in topo.gpus) + "]"


def not_across_sockets(ctx: Context) -> list[Outcome]:
    topo, skip = _topology(ctx)
    if topo is None:
        return [skip] if skip else []
    outcomes = []
    for gpu, iface in rail_nics(ctx):
        link = topo.links.get(gpu, {}).get(iface.hca or "")
        if link is None:
            continue  # not in the topology: GN-AFF-01 says so
        subject = f"{gpu} rail {iface.rail} ({iface.hca})"
        fix = (f"{gpu}'s rail NIC {iface.hca} is on the other CPU socket: every byte crosses the CPU interconnect "
               f"(UPI/xGMI). Put rail {iface.rail}'s NIC on {gpu}'s socket (slot or spec nics.compute.hcas order "
               f"{_gpu_order(topo)})")
        outcomes.append(Outcome("fail" if link == "SYS" else "pass", subject, link, "not SYS (same socket)",
                                "nvidia-smi topo -m", fix if link == "SYS" else ""))
    return outcomes


def nccl_ib_hca(ctx: Context) -> list[Outcome]:
    """The job's NCCL_IB_HCA (its log's "NCCL_IB_HCA set to", else nccl.env) lists every GPU's nearest NIC,
    and only NICs this node has."""
    topo, skip = _topology(ctx)
    if topo is None:
        return [skip] if skip else []
    value, source = _ib_hca_setting(ctx)
    if value is None:
        return [Outcome("skip", evidence="NCCL_IB_HCA is not set in nccl.env or in an NCCL log given to doctor")]
    listed = _hca_names(value)
    wanted = list(dict.fromkeys(topo.nearest(g)[0] for g in topo.gpus))
    missing = [h for h in wanted if h not in listed]
    unknown = [h for h in listed if h not in topo.nics]
    ok = not missing and not unknown and not value.startswith("^")
    observed = value + (f" (missing {', '.join(missing)})" if missing else "") + (
        f" (not on this node: {', '.join(unknown)})" if unknown else "")
    return [Outcome("pass" if ok else "fail", "NCCL_IB_HCA", observed, "=" + ",".join(f"{h}:1" for h in wanted),
                    source, "" if ok else f"set NCCL_IB_HCA={'=' + ','.join(f'{h}:1' for h in wanted)} for the job "
                    "(source /etc/gpunet/nccl.env from gpunet render --target nccl; a job script or container "
                    "that sets its own NCCL_IB_HCA overrides it)")]


def _ib_hca_setting(ctx: Context) -> tuple[str | None, str]:
    log = ctx.state.rdma_host.nccl_log if ctx.state.rdma_host else None
    if log is not None and log.ib_hca:
        return log.ib_hca, "the NCCL log (NCCL_IB_HCA set to)"
    env = ctx.state.nccl_env or {}
    return env.get("NCCL_IB_HCA"), "/etc/gpunet/nccl.env"


def _hca_names(value: str) -> list[str]:
    """'=mlx5_0:1,mlx5_1:1' -> [mlx5_0, mlx5_1] ('=' exact match, '^' exclusion, ':port')."""
    return [item.lstrip("=^").split(":")[0] for item in value.lstrip("=^").split(",") if item.strip()]


AFFINITY_CHECKS = [
    FunctionCheck("GN-AFF-01", "affinity", "each GPU's nearest NIC is its rail's NIC", "", nearest_is_rail),
    FunctionCheck("GN-AFF-02", "affinity", "no GPU reaches its rail NIC across CPU sockets (SYS)", "",
                  not_across_sockets),
    FunctionCheck("GN-AFF-03", "affinity", "NCCL_IB_HCA lists every GPU's nearest NIC", "", nccl_ib_hca),
]
