"""Host RoCE QoS at boot: for every RoCE NIC of the node, the plane's lossless class (plan.qos, the
values the switches are rendered from): trust DSCP, DSCP -> priority for data and CNPs, PFC on the
RoCE priority only, ECN notification and reaction point on it, the CNP's DSCP and priority, and the
traffic class RDMA-CM connections get (cma_roce_tos; MLNX_OFED's tc/1/traffic_class). A script run by
a systemd oneshot before the network is up; DRY_RUN=1 prints the commands instead of running them."""

from __future__ import annotations

from gpunet.model.plan import Interface, Node, Plan
from gpunet.model.qos import RoceQos
from gpunet.render.common import header
from gpunet.render.quote import shell_word

SCRIPT_PATH = "usr/local/sbin/gpunet-roce-qos"
UNIT_PATH = "etc/systemd/system/gpunet-roce-qos.service"
PRELUDE = """set -euo pipefail
# DRY_RUN=1: print each command, change nothing (what doctor's GN-QOS checks will expect).
run() { if [ "${DRY_RUN:-0}" = 1 ]; then printf '%s\\n' "$*"; else "$@"; fi; }
put() { if [ "${DRY_RUN:-0}" = 1 ]; then printf 'echo %s > %s\\n' "$1" "$2"; else echo "$1" > "$2"; fi; }
# MLNX_OFED's per-device traffic class file; without it cma_roce_tos alone sets the RDMA-CM default.
put_if() { if [ "${DRY_RUN:-0}" = 1 ] || [ -e "$2" ]; then put "$1" "$2"; fi; }
# An RDMA device may be absent (RoCE LAG names it mlx5_bond_N): its steps are skipped, not failed.
has() { [ "${DRY_RUN:-0}" = 1 ] || [ -d "/sys/class/infiniband/$1" ]; }
"""
UNIT = """[Unit]
Description=gpunet RoCE QoS: trust DSCP, PFC and ECN on the lossless priority (plan.qos)
Documentation=https://github.com/Mellanox/mlnx-tools
After=openibd.service systemd-udev-settle.service
Before=network-pre.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/bash /{script}

[Install]
WantedBy=multi-user.target
"""


def roce_interfaces(plan: Plan, node: Node) -> list[tuple[Interface, RoceQos]]:
    """The node's cabled RDMA ports on planes with a RoCE class (bond members: QoS is per port)."""
    qos = {p.name: p.qos for p in plan.planes if p.qos is not None}
    return [(i, qos[i.plane]) for i in node.interfaces if i.cabled and i.hca and i.plane in qos]


def render_roce_qos_script(plan: Plan, node: Node) -> str:
    body = "".join(_interface(iface, qos) for iface, qos in roce_interfaces(plan, node))
    return "#!/bin/bash\n" + header("RoCE QoS") + PRELUDE + body


def _interface(iface: Interface, qos: RoceQos) -> str:
    dev, hca = shell_word(iface.name), shell_word(iface.hca or "")
    ecn = f"/sys/class/net/{dev}/ecn"
    pfc = ",".join("1" if p == qos.priority else "0" for p in range(8))
    lines = [
        f"\n# {iface.plane}: {iface.name} ({iface.hca}): DSCP {qos.dscp} -> priority {qos.priority} (PFC"
        f"{', ECN' if qos.ecn else ''}), CNP DSCP {qos.cnp_dscp} -> priority {qos.cnp_priority}",
        f"run mlnx_qos -i {dev} --trust dscp",
        f"run mlnx_qos -i {dev} --dscp2prio set,{qos.dscp},{qos.priority}",
        f"run mlnx_qos -i {dev} --dscp2prio set,{qos.cnp_dscp},{qos.cnp_priority}",
        f"run mlnx_qos -i {dev} --pfc {pfc}",
    ]
    if qos.ecn:
        lines += [f"put 1 {ecn}/roce_np/enable/{qos.priority}", f"put 1 {ecn}/roce_rp/enable/{qos.priority}"]
    lines += [f"put {qos.cnp_dscp} {ecn}/roce_np/cnp_dscp", f"put {qos.cnp_priority} {ecn}/roce_np/cnp_802p_prio",
              f"if has {hca}; then",
              f"  run cma_roce_tos -d {hca} -t {qos.traffic_class}",
              f"  put_if {qos.traffic_class} /sys/class/infiniband/{hca}/tc/1/traffic_class",
              "fi"]
    return "\n".join(lines) + "\n"


def render_roce_qos_unit(plan: Plan, node: Node) -> str:
    return header("RoCE QoS unit") + UNIT.format(script=SCRIPT_PATH)


def render_roce_qos(plan: Plan, node: Node) -> dict[str, str]:
    """Both files, for nodes with a RoCE NIC; nothing for the others."""
    if not roce_interfaces(plan, node):
        return {}
    return {SCRIPT_PATH: render_roce_qos_script(plan, node), UNIT_PATH: render_roce_qos_unit(plan, node)}
