"""Ethernet switch port counters: `ip -s -s -j link` recorded in a lab switch namespace, and IF-MIB
series from a Prometheus server's HTTP API (a local stand-in serving answers in its format)."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from gpunet.api import plan_spec
from gpunet.cli.main import app
from gpunet.errors import ParseError
from gpunet.fabric.counters import EthPortErrors, parse_ip_link_stats
from gpunet.fabric.prometheus import parse_prometheus_vector
from gpunet.localize.counters import eth_counter_suspects
from gpunet.model.plan import Plan
from tests.localize.stand_in import Answering, serving

FIXTURES = Path(__file__).parent.parent / "fixtures"
SMALL = FIXTURES / "lab" / "small.yaml"
RECORDED = (FIXTURES / "ip_link_stats_json" / "lab-leaf-ip-s-s-j-link" / "output.txt").read_text()
runner = CliRunner()


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_spec(SMALL)


def grown(ports: tuple[EthPortErrors, ...], interface: str, **more: int) -> list[EthPortErrors]:
    return [p.model_copy(update={"counters": {k: v + more.get(k, 0) for k, v in p.counters.items()}})
            if p.interface == interface else p for p in ports]


def test_crc_errors_on_a_leaf_port_name_its_cable(plan: Plan) -> None:
    before = parse_ip_link_stats(RECORDED, "comp-leaf001")
    after = grown(before, "p6", rx_crc_errors=480, rx_errors=480, rx_dropped=3)
    reading = eth_counter_suspects(plan, before, after, seconds=60)
    assert [s.cable for s in reading.suspects] == ["comp-leaf001:6 comp-spine001:2"]
    assert reading.suspects[0].named and reading.suspects[0].evidence == (
        "comp-leaf001:6: rx_crc_errors +480, rx_errors +480 in 60 s",)
    assert any(n.startswith("1 Ethernet port(s) dropped packets") for n in reading.notes)


def test_a_port_the_earlier_sample_lacks_is_no_growth(plan: Plan) -> None:
    before = parse_ip_link_stats(RECORDED, "comp-leaf001")
    after = grown(before, "p6", rx_crc_errors=480, rx_errors=480)
    reading = eth_counter_suspects(plan, [p for p in before if p.interface != "p6"], after, seconds=60)
    assert reading.suspects == []
    assert any(n.startswith("1 port(s) had no reading 60 s earlier") and "comp-leaf001 p6" in n for n in reading.notes)


def test_a_few_errors_are_listed_not_named(plan: Plan) -> None:
    before = parse_ip_link_stats(RECORDED, "comp-leaf001")
    reading = eth_counter_suspects(plan, before, grown(before, "p2", rx_crc_errors=2))
    assert [(s.cable, s.named) for s in reading.suspects] == [("gpu2:ens1 comp-leaf001:2", False)]


def test_a_switch_the_plan_lacks_is_skipped_by_name(plan: Plan) -> None:
    stranger = parse_ip_link_stats(RECORDED, "border-router-1")
    reading = eth_counter_suspects(plan, None, grown(stranger, "p1", rx_crc_errors=99))
    assert reading.suspects == [] and any("border-router-1 p1" in n for n in reading.notes)


def answer(series: list[tuple[str, str, str, float, str]]) -> str:
    """A Prometheus instant-vector answer: (metric, instance, ifName, time, value) each."""
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": m, "instance": i, "ifName": n, "ifDescr": n, "job": "snmp"}, "value": [t, v]}
        for m, i, n, t, v in series]}})


class Prometheus(Answering):
    """Serves /api/v1/query: the answer for the asked time from `answers` (earliest first)."""

    answers: ClassVar[list[tuple[float, str]]] = []

    def do_GET(self) -> None:
        asked = float(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["time"][0])
        body = next((text for at, text in reversed(self.answers) if at <= asked + 1), self.answers[0][1])
        self.answer(400 if '"error"' in body else 200, body)


@pytest.fixture
def prometheus() -> Iterator[str]:
    with serving(Prometheus) as url:
        yield url


def localize(url: str, plan_file: Path = SMALL, window: str = "600") -> tuple[int, str]:
    result = runner.invoke(app, ["localize", "--prometheus", url, "--plan", str(plan_file), "--window", window,
                                 "--json"])
    return result.exit_code, result.output


def test_prometheus_errors_that_grew_name_the_cable(prometheus: str) -> None:
    now = time.time()
    Prometheus.answers = [
        (now - 600, answer([("ifInErrors", "comp-leaf001:9116", "swp5", now - 600, "10"),
                            ("ifInErrors", "comp-spine002", "Ethernet1/1", now - 600, "0")])),
        (now - 1, answer([("ifInErrors", "comp-leaf001:9116", "swp5", now - 5, "910"),
                          ("ifInErrors", "comp-spine002", "Ethernet1/1", now - 5, "0"),
                          ("ifInDiscards", "comp-spine002", "Ethernet1/1", now - 5, "40")])),
    ]
    code, output = localize(prometheus)
    assert code == 1, output
    report = json.loads(output)
    assert report["suspects"][0]["cable"] == "comp-leaf001:5 comp-spine001:1"
    assert report["suspects"][0]["evidence"] == ["comp-leaf001:5: rx_errors +900 in 600 s"]


def test_stale_series_and_unknown_ports_are_skipped_by_name(prometheus: str) -> None:
    now = time.time()
    Prometheus.answers = [(now - 1, answer([("ifInErrors", "comp-leaf001", "swp5", now - 3600, "900"),
                                            ("ifInErrors", "comp-leaf002", "swp5", now - 5, "0"),
                                            ("ifInErrors", "core-router-9", "swp1", now - 5, "900")]))]
    code, output = localize(prometheus, window="0")
    assert code == 0, output
    report = json.loads(output)
    assert report["suspects"] == []
    assert any("stale series" in n and "comp-leaf001 swp5" in n for n in report["notes"])
    assert any("core-router-9 swp1" in n for n in report["notes"])
    assert "IF-MIB series for 1 of 5 planned switches and 1 of 32 cabled switch ports" in report["notes"]


def if_mib(instance: str, port: int, errors: int, at: float, **labels: str) -> dict[str, object]:
    """One ifInErrors series as snmp_exporter's if_mib module labels it (ifIndex, and the ifName,
    ifDescr and ifAlias lookups), scraped under `instance`."""
    return {"metric": {"__name__": "ifInErrors", "instance": instance, "job": "snmp", "ifIndex": str(port),
                       "ifName": f"swp{port}", "ifDescr": f"swp{port}", "ifAlias": "", **labels},
            "value": [at, str(errors)]}


def leaf_answer(instance: str, errors: int, at: float, **labels: str) -> str:
    """comp-leaf001's eight ports under `instance`; port 6 with `errors`, comp-leaf002 quiet."""
    result = [if_mib(instance, port, errors if port == 6 else 3, at, **labels) for port in range(1, 9)]
    result += [if_mib("198.18.0.252:161", port, 0, at) for port in range(1, 9)]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})


