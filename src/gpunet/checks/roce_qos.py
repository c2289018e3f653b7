"""RoCE QoS on the host, against the plane's lossless class (plan.qos, the same values the switches are
rendered from): DSCP trust, DSCP -> priority for data and CNPs, PFC on the RoCE priority, ECN enabled
for it, and the GID index NCCL uses pointing at RoCE v2 with the plane address (nccl#2383, #378, #426).
Fixes name `gpunet render --target roce_qos`, the boot unit that sets all of it."""

from __future__ import annotations

from collections.abc import Callable

from gpunet.checks.base import Context, FunctionCheck, Outcome
from gpunet.model.plan import Interface
from gpunet.model.qos import RoceQos
from gpunet.model.rdma import RoceNic
from gpunet.model.tuning import ROCE_V2_IPV4_GID_INDEX

UNIT = "gpunet-roce-qos.service (gpunet render --target roce_qos)"
Judge = Callable[[Interface, RoceQos, RoceNic], Outcome]


def _roce_ifaces(ctx: Context) -> list[tuple[Interface, RoceQos]]:
    """Planned interfaces with an RDMA device on a plane with a RoCE class (bond members included: the
    QoS is the physical port's)."""
    if ctx.plan is None:
        return []
    qos = {p.name: p.qos for p in ctx.plan.planes if p.qos is not None}
    return [(i, qos[i.plane]) for i in ctx.planned(cabled=True) if i.hca and i.plane in qos]


def _each(ctx: Context, judge: Judge) -> list[Outcome]:
    ifaces = _roce_ifaces(ctx)
    if not ifaces:
        return [Outcome("skip", evidence="no RoCE NIC on a plane with a RoCE class in the plan for this node")]
    host = ctx.state.rdma_host
    nics = {n.netdev: n for n in host.roce} if host else {}
    if not nics:
        return [Outcome("skip", evidence="no RoCE device here (/sys/class/infiniband has no Ethernet port)")]
    return [judge(i, q, nics[i.name]) if i.name in nics else
            Outcome("skip", i.name, evidence=f"{i.name} is not a RoCE device here") for i, q in ifaces]


def _qos_read(iface: Interface, nic: RoceNic) -> Outcome | None:
    if nic.qos is None:
        return Outcome("skip", iface.name, evidence=f"mlnx_qos -i {iface.name} could not be read (MLNX_OFED's "
                                                    "mlnx-tools not installed?)")
    return None


def trust(ctx: Context) -> list[Outcome]:
    def judge(iface: Interface, qos: RoceQos, nic: RoceNic) -> Outcome:
        if (skip := _qos_read(iface, nic)) or nic.qos is None:
            return skip or Outcome("skip")
        ok = nic.qos.trust == "dscp"
        return Outcome("pass" if ok else "fail", iface.name, nic.qos.trust, "dscp", f"mlnx_qos -i {iface.name}",
                       "" if ok else f"mlnx_qos -i {iface.name} --trust dscp ({UNIT})")
    return _each(ctx, judge)


def dscp_map(ctx: Context) -> list[Outcome]:
    def judge(iface: Interface, qos: RoceQos, nic: RoceNic) -> Outcome:
        if (skip := _qos_read(iface, nic)) or nic.qos is None:
            return skip or Outcome("skip")
        if nic.qos.dscp2prio is None:
            return Outcome("skip", iface.name, evidence="mlnx_qos showed no dscp2prio map (trust pcp?)")
        got = (nic.qos.dscp2prio.get(qos.dscp), nic.qos.dscp2prio.get(qos.cnp_dscp))
        want = (qos.priority, qos.cnp_priority)
        ok = got == want
        return Outcome("pass" if ok else "fail", iface.name,
                       f"DSCP {qos.dscp} -> {got[0]}, CNP DSCP {qos.cnp_dscp} -> {got[1]}",
                       f"DSCP {qos.dscp} -> {want[0]}, CNP DSCP {qos.cnp_dscp} -> {want[1]}",
                       f"mlnx_qos -i {iface.name}", "" if ok else
                       f"mlnx_qos -i {iface.name} --dscp2prio set,{qos.dscp},{qos.priority} --dscp2prio "
                       f"set,{qos.cnp_dscp},{qos.cnp_priority} ({UNIT})")
    return _each(ctx, judge)


