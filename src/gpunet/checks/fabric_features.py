"""InfiniBand fabric features a plane declares: its partition (the P_Key the subnet manager must give
each planned HCA port, at the index NCCL_IB_PKEY names; nccl#1323) and in-network reduction (SHARP:
an NCCL log shows whether CollNet was used; nccl#1219, #1050)."""

from __future__ import annotations

from gpunet.checks.base import Context, FunctionCheck, Outcome
from gpunet.model.partition import Partition
from gpunet.model.plan import Interface

SM_FIX = ("add the port GUIDs of {hca} to partition 0x{key:04x} as full members in the subnet manager "
          "(opensm: partitions.conf `Name=0x{key:04x}, ipoib : ALL=full;` or the GUIDs), then restart it")


def _partitioned(ctx: Context) -> list[tuple[Interface, Partition]]:
    if ctx.plan is None:
        return []
    keys = {p.name: p.partition for p in ctx.plan.planes if p.partition is not None}
    return [(i, keys[i.plane]) for i in ctx.planned(cabled=True) if i.hca and i.plane in keys]


def _tables(ctx: Context) -> dict[str, tuple[int, ...]] | None:
    return ctx.state.rdma_host.pkeys if ctx.state.rdma_host else None


def pkey_member(ctx: Context) -> list[Outcome]:
    ifaces = _partitioned(ctx)
    if not ifaces:
        return [Outcome("skip", evidence="no plane with a partition (planes.X.partition) on this node")]
    tables = _tables(ctx)
    if not tables:
        return [Outcome("skip", evidence="no P_Key table readable here (/sys/class/infiniband/*/ports/*/pkeys)")]
    return [_member(i, p, tables.get(f"{i.hca}/1")) for i, p in ifaces]


def _member(iface: Interface, partition: Partition, table: tuple[int, ...] | None) -> Outcome:
    subject = f"{iface.hca}/1"
    if table is None:
        return Outcome("skip", subject, evidence=f"{iface.hca} port 1 has no P_Key table here")
    shown = ", ".join(f"[{n}] 0x{v:04x}" for n, v in enumerate(table) if v) or "empty"
    ok = any(partition.matches(v) for v in table)
    return Outcome("pass" if ok else "fail", subject, shown, f"0x{partition.key | 0x8000:04x} (full member)",
                   f"/sys/class/infiniband/{iface.hca}/ports/1/pkeys", "" if ok else
                   SM_FIX.format(hca=iface.hca, key=partition.key))


def pkey_index(ctx: Context) -> list[Outcome]:
    """NCCL_IB_PKEY (the plane's partition index) selects the partition in every planned port's table;
    ports without the partition at all are GN-PKEY-01's."""
    ifaces = _partitioned(ctx)
    tables = _tables(ctx) or {}
    if not ifaces or not tables:
        return [Outcome("skip", evidence="no partitioned plane on this node, or no P_Key table readable here")]
    outcomes = []
    for iface, partition in ifaces:
        table = tables.get(f"{iface.hca}/1", ())
        where = [n for n, v in enumerate(table) if partition.matches(v)]
        if not where:
            continue
        ok = partition.index in where
        outcomes.append(Outcome("pass" if ok else "fail", f"{iface.hca}/1", f"partition at index {where[0]}",
                                f"index {partition.index} (NCCL_IB_PKEY)", f"/sys/class/infiniband/{iface.hca}/ports/1/"
                                "pkeys", "" if ok else f"set planes.{iface.plane}.partition.index: {where[0]} in the "
                                "spec and re-render nccl.env (NCCL_IB_PKEY), or make the subnet manager put the "
                                f"partition at index {partition.index}"))
    return outcomes or [Outcome("skip", evidence="no planned port holds the partition (GN-PKEY-01)")]


def sharp_used(ctx: Context) -> list[Outcome]:
    if ctx.plan is None or ctx.node is None or not any(
            p.sharp for p in ctx.plan.planes if any(i.plane == p.name for i in ctx.node.interfaces)):
        return [Outcome("skip", evidence="no plane of this node offers in-network reduction (planes.X.sharp)")]
    log = ctx.state.rdma_host.nccl_log if ctx.state.rdma_host else None
    if log is None:
        return [Outcome("skip", evidence="no NCCL_DEBUG=INFO log given to doctor (--nccl-log)")]
    evidence = "; ".join(log.collnet_lines) or "no CollNet line in the log"
    if log.collnet:
        return [Outcome("pass", "CollNet", "used", "used", evidence)]
    return [Outcome("warn", "CollNet", "not used" if log.collnet is False else "not mentioned", "used", evidence,
                    "NCCL_COLLNET_ENABLE=1 (nccl.env), the SHARP plugin (HPC-X nccl-rdma-sharp-plugins) on "
                    "LD_LIBRARY_PATH, sharp_am running beside the subnet manager; NCCL falls back to rings "
                    "silently when any is missing")]


FABRIC_FEATURE_CHECKS = [
    FunctionCheck("GN-PKEY-01", "infiniband", "each planned HCA port is a full member of the plane's partition", "",
                  pkey_member),
    FunctionCheck("GN-PKEY-02", "infiniband", "NCCL_IB_PKEY's index holds the plane's partition", "", pkey_index),
    FunctionCheck("GN-SHARP-01", "infiniband", "NCCL used in-network reduction (CollNet/SHARP) the fabric offers",
                  "", sharp_used),
]
