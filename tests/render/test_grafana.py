"""The rendered Grafana dashboard: its structure (unique ids, a grid without overlaps, every query
with an expression and the ${datasource} variable), every PromQL expression accepted by the real
promtool (as recording rules) and made of documented metrics, and the provisioning files."""

from __future__ import annotations

import json
import re
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpunet.model.plan import Plan
from gpunet.render import grafana
from tests.render.rendered import example_plan
from tests.render.test_prometheus import METRICS_DOC, documented_metrics, metrics_in, needs_promtool, promtool

EXAMPLES = ("scalable-unit", "small-ethernet")
# Grafana's variables, as Prometheus would see them once Grafana has substituted them.
SUBSTITUTIONS = {"$__rate_interval": "5m", "$plane": ".*", "$leaf": ".*", "$node": ".*"}


def dashboard(example: str = "scalable-unit") -> dict[str, Any]:
    return json.loads(grafana.render_grafana(example_plan(example))[grafana.DASHBOARD_PATH])  # type: ignore[no-any-return]


def queries(board: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(panel["id"], target) for panel in board["panels"] for target in panel.get("targets", [])]


def as_prometheus(expr: str) -> str:
    for variable, value in SUBSTITUTIONS.items():
        expr = expr.replace(variable, value)
    return expr


def recording_rules(board: dict[str, Any]) -> str:
    rules = [{"record": f"gpunet_dashboard:panel{panel_id}_{target['refId']}", "expr": as_prometheus(target["expr"])}
             for panel_id, target in queries(board)]
    return yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, sort_keys=False)


@needs_promtool
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_dashboard_expression_parses_in_promtool(tmp_path: Path, example: str) -> None:
    (tmp_path / "dashboard.rules.yml").write_text(recording_rules(dashboard(example)))
    done = promtool(tmp_path, "check", "rules", "dashboard.rules.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(queries(dashboard(example)))} rules found" in done.stdout


@needs_promtool
def test_promtool_rejects_a_broken_dashboard_expression(tmp_path: Path) -> None:
    board = dashboard()
    board["panels"][1]["targets"][0]["expr"] = "sum by (plane (rate(gpunet_network_receive_bytes_total[5m]))"
    (tmp_path / "dashboard.rules.yml").write_text(recording_rules(board))
    assert promtool(tmp_path, "check", "rules", "dashboard.rules.yml").returncode != 0


@pytest.mark.skipif(not METRICS_DOC.exists(), reason="docs/metrics.md (the exporter's contract) is absent")
def test_dashboard_uses_only_documented_metrics() -> None:
    used = {m for _, target in queries(dashboard()) for m in metrics_in(target["expr"])}
    assert used <= documented_metrics(), used - documented_metrics()


def test_panels_have_unique_ids_and_a_grid_without_overlaps() -> None:
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in ("h", "w", "x", "y")) and grid["x"] + grid["w"] <= 24
        columns, rows = range(grid["x"], grid["x"] + grid["w"]), range(grid["y"], grid["y"] + grid["h"])
        mine = {(x, y) for x in columns for y in rows}
        assert not mine & cells, panel["title"]
        cells |= mine


def test_every_query_has_an_expression_and_the_datasource_variable() -> None:
    board = dashboard()
    for panel in board["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["targets"] and panel["datasource"] == grafana.DATASOURCE, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs)
    for _, target in queries(board):
        assert target["expr"] and target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_variables_are_the_datasource_and_plane_leaf_node_label_values() -> None:
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert list(variables) == ["datasource", "plane", "leaf", "node"]
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("plane", "leaf", "node"):
        assert re.fullmatch(rf"label_values\(gpunet_\w+(\{{.*\}})?, {name}\)", variables[name]["definition"])
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*"


def test_dashboard_covers_planes_errors_retransmissions_infiniband_roce_leaves_and_drift() -> None:
    board = dashboard()
    exprs = " ".join(target["expr"] for _, target in queries(board))
    for needle in ("sum by (plane)", "sum by (leaf)", 'plane="compute"', "gpunet_tcp_retransmitted_segments_total",
                   "gpunet_infiniband_symbol_errors_total", "gpunet_infiniband_link_downed_total",
                   "np_cnp_sent", "out_of_sequence", "gpunet_plan_drift", "gpunet_network_receive_errors_total",
                   "gpunet_network_receive_drops_total", "gpunet_infiniband_port_data_received_bytes_total"):
        assert needle in exprs, needle
    assert board["schemaVersion"] == grafana.SCHEMA_VERSION and board["uid"] == "gpunet-su1"
    assert any(p["type"] == "table" and "drift" in p["title"].lower() for p in board["panels"])


def with_monitoring(plan: Plan, subnet: str | None) -> Plan:
    monitoring = IPv4Network(subnet) if subnet else None
    return plan.model_copy(update={"site": plan.site.model_copy(update={"monitoring": monitoring})})


@pytest.mark.parametrize(("subnet", "url"), [(None, "http://localhost:9090"), ("198.18.0.200/32", "http://198.18.0.200:9090"),
                                              ("198.18.0.192/28", "http://localhost:9090")])
def test_datasource_is_the_monitoring_host_when_it_is_one_address(subnet: str | None, url: str) -> None:
    plan = with_monitoring(example_plan("scalable-unit"), subnet)
    provisioned = yaml.safe_load(grafana.render_datasource(plan))
    assert provisioned["apiVersion"] == 1
    assert provisioned["datasources"] == [{"name": "gpunet Prometheus", "uid": grafana.DATASOURCE_UID,
                                           "type": "prometheus", "access": "proxy", "url": url,
                                           "isDefault": False, "editable": False}]


def test_dashboard_provider_loads_the_dashboard_directory_and_defaults_to_the_provisioned_datasource() -> None:
    provider = yaml.safe_load(grafana.render_dashboard_provider())["providers"][0]
    assert provider["type"] == "file" and provider["options"]["path"] == grafana.DASHBOARD_DIR
    variable = dashboard()["templating"]["list"][0]
    assert variable["current"]["value"] == grafana.DATASOURCE_UID
