"""Grafana: one provisionable dashboard of the gpunet exporter's metrics (docs/metrics.md), and the
provisioning files that load it and its Prometheus datasource.

Install: copy grafana/provisioning/{dashboards,datasources}/gpunet.yml into Grafana's
provisioning directory (/etc/grafana/provisioning/) and grafana/dashboards/ to DASHBOARD_DIR.
The datasource is the Prometheus of site.monitoring when that is one address (a /32), else
Prometheus on the Grafana host itself (localhost:9090)."""

from __future__ import annotations

import json
from typing import Any

from gpunet.model.plan import Plan
from gpunet.render.common import header, to_yaml
from gpunet.render.prometheus import PEER_WINDOW

DASHBOARD_PATH = "grafana/dashboards/gpunet-network.json"
DASHBOARDS_PROVISIONING_PATH = "grafana/provisioning/dashboards/gpunet.yml"
DATASOURCES_PROVISIONING_PATH = "grafana/provisioning/datasources/gpunet.yml"
DASHBOARD_DIR = "/var/lib/grafana/dashboards/gpunet"
DATASOURCE_UID = "gpunet-prometheus"
PROMETHEUS_PORT = 9090
SCHEMA_VERSION = 39  # Grafana 10.x
PANEL_HEIGHT, PANEL_WIDTH, GRID_WIDTH = 8, 12, 24  # two panels a row on Grafana's 24-column grid
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
IFACE = 'plane=~"$plane", leaf=~"$leaf", node=~"$node"'  # every interface metric carries these
HOST = 'leaf=~"$leaf", node=~"$node"'  # node-wide metrics (TCP): no plane label
HCA = IFACE  # InfiniBand/RoCE metrics carry the plane of the HCA's interface
LEAF_IFACE = 'plane="compute", leaf=~"$leaf", leaf!="", node=~"$node"'  # the leaf label is the compute leaf
LEAF_HCA = LEAF_IFACE
WINDOW = "[$__rate_interval]"
# A bond's members carry its traffic too: summed per plane, only the bond counts.
NOT_BOND_MEMBERS = "unless on(node, device) gpunet_bond_member_up"
PEER = 'plane=~"$plane", node=~"$node"'  # peer metrics: plane and peer, no device
# RoCE hw_counters worth a graph: congestion notifications (CNPs sent/handled, ECN marks) and
# the go-back-N symptoms of loss on a lossless fabric (out of sequence, sequence errors, timeouts).
ROCE_COUNTERS = ("np_cnp_sent|rp_cnp_handled|np_ecn_marked_roce_packets|out_of_sequence|packet_seq_err"
                 "|local_ack_timeout_err")

# Sections: (row title, [(panel title, unit, [(legend, PromQL)])]); a table panel has unit "table".
Panel = tuple[str, str, list[tuple[str, str]]]


def _rate(metric: str, labels: str) -> str:
    return f"rate({metric}{{{labels}}}{WINDOW})"


def _bits(metric: str, by: str, labels: str = IFACE) -> str:
    return f"sum by ({by}) ({_rate(metric, labels)}) * 8"


def _plane_bits(metric: str) -> str:
    return f"sum by (plane) ({_rate(metric, IFACE)} {NOT_BOND_MEMBERS}) * 8"


