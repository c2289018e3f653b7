"""SONiC's tables for a RoCE plane's lossless class, every value from the Plan's `plane.qos` (the
same object the hosts' NCCL_IB_TC and RoCE QoS are rendered from, so both ends agree):

* DSCP_TO_TC_MAP: RoCE data's DSCP to its priority, the CNPs' DSCP to theirs, all else to 0;
  TC_TO_QUEUE_MAP and MAP_PFC_PRIORITY_TO_QUEUE: one queue per class, the same number;
  TC_TO_PRIORITY_GROUP_MAP: the lossless class in a priority group of its own (its headroom).
* PORT_QOS_MAP per port: the maps, `pfc_enable` on the RoCE priority only, the PFC watchdog
  (`pfcwd_sw_enable`) on the same priority.
* SCHEDULER: the CNP queue strict priority (a CNP must not wait behind the data it slows down),
  RoCE and everything else DWRR 50/50 (NVIDIA's RoCE default ETS).
* WRED_PROFILE: ECN marking on the lossless queue (DCQCN needs the marks; with ECN off the queue
  gets no WRED at all, so a lossless queue never drops). Thresholds are NVIDIA's RoCE defaults
  (150 KB to 1.5 MB); tune per ASIC.
* QUEUE per port: scheduler and WRED per class. PFC_WD per port: drop on a PFC storm after
  200 ms, restore after 200 ms; GLOBAL poll 200 ms.
* CABLE_LENGTH per port: the headroom SONiC's dynamic buffer model sizes for the lossless
  priority group (5 m to nodes, 40 m between switches; its own defaults for such links).

Buffer pools and profiles are the platform's (SONiC derives the lossless ones from pfc_enable,
speed and cable length under buffer_model dynamic), so none are written here."""

from __future__ import annotations

from typing import Any

from gpunet.model.qos import RoceQos
from gpunet.model.switching import SwitchPort

MAP = "GPUNET"
LOSSLESS, LOSSY, CNP = "gpunet_lossless", "gpunet_lossy", "gpunet_cnp"
WRED = "GPUNET_LOSSLESS"
ECN_MIN_BYTES, ECN_MAX_BYTES, ECN_PROBABILITY = 153_600, 1_536_000, 5
PFC_WD_MS = 200
CABLE_HOST, CABLE_FABRIC = "5m", "40m"

Tables = dict[str, dict[str, Any]]


def qos_tables(qos: RoceQos, ports: list[tuple[str, SwitchPort]]) -> Tables:
    """Every QoS table for these (SONiC name, planned port) pairs."""
    names = [name for name, _ in ports]
    tables: Tables = {
        "DSCP_TO_TC_MAP": {MAP: {str(d): str(_class_of(qos, d)) for d in range(64)}},
        "TC_TO_QUEUE_MAP": {MAP: {str(tc): str(tc) for tc in range(8)}},
        "MAP_PFC_PRIORITY_TO_QUEUE": {MAP: {str(p): str(p) for p in range(8)}},
        "TC_TO_PRIORITY_GROUP_MAP": {MAP: {str(tc): str(tc if tc == qos.priority else 0) for tc in range(8)}},
        "SCHEDULER": {LOSSLESS: {"type": "DWRR", "weight": "50"}, LOSSY: {"type": "DWRR", "weight": "50"},
                      CNP: {"type": "STRICT"}},
        "PORT_QOS_MAP": {name: _port_map(qos) for name in names},
        "QUEUE": {k: v for name in names for k, v in _queues(qos, name).items()},
        "PFC_WD": {"GLOBAL": {"POLL_INTERVAL": str(PFC_WD_MS)}} | {
            name: {"action": "drop", "detection_time": str(PFC_WD_MS), "restoration_time": str(PFC_WD_MS)}
            for name in names},
        "CABLE_LENGTH": {MAP: {name: CABLE_FABRIC if port.kind == "fabric" else CABLE_HOST for name, port in ports}},
    }
    if qos.ecn:
        tables["WRED_PROFILE"] = {WRED: {
            "ecn": "ecn_all", "wred_green_enable": "true", "wred_yellow_enable": "true", "wred_red_enable": "true",
            "green_min_threshold": str(ECN_MIN_BYTES), "green_max_threshold": str(ECN_MAX_BYTES),
            "yellow_min_threshold": str(ECN_MIN_BYTES), "yellow_max_threshold": str(ECN_MAX_BYTES),
            "red_min_threshold": str(ECN_MIN_BYTES), "red_max_threshold": str(ECN_MAX_BYTES),
            "green_drop_probability": str(ECN_PROBABILITY), "yellow_drop_probability": str(ECN_PROBABILITY),
            "red_drop_probability": str(ECN_PROBABILITY)}}
    return tables


def _class_of(qos: RoceQos, dscp: int) -> int:
    return {qos.dscp: qos.priority, qos.cnp_dscp: qos.cnp_priority}.get(dscp, 0)


def _port_map(qos: RoceQos) -> dict[str, str]:
    return {"dscp_to_tc_map": MAP, "tc_to_queue_map": MAP, "tc_to_pg_map": MAP, "pfc_to_queue_map": MAP,
            "pfc_enable": str(qos.priority), "pfcwd_sw_enable": str(qos.priority)}


def _queues(qos: RoceQos, port: str) -> dict[str, dict[str, str]]:
    lossless = {"scheduler": LOSSLESS} | ({"wred_profile": WRED} if qos.ecn else {})
    return {f"{port}|{q}": {"scheduler": CNP} if q == qos.cnp_priority else
            lossless if q == qos.priority else {"scheduler": LOSSY} for q in range(8)}
