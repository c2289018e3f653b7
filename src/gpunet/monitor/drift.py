"""Plan drift as gauges: for every interface the Plan gives this node, is it there with carrier,
at the planned MTU and speed, with its planned address? The same comparisons as doctor's
GN-LINK-01/02, GN-MTU-01 and GN-ADDR-01, cheap enough for every scrape."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

from gpunet.model.plan import Interface
from gpunet.model.state import InterfaceState
from gpunet.monitor.collectors import BITS_PER_BYTE, NodeView
from gpunet.probe.sysfs import read_interface

DRIFT_KINDS = ("link", "mtu", "speed", "address")


def collect_plan(view: NodeView) -> list[Metric]:
    host = [i for i in view.planned if i.plane != "oob"]  # a BMC's address is not the host's
    observed = planned_interfaces(view.root, {name for i in host for name in (i.name, i.layer3)})
    addresses = view.addresses() if any(i.address for i in host) else {}
    labels = ["device", "plane"]
    drift = GaugeMetricFamily("gpunet_plan_drift", "1 when the interface differs from the Plan.",
                              labels=[*labels, "kind"])
    mtu = GaugeMetricFamily("gpunet_plan_expected_mtu_bytes", "The Plan's MTU.", labels=labels)
    speed = GaugeMetricFamily("gpunet_plan_expected_speed_bytes_per_second", "The Plan's link speed.",
                              labels=labels)
    rdma = GaugeMetricFamily("gpunet_plan_expected_infiniband_rate_bytes_per_second",
                             "The Plan's rate of the RDMA device (HCA) behind the interface.", labels=labels)
    for planned in host:
        values = [planned.name, planned.plane]
        mtu.add_metric(values, planned.mtu)
        speed.add_metric(values, planned.speed_gbps * 1e9 / BITS_PER_BYTE)
        if planned.hca and planned.cabled:
            rdma.add_metric([planned.hca, planned.plane], planned.speed_gbps * 1e9 / BITS_PER_BYTE)
        for kind, drifted in interface_drift(planned, observed, addresses).items():
            drift.add_metric([*values, kind], 1 if drifted else 0)
    return [drift, mtu, speed, rdma]


def planned_interfaces(root: Path, names: set[str]) -> dict[str, InterfaceState]:
    """The link facts of the interfaces the Plan names, and only those (a node may have hundreds)."""
    found = {name: read_interface(f"{root}/sys/class/net/{name}", full=False) for name in sorted(names)}
    return {name: state for name, state in found.items() if state is not None}


def interface_drift(planned: Interface, observed: dict[str, InterfaceState],
                    addresses: dict[str, tuple[str, ...]]) -> dict[str, bool]:
    """Per kind, whether it drifted, judged as doctor judges it: link and speed on cabled NICs
    (GN-LINK-01/02; speed only where a physical link reports one, a veth's is fiction), MTU and
    address on the layer-3 device (bond0.20 for a VLAN; GN-MTU-01, GN-ADDR-01). A missing NIC
    drifts on `link` only: one cause, one alert."""
    seen = observed.get(planned.name)
    layer3 = observed.get(planned.layer3) or seen
    result: dict[str, bool] = {}
    if planned.cabled:
        result["link"] = seen is None or seen.operstate != "up" or not seen.carrier
        if seen is not None and not seen.virtual and seen.speed_mbps is not None:
            result["speed"] = seen.speed_mbps < planned.speed_gbps * 1000
    if layer3 is not None:
        result["mtu"] = layer3.mtu != planned.mtu
    if planned.address and (layer3 is not None or not planned.cabled):
        result["address"] = planned.address not in addresses.get(planned.layer3, ())
    return result