def sections() -> list[tuple[str, list[Panel]]]:
    return [
        ("Throughput by plane", [
            ("Receive by plane", "bps", [("{{plane}}", _plane_bits("gpunet_network_receive_bytes_total"))]),
            ("Transmit by plane", "bps", [("{{plane}}", _plane_bits("gpunet_network_transmit_bytes_total"))]),
        ]),
        ("Errors, drops and retransmissions", [
            ("Errors per second", "pps", [
                ("{{node}} {{device}} rx", _rate("gpunet_network_receive_errors_total", IFACE) + " > 0"),
                ("{{node}} {{device}} tx", _rate("gpunet_network_transmit_errors_total", IFACE) + " > 0")]),
            ("Drops per second", "pps", [
                ("{{node}} {{device}} rx", _rate("gpunet_network_receive_drops_total", IFACE) + " > 0"),
                ("{{node}} {{device}} tx", _rate("gpunet_network_transmit_drops_total", IFACE) + " > 0")]),
            ("TCP retransmission ratio", "percentunit", [
                ("{{node}}", f"{_rate('gpunet_tcp_retransmitted_segments_total', HOST)}"
                             f" / {_rate('gpunet_tcp_out_segments_total', HOST)}")]),
        ]),
        ("InfiniBand and RoCE", [
            ("InfiniBand data", "bps", [
                ("{{node}} {{device}}/{{port}} rx", _bits("gpunet_infiniband_port_data_received_bytes_total",
                                                          "node, device, port", HCA)),
                ("{{node}} {{device}}/{{port}} tx", _bits("gpunet_infiniband_port_data_transmitted_bytes_total",
                                                          "node, device, port", HCA))]),
            ("InfiniBand symbol errors and link downs", "short", [
                ("{{node}} {{device}}/{{port}} symbol errors",
                 f"increase(gpunet_infiniband_symbol_errors_total{{{HCA}}}{WINDOW}) > 0"),
                ("{{node}} {{device}}/{{port}} link downed",
                 f"increase(gpunet_infiniband_link_downed_total{{{HCA}}}{WINDOW}) > 0")]),
            ("RoCE congestion and ordering (hw counters)", "cps", [
                ("{{node}} {{device}} {{counter}}",
                 _rate("gpunet_infiniband_hw_counter_total", f'{HCA}, counter=~"{ROCE_COUNTERS}"') + " > 0")]),
        ]),
        ("Per compute leaf (the leaf label: a rail-optimized unit is named by its rail-0 leaf)", [
            ("Compute traffic per leaf", "bps", [
                ("{{leaf}} IP", _bits("gpunet_network_receive_bytes_total", "leaf", LEAF_IFACE)),
                ("{{leaf}} RDMA", _bits("gpunet_infiniband_port_data_received_bytes_total", "leaf", LEAF_HCA))]),
            ("Errors and drops per leaf", "pps", [
                ("{{leaf}} errors", f'sum by (leaf) ({_rate("gpunet_network_receive_errors_total", LEAF_IFACE)})'),
                ("{{leaf}} drops", f'sum by (leaf) ({_rate("gpunet_network_receive_drops_total", LEAF_IFACE)})'),
                ("{{leaf}} IB symbol errors",
                 f'sum by (leaf) ({_rate("gpunet_infiniband_symbol_errors_total", LEAF_HCA)})')]),
        ]),
        ("Fabric: switch and HCA ports per Plan cable (the fabric exporter)", [
            ("Port errors per cable", "short", [
                ("{{cable}} {{counter}}", f'sum by (cable, counter) (increase(gpunet_fabric_port_errors_total'
                 f'{{plane=~"$plane", counter!="PortXmitWait"}}{WINDOW})) > 0')]),
            ("Congestion per cable (PortXmitWait: waiting for credits, not damage)", "short", [
                ("{{cable}}", 'sum by (cable) (increase(gpunet_fabric_port_errors_total{plane=~"$plane", '
                 f'counter="PortXmitWait"}}{WINDOW})) > 0')]),
        ]),
        ("Plan drift and peers", [
            ("Plan drift (observed differs from the Plan)", "table", [
                ("", f"gpunet_plan_drift{{{IFACE}}} == 1")]),
            ("Peer RTT, 99th percentile", "s", [
                ("{{node}} → {{peer}} ({{plane}})", "histogram_quantile(0.99, sum by (le, node, peer, plane) "
                 f"(rate(gpunet_peer_rtt_seconds_bucket{{{PEER}}}[{PEER_WINDOW}])))")]),
        ]),
    ]


def render_grafana(plan: Plan) -> dict[str, str]:
    return {DASHBOARD_PATH: render_dashboard(plan),
            DASHBOARDS_PROVISIONING_PATH: render_dashboard_provider(),
            DATASOURCES_PROVISIONING_PATH: render_datasource(plan)}