def pfc(ctx: Context) -> list[Outcome]:
    def judge(iface: Interface, qos: RoceQos, nic: RoceNic) -> Outcome:
        if (skip := _qos_read(iface, nic)) or nic.qos is None:
            return skip or Outcome("skip")
        enabled = nic.qos.pfc_enabled
        if enabled is None:
            return Outcome("skip", iface.name, evidence="mlnx_qos showed no PFC configuration")
        ok = qos.priority in enabled
        bitmap = ",".join("1" if p == qos.priority else "0" for p in range(8))
        return Outcome("pass" if ok else "fail", iface.name, f"PFC on {list(enabled) or 'no priority'}",
                       f"PFC on priority {qos.priority}", f"mlnx_qos -i {iface.name}",
                       "" if ok else f"mlnx_qos -i {iface.name} --pfc {bitmap} ({UNIT}); the switch port must "
                       f"run PFC on priority {qos.priority} too")
    return _each(ctx, judge)


def ecn(ctx: Context) -> list[Outcome]:
    def judge(iface: Interface, qos: RoceQos, nic: RoceNic) -> Outcome:
        if not qos.ecn:
            return Outcome("skip", iface.name, evidence="the plane's RoCE class does not use ECN")
        if nic.ecn is None or not nic.ecn.np:
            return Outcome("skip", iface.name, evidence=f"/sys/class/net/{iface.name}/ecn not present here")
        got = (nic.ecn.np.get(qos.priority), nic.ecn.rp.get(qos.priority))
        ok = got == (True, True)
        where = f"/sys/class/net/{iface.name}/ecn/roce_np|roce_rp/enable/{qos.priority}"
        return Outcome("pass" if ok else "fail", iface.name, f"np {_on(got[0])}, rp {_on(got[1])}", "np on, rp on",
                       where, "" if ok else f"echo 1 > {where} for both ({UNIT})")
    return _each(ctx, judge)


def _on(value: bool | None) -> str:
    return "unknown" if value is None else "on" if value else "off"


def gid_index(ctx: Context) -> list[Outcome]:
    """NCCL_IB_GID_INDEX (the rendered index) holds a RoCE v2 GID with the interface's plane address."""
    def judge(iface: Interface, qos: RoceQos, nic: RoceNic) -> Outcome:
        gids = [g for g in (ctx.state.rdma_host.gids or ()) if g.hca == iface.hca] if ctx.state.rdma_host else []
        if not gids:
            return Outcome("skip", iface.name, evidence=f"no GID of {iface.hca} readable here")
        address = (iface.address or "").split("/")[0]
        at = next((g for g in gids if g.index == ROCE_V2_IPV4_GID_INDEX), None)
        right = next((g for g in gids if g.version == "v2" and g.ipv4 == address), None)
        ok = at is not None and at is right
        shown = f"index {ROCE_V2_IPV4_GID_INDEX}: {at.version} {at.ipv4 or at.gid}" if at else "no GID at that index"
        fix = (f"the RoCE v2 GID of {address} is index {right.index} on {iface.hca}: remove the extra addresses on "
               f"{iface.name} that push it there, or set NCCL_IB_GID_INDEX={right.index} on this node"
               if right else f"{address} is not on {iface.name} as a RoCE v2 GID: check its address (GN-ADDR-01)")
        return Outcome("pass" if ok else "fail", iface.hca or "", shown, f"index {ROCE_V2_IPV4_GID_INDEX}: v2 "
                       f"{address}", f"/sys/class/infiniband/{iface.hca}/ports/1/gids", "" if ok else fix)
    return _each(ctx, judge)


ROCE_QOS_CHECKS = [
    FunctionCheck("GN-QOS-01", "roce", "RoCE NICs trust DSCP", "", trust),
    FunctionCheck("GN-QOS-02", "roce", "PFC is on for the plane's RoCE priority", "", pfc),
    FunctionCheck("GN-QOS-03", "roce", "RoCE data and CNP DSCPs map to the plane's priorities", "", dscp_map),
    FunctionCheck("GN-QOS-04", "roce", "ECN (notification and reaction point) is on for the RoCE priority", "", ecn),
    FunctionCheck("GN-QOS-05", "roce", "NCCL_IB_GID_INDEX points at RoCE v2 with the plane address", "", gid_index),
]