@pytest.mark.parametrize("instance", ["comp-leaf001", "198.18.0.253", "198.18.0.253:161", "comp-leaf001.labsmall"])
def test_a_surge_on_a_switch_named_by_name_address_or_address_port_names_its_cable_first(
        prometheus: str, instance: str) -> None:
    now = time.time()
    Prometheus.answers = [(now - 600, leaf_answer(instance, 10, now - 600)),
                          (now - 1, leaf_answer(instance, 5000, now - 5))]
    code, output = localize(prometheus)
    assert code == 1, output
    report = json.loads(output)
    assert report["suspects"][0]["cable"] == "comp-leaf001:6 comp-spine001:2"
    assert report["suspects"][0]["evidence"] == ["comp-leaf001:6: rx_errors +4990 in 600 s"]
    assert "IF-MIB series for 2 of 5 planned switches and 16 of 32 cabled switch ports" in report["notes"]


def test_a_port_named_only_by_its_alias_is_found(prometheus: str) -> None:
    now = time.time()
    body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "ifInErrors", "instance": "comp-leaf001", "ifAlias": "Ethernet6"},
         "value": [now - 5, "700"]}]}})
    Prometheus.answers = [(now - 1, body)]
    code, output = localize(prometheus, window="0")
    assert code == 1 and json.loads(output)["suspects"][0]["cable"] == "comp-leaf001:6 comp-spine001:2", output