def render_dashboard(plan: Plan) -> str:
    dashboard = {
        "uid": f"gpunet-{plan.site.name}"[:40], "title": f"gpunet network: {plan.site.name}",
        "tags": ["gpunet"], "timezone": "browser", "schemaVersion": SCHEMA_VERSION, "version": 1,
        "refresh": "30s", "time": {"from": "now-1h", "to": "now"}, "editable": True,
        "templating": {"list": _variables()}, "panels": _panels(), "annotations": {"list": []},
    }
    return json.dumps(dashboard, indent=1, ensure_ascii=False) + "\n"


def _variables() -> list[dict[str, Any]]:
    datasource = {"name": "datasource", "label": "Prometheus", "type": "datasource",
                  "query": "prometheus", "current": {"text": DATASOURCE_UID, "value": DATASOURCE_UID}}
    return [datasource, *(_label_variable(name, selector) for name, selector in (
        ("plane", ""), ("leaf", 'plane=~"$plane"'), ("node", 'plane=~"$plane", leaf=~"$leaf"')))]


def _label_variable(name: str, selector: str) -> dict[str, Any]:
    metric = f"gpunet_network_receive_bytes_total{{{selector}}}" if selector else "gpunet_network_receive_bytes_total"
    query = f"label_values({metric}, {name})"
    return {"name": name, "type": "query", "datasource": DATASOURCE, "query": {"query": query, "refId": name},
            "definition": query, "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
            "current": {"text": "All", "value": "$__all"}, "sort": 1}


def _panels() -> list[dict[str, Any]]:
    panels: list[dict[str, Any]] = []
    y = 0
    for title, row in sections():
        panels.append({"id": len(panels) + 1, "type": "row", "title": title, "collapsed": False,
                       "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y}, "panels": []})
        y += 1
        for index, spec in enumerate(row):
            x = (index % 2) * PANEL_WIDTH
            panels.append(_panel(len(panels) + 1, spec, {"h": PANEL_HEIGHT, "w": PANEL_WIDTH, "x": x, "y": y}))
            y += PANEL_HEIGHT if x else 0
        y += PANEL_HEIGHT if len(row) % 2 else 0
    return panels


def _panel(panel_id: int, spec: Panel, grid: dict[str, int]) -> dict[str, Any]:
    title, unit, queries = spec
    table = unit == "table"
    targets = [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend,
                **({"format": "table", "instant": True} if table else {"range": True})}
               for i, (legend, expr) in enumerate(queries)]
    panel: dict[str, Any] = {"id": panel_id, "type": "table" if table else "timeseries", "title": title,
                             "datasource": DATASOURCE, "gridPos": grid, "targets": targets}
    if table:
        panel["transformations"] = [{"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True}}}]
    else:
        panel["fieldConfig"] = {"defaults": {"unit": unit}, "overrides": []}
        panel["options"] = {"legend": {"displayMode": "table", "placement": "right", "calcs": ["max", "mean"]}}
    return panel


def render_dashboard_provider() -> str:
    provider = {"name": "gpunet", "folder": "gpunet", "type": "file", "disableDeletion": False,
                "allowUiUpdates": False, "options": {"path": DASHBOARD_DIR, "foldersFromFilesStructure": False}}
    return (header("Grafana dashboard provisioning") +
            f"# Copy grafana/dashboards/*.json to {DASHBOARD_DIR}.\n" +
            to_yaml({"apiVersion": 1, "providers": [provider]}))


def render_datasource(plan: Plan) -> str:
    datasource = {"name": "gpunet Prometheus", "uid": DATASOURCE_UID, "type": "prometheus", "access": "proxy",
                  "url": prometheus_url(plan), "isDefault": False, "editable": False}
    return (header("Grafana datasource provisioning") +
            "# The Prometheus of site.monitoring when that is one address, else the one on this host.\n" +
            to_yaml({"apiVersion": 1, "datasources": [datasource]}))


def prometheus_url(plan: Plan) -> str:
    monitoring = plan.site.monitoring
    host = str(monitoring.network_address) if monitoring is not None and monitoring.num_addresses == 1 \
        else "localhost"
    return f"http://{host}:{PROMETHEUS_PORT}"
