"""Plan drift as gauges: for every interface the Plan gives this node, is it there with carrier,
at the planned MTU and speed, with its planned address? The same comparisons as doctor's
GN-LINK-01/02, GN-MTU-01 and GN-ADDR-01, cheap enough for every scrape."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily, Metric

from gpunet.model.plan import Interface
from gpunet.model.state import InterfaceState
from gpunet.monitor.collectors import BITS_PER_BYTE, NodeView
from gpunet.probe.sysfs import read_interfaces

DRIFT_KINDS = ("link", "mtu", "speed", "address")


def collect_plan(view: NodeView) -> list[Metric]:
    observed = {i.name: i for i in read_interfaces(view.root, full=False)}
    addresses = view.addresses() if any(i.address for i in view.planned) else {}
    labels = ["device", "plane"]
    drift = GaugeMetricFamily("gpunet_plan_drift", "1 when the interface differs from the Plan.",
                              labels=[*labels, "kind"])
    mtu = GaugeMetricFamily("gpunet_plan_expected_mtu_bytes", "The Plan's MTU.", labels=labels)
    speed = GaugeMetricFamily("gpunet_plan_expected_speed_bytes_per_second", "The Plan's link speed.",
                              labels=labels)
    rdma = GaugeMetricFamily("gpunet_plan_expected_infiniband_rate_bytes_per_second",
                             "The Plan's rate of the RDMA device (HCA) behind the interface.", labels=labels)
    for planned in view.planned:
        values = [planned.name, planned.plane]
        if planned.hca and planned.cabled:
            rdma.add_metric([planned.hca, planned.plane], planned.speed_gbps * 1e9 / BITS_PER_BYTE)
        mtu.add_metric(values, planned.mtu)
        speed.add_metric(values, planned.speed_gbps * 1e9 / BITS_PER_BYTE)
        for kind, drifted in interface_drift(planned, observed.get(planned.name), addresses).items():
            drift.add_metric([*values, kind], 1 if drifted else 0)
    return [drift, mtu, speed, rdma]


def interface_drift(planned: Interface, seen: InterfaceState | None,
                    addresses: dict[str, tuple[str, ...]]) -> dict[str, bool]:
    """Per kind, whether it drifted. A missing interface drifts on `link` only: one cause, one alert.
    Speed is judged only where the kernel reports a physical link's speed (a veth's is fiction)."""
    if seen is None:
        return {"link": True}
    result = {"link": not seen.carrier, "mtu": seen.mtu != planned.mtu}
    if not seen.virtual and seen.speed_mbps is not None:
        result["speed"] = seen.speed_mbps < planned.speed_gbps * 1000
    if planned.address:
        result["address"] = planned.address not in addresses.get(planned.name, ())
    return result
