"""The rendered Prometheus files against the real promtool: the configuration with its file_sd
target files, the alert rules, and hand-written unit tests of every alert (fires with the exact
labels and annotations; stays silent on healthy or sub-threshold input). Also: targets and labels
from the Plan, runbooks naming real doctor checks, metric names from docs/metrics.md."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpunet.checks import CHECKS
from gpunet.checks import host as host_checks
from gpunet.design import design
from gpunet.render import prometheus
from gpunet.spec.examples import example_text
from gpunet.spec.loader import parse_spec
from tests.render.rendered import example_plan

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian package prometheus)")
UNIT_TESTS = Path(__file__).parent.parent / "fixtures" / "promtool" / "alerts_test.yml"
METRICS_DOC = Path(__file__).parent.parent.parent / "docs" / "metrics.md"
EXAMPLES = ("scalable-unit", "small-ethernet")
CHECK_ID = re.compile(r"GN-[A-Z]+-\d\d")


def promtool(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def write_prometheus(tmp_path: Path, example: str) -> Path:
    """The rendered files under tmp_path with their relative paths; the prometheus/ directory."""
    for path, text in prometheus.render_prometheus(example_plan(example)).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path / "prometheus"


def rules(example: str = "scalable-unit") -> list[dict[str, Any]]:
    text = prometheus.render_rules(example_plan(example))
    return [rule for group in yaml.safe_load(text)["groups"] for rule in group["rules"]]


def documented_metrics() -> set[str]:
    """Metric names of docs/metrics.md, with `a_received_x, ..._transmitted_x` spelled out and
    the series a histogram is made of."""
    text = METRICS_DOC.read_text()
    names = set(re.findall(r"gpunet_\w+", text))
    names |= {f"{first.split('_received')[0]}{rest}" for first, rest in re.findall(r"(gpunet_\w+), \.\.\.(_\w+)", text)}
    histograms = re.findall(r"(gpunet_\w+) \| histogram", text)
    return names | {f"{h}_{part}" for h in histograms for part in ("bucket", "sum", "count")}


def metrics_in(expr: str) -> set[str]:
    return set(re.findall(r"\bgpunet_\w+", expr))


@needs_promtool
@pytest.mark.parametrize("example", EXAMPLES)
def test_promtool_check_config_accepts_config_rules_and_target_files(tmp_path: Path, example: str) -> None:
    done = promtool(write_prometheus(tmp_path, example), "check", "config", "prometheus.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 rule files found" in done.stdout + done.stderr


@needs_promtool
def test_promtool_check_config_reads_the_target_files(tmp_path: Path) -> None:
    directory = write_prometheus(tmp_path, "scalable-unit")
    (directory / "targets/node.json").write_text('[{"targets": ["gpu001:9100"], "labels": {"0leaf": ""}}]')
    done = promtool(directory, "check", "config", "prometheus.yml")
    assert done.returncode != 0 and "0leaf" in done.stdout + done.stderr


@needs_promtool
@pytest.mark.parametrize("example", EXAMPLES)
def test_promtool_check_rules_accepts(tmp_path: Path, example: str) -> None:
    done = promtool(write_prometheus(tmp_path, example), "check", "rules", prometheus.RULES_FILE)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_unit_tests_of_every_alert_pass(tmp_path: Path) -> None:
    directory = write_prometheus(tmp_path, "scalable-unit")
    shutil.copy(UNIT_TESTS, directory / "alerts_test.yml")
    done = promtool(directory, "test", "rules", "alerts_test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
@pytest.mark.parametrize(("before", "after"), [("> 1e-06", "> 0.01"), ('== 0\n', "== 2\n"), ("for: 1m", "for: 0m")])
def test_promtool_unit_tests_catch_a_changed_rule(tmp_path: Path, before: str, after: str) -> None:
    directory = write_prometheus(tmp_path, "scalable-unit")
    rules_file = directory / prometheus.RULES_FILE
    assert before in rules_file.read_text()
    rules_file.write_text(rules_file.read_text().replace(before, after))
    shutil.copy(UNIT_TESTS, directory / "alerts_test.yml")
    assert promtool(directory, "test", "rules", "alerts_test.yml").returncode != 0


def test_every_alert_has_a_firing_and_a_silent_unit_test() -> None:
    cases = [case for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"] for case in test["alert_rule_test"]]
    names = {rule["alert"] for rule in rules()}
    assert names == {case["alertname"] for case in cases}
    for name in names:
        assert any(c["alertname"] == name and c.get("exp_alerts") for c in cases), f"{name} never fires"
        assert any(c["alertname"] == name and not c.get("exp_alerts") for c in cases), f"{name} never silent"


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_alert_is_complete_and_its_runbook_names_doctor_checks(example: str) -> None:
    for rule in rules(example):
        assert rule["alert"].startswith("Gpunet") and rule["for"] and rule["labels"]["severity"] in (
            "warning", "critical")
        summary = rule["annotations"]["summary"]
        assert "{{ $labels.node }}" in summary or "{{ $labels.switch }}" in summary, rule["alert"]
        named = CHECK_ID.findall(rule["annotations"]["runbook"])
        assert named and set(named) <= set(CHECKS), (rule["alert"], named)
    assert set(prometheus.COLLECTOR_CHECKS.values()) <= set(CHECKS)


def test_every_switch_is_scraped_by_snmp_exporter_under_its_planned_name() -> None:
    plan = example_plan("small-ethernet")
    files = prometheus.render_prometheus(plan)
    job = next(j for j in yaml.safe_load(files[prometheus.CONFIG_PATH])["scrape_configs"] if j["job_name"] == "snmp")
    assert job["params"] == {"module": ["if_mib"], "auth": ["public_v2"]} and job["metrics_path"] == "/snmp"
    assert {"source_labels": ["switch"], "target_label": "instance"} in job["relabel_configs"]
    targets = json.loads(files["prometheus/targets/snmp.json"])
    assert [(g["targets"], g["labels"]["switch"]) for g in targets] == [
        ([s.management.split("/")[0]], s.name) for s in plan.switches]


def test_infiniband_port_alerts_only_for_plans_with_hcas() -> None:
    assert {"GpunetInfinibandPortNotActive", "GpunetInfinibandRateBelowPlan"} <= {r["alert"] for r in rules()}
    assert "GpunetInfinibandPortNotActive" not in {r["alert"] for r in rules("small-ethernet")}
    rate = next(r["expr"] for r in rules() if r["alert"] == "GpunetInfinibandRateBelowPlan")
    assert "< on(node, device) group_left() gpunet_plan_expected_infiniband_rate_bytes_per_second" in rate


def test_alert_thresholds_agree_with_the_doctor() -> None:
    assert prometheus.RETRANS_RATIO == host_checks.RETRANS_FAIL
    assert prometheus.MIN_SEGMENTS_PER_S == host_checks.MIN_SEGMENTS_PER_S


@pytest.mark.skipif(not METRICS_DOC.exists(), reason="docs/metrics.md (the exporter's contract) is absent")
def test_rules_use_only_documented_metrics() -> None:
    used = {m for rule in rules() for m in metrics_in(rule["expr"])}
    assert used and used <= documented_metrics(), used - documented_metrics()


@pytest.mark.parametrize("example", EXAMPLES)
def test_targets_are_every_node_on_its_management_address_with_node_group_leaf(example: str) -> None:
    plan = example_plan(example)
    for job, port in prometheus.JOBS.items():
        groups = json.loads(prometheus.render_prometheus(plan)[f"prometheus/targets/{job}.json"])
        assert [g["labels"]["node"] for g in groups] == [n.name for n in plan.nodes]
        for group, node in zip(groups, plan.nodes, strict=True):
            mgmt = next(i.address for i in node.interfaces if i.plane == "management" and i.address)
            assert group["targets"] == [f"{mgmt.split('/')[0]}:{port}"]
            assert group["labels"]["group"] == node.group
            assert group["labels"]["leaf"] == next((link.b.device for link in plan.links if link.a.device == node.name
                                                    and link.plane == "compute" and link.tier == "node_leaf"), "")


def test_leaf_label_is_the_compute_leaf_and_empty_without_one() -> None:
    leaves = prometheus.compute_leaves(example_plan("small-ethernet"))
    assert leaves["node01"] == "comp-leaf001" and "stor01" not in leaves and "login01" not in leaves


def test_config_scrapes_both_jobs_from_file_sd_and_loads_the_rules() -> None:
    config = yaml.safe_load(prometheus.render_config(example_plan("scalable-unit")))
    assert config["rule_files"] == [prometheus.RULES_FILE]
    assert {job["job_name"]: job["file_sd_configs"] for job in config["scrape_configs"]} == {
        "gpunet": [{"files": ["targets/gpunet.json"]}], "node": [{"files": ["targets/node.json"]}],
        "snmp": [{"files": ["targets/snmp.json"]}]}
    assert all("scheme" not in job for job in config["scrape_configs"])  # plain http unless the admin adds TLS


def _target_nodes(text: str) -> list[str]:
    plan = design(parse_spec(text)[0])
    return [g["labels"]["node"] for g in json.loads(prometheus.render_targets(plan, 9100))]


def test_targets_are_the_nodes_whose_firewall_admits_the_scrape() -> None:
    text = example_text("small-ethernet")
    # stor01-02 lose their management NIC: no scrape flow reaches them, so no target is listed
    # for an address Prometheus cannot reach.
    headless = text.replace("    role: storage\n    nics:\n      management: {devices: [eno1]}\n",
                            "    role: storage\n    nics:\n")
    assert "stor01" in _target_nodes(text) and len(_target_nodes(text)) == 43
    assert "stor01" not in _target_nodes(headless) and len(_target_nodes(headless)) == 41
    # Without a monitoring subnet the firewalls admit no scrape yet: every node stays a target.
    assert len(_target_nodes(text.replace("  monitoring: 198.18.0.250/32\n", ""))) == 43
