"""The ethtool collector: each physical NIC's flow-control and congestion counters (per-priority and
global pause frames, their durations and transitions, pause-storm events, per-priority discards, ECN
marks: probe/flow.py's selection of `ethtool -S`), the counters bench samples around every pair.
Named as node_exporter's ethtool collector names them, with gpunet's prefix: the statistic
lower-cased, `rx`/`tx` spelled `received`/`transmitted` (rx_prio3_pause ->
gpunet_ethtool_received_prio3_pause, node_exporter's node_ethtool_received_prio3_pause), untyped like
node_exporter's and with its value unchanged."""

from __future__ import annotations

import re

from prometheus_client.core import Metric, UntypedMetricFamily

from gpunet.errors import GpunetError
from gpunet.monitor.collectors import NodeView, warn_now_and_then
from gpunet.probe.flow import flow_counters
from gpunet.probe.parsers import parse_ethtool_stats
from gpunet.probe.sysfs import read_interfaces

RECEIVED = re.compile(r"(^|_)rx(_|$)")
TRANSMITTED = re.compile(r"(^|_)tx(_|$)")


def metric_name(statistic: str) -> str:
    """node_exporter's buildEthtoolFQName with the gpunet prefix."""
    name = re.sub(r"[^a-zA-Z0-9_]", "_", statistic).lower().lstrip("_")
    name = TRANSMITTED.sub(r"\1transmitted\2", RECEIVED.sub(r"\1received\2", name))
    return f"gpunet_ethtool_{name}"


def collect_ethtool(view: NodeView) -> list[Metric]:
    families: dict[str, UntypedMetricFamily] = {}
    planes = view.plane_of
    for iface in (i for i in read_interfaces(view.root, full=False) if not i.virtual):
        for statistic, value in sorted(_statistics(view, iface.name).items()):
            name = metric_name(statistic)
            family = families.setdefault(name, UntypedMetricFamily(
                name, f"{statistic} from ethtool -S (flow control and congestion).", labels=["device", "plane"]))
            family.add_metric([iface.name, planes.get(iface.name, "")], value)
    return list(families.values())


def _statistics(view: NodeView, device: str) -> dict[str, int]:
    """One NIC's flow counters; a NIC whose statistics cannot be read costs its own series only."""
    try:
        done = view.run(["ethtool", "-S", device], check=False, timeout=5)
        return flow_counters(parse_ethtool_stats(done.stdout)) if done.returncode == 0 else {}
    except GpunetError as exc:
        warn_now_and_then(f"ethtool {device}", f"ethtool -S {device}: {exc}")
        return {}