def _alias_only(alias: str, errors: str = "700") -> str:
    now = time.time()
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "ifInErrors", "instance": "comp-leaf001", "ifAlias": alias},
         "value": [now - 5, errors]}]}})


def test_an_alias_that_describes_the_far_end_names_the_port_it_is_cabled_to(prometheus: str) -> None:
    """gpunet's rendered descriptions are the far end: "comp-spine001:2" is comp-leaf001's port 6,
    not port 2 (the description's own last number)."""
    Prometheus.answers = [(time.time() - 1, _alias_only("comp-spine001:2"))]
    code, output = localize(prometheus, window="0")
    assert code == 1 and json.loads(output)["suspects"][0]["cable"] == "comp-leaf001:6 comp-spine001:2", output


@pytest.mark.parametrize("alias", ["uplink to spine 2", "gpu9:ens1", "comp-spine001:2 backup"])
def test_an_alias_that_is_free_text_names_no_port(prometheus: str, alias: str) -> None:
    """A description's trailing number is no port number: nothing is named from it, and it is said."""
    Prometheus.answers = [(time.time() - 1, _alias_only(alias))]
    code, output = localize(prometheus, window="0")
    report = json.loads(output)
    assert code == 0 and report["suspects"] == [], output
    assert any("no planned cable" in n and repr(alias) in n for n in report["notes"]), report["notes"]


def test_series_naming_no_planned_switch_cannot_be_judged_and_say_which_label_to_set(prometheus: str) -> None:
    now = time.time()
    Prometheus.answers = [(now - 1, leaf_answer("10.9.9.9:161", 5000, now - 5).replace("198.18.0.252", "10.9.9.8"))]
    code, output = localize(prometheus, window="0")
    assert code == 3, output
    assert "no IF-MIB series names a planned switch" in output and "`instance`" in output
    assert "10.9.9.8:161 swp1" in output and "--switch-label" in output


def test_an_empty_answer_cannot_be_judged(prometheus: str) -> None:
    Prometheus.answers = [(0.0, json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}))]
    code, output = localize(prometheus, window="0")
    assert code == 3 and "no IF-MIB series at all" in output, output


def test_a_chosen_label_names_the_switch(prometheus: str) -> None:
    now = time.time()
    Prometheus.answers = [(now - 1, leaf_answer("snmp-exporter:9116", 5000, now - 5, sysName="comp-leaf001"))]
    result = runner.invoke(app, ["localize", "--prometheus", prometheus, "--plan", str(SMALL), "--window", "0",
                                 "--switch-label", "sysName", "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.output)["suspects"][0]["cable"] == "comp-leaf001:6 comp-spine001:2"


def test_a_label_that_is_no_label_name_is_bad_input(prometheus: str) -> None:
    result = runner.invoke(app, ["localize", "--prometheus", prometheus, "--plan", str(SMALL),
                                 "--switch-label", 'x"}', "--json"])
    assert result.exit_code == 2 and "--switch-label" in result.output, result.output


@pytest.mark.parametrize(("body", "message"), [
    ("<html>not json</html>", "not JSON"),
    ('{"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}', "parse error at char 3"),
    ('{"status": "success", "data": {"resultType": "matrix", "result": []}}', "expected an instant vector"),
    ('{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "x"]}]}}',
     "not [time"),
])
def test_a_malformed_answer_is_a_clear_error(prometheus: str, body: str, message: str) -> None:
    Prometheus.answers = [(0.0, body)]
    code, output = localize(prometheus)
    assert code == 2 and message in output, output


def test_an_unreachable_server_or_a_bad_url_is_a_clear_error() -> None:
    assert localize("file:///etc/passwd")[0] == 2
    code, output = localize("http://127.0.0.1:9")  # discard port on loopback: nothing listens
    assert code == 2 and "--prometheus http://127.0.0.1:9" in output


def test_negative_or_nan_samples_are_refused() -> None:
    with pytest.raises(ParseError):
        parse_prometheus_vector(answer([("ifInErrors", "a", "swp1", 1.0, "NaN")]), 1.0)
