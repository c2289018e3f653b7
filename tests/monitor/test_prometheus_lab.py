"""End to end with a real Prometheus: the scrape config and alert rules rendered from the lab's
plan, the exporter in two lab servers, Prometheus on the host scraping them over the lab's
management plane; the file_sd labels join the exporter's series and an MTU fault turns
GpunetMtuDrift pending on the right node and device (root; `lab` marker)."""

from __future__ import annotations

import json
import shutil
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpunet.lab.build import LAB_PLAN, lab_dir
from gpunet.lab.faults import apply_fault, heal
from gpunet.model.io import read_plan
from gpunet.render.prometheus import render_prometheus
from tests.lab.helpers import server_process
from tests.labs import SharedLabs, shared_lab_id
from tests.monitor.live_prometheus import rendered_config, running_prometheus, until

pytestmark = [pytest.mark.lab, pytest.mark.skipif(shutil.which("prometheus") is None,
                                                  reason="prometheus missing (Debian package prometheus)")]
LAB = shared_lab_id("small")
SCRAPED = ("gpu1", "gpu2")


@pytest.fixture(scope="module")
def prometheus_api(tmp_path_factory: pytest.TempPathFactory, shared_labs: SharedLabs) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("prometheus")
    shared_labs.get("small")
    config = rendered_config(directory, LAB, SCRAPED)
    exporter = [sys.executable, "-m", "gpunet", "exporter", "--plan", str(lab_dir(LAB) / LAB_PLAN)]
    with server_process(LAB, SCRAPED[0], *exporter, "--node", SCRAPED[0]), \
            server_process(LAB, SCRAPED[1], *exporter, "--node", SCRAPED[1]), \
            running_prometheus(config, directory / "db") as api:
        yield api


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())["data"]


def _query(api: str, promql: str) -> list[dict[str, Any]]:
    return list(_get(f"{api}/query?query={urllib.parse.quote(promql)}")["result"])


def test_both_exporters_are_up_with_the_plan_labels(prometheus_api: str) -> None:
    up = until(lambda: [r for r in _query(prometheus_api, 'up{job="gpunet"} == 1')] if len(
        _query(prometheus_api, 'up{job="gpunet"} == 1')) == 2 else None)
    assert {r["metric"]["node"] for r in up} == set(SCRAPED)
    assert all(r["metric"]["group"] == "gpu" and r["metric"]["leaf"].startswith("comp-leaf") for r in up)
    drift = until(lambda: _query(prometheus_api, "gpunet_plan_drift"))
    assert drift and all(r["value"][1] == "0" for r in drift), drift


def test_every_rendered_rule_is_loaded(prometheus_api: str) -> None:
    groups = until(lambda: _get(f"{prometheus_api}/rules")["groups"])
    loaded = {rule["name"] for group in groups for rule in group["rules"]}
    rendered = render_prometheus(read_plan(lab_dir(LAB) / LAB_PLAN))["prometheus/rules/gpunet-alerts.yml"]
    assert loaded == {rule["alert"] for group in yaml.safe_load(rendered)["groups"] for rule in group["rules"]}


def test_an_mtu_fault_turns_the_alert_pending_on_that_node_and_device(prometheus_api: str) -> None:
    until(lambda: len(_query(prometheus_api, 'up{job="gpunet"} == 1')) == 2)
    apply_fault(LAB, "gpu1:ens1", "mtu", "1500")
    try:
        alerts = until(lambda: [a for a in _get(f"{prometheus_api}/alerts")["alerts"]
                                if a["labels"]["alertname"] == "GpunetMtuDrift"])
    finally:
        heal(LAB)
    assert [(a["labels"]["node"], a["labels"]["device"], a["state"]) for a in alerts] == [("gpu1", "ens1", "pending")]
    assert alerts[0]["annotations"]["summary"] == "ens1 on gpu1 has MTU 1500, not the plan's"
