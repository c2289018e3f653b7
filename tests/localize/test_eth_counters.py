"""Ethernet switch port counters: `ip -s -s -j link` recorded in a lab switch namespace, and IF-MIB
series from a Prometheus server's HTTP API (a local stand-in serving answers in its format)."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
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


class Prometheus(BaseHTTPRequestHandler):
    """Serves /api/v1/query: the answer for the asked time from `answers` (earliest first)."""

    answers: ClassVar[list[tuple[float, str]]] = []

    def do_GET(self) -> None:
        asked = float(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["time"][0])
        body = next((text for at, text in reversed(self.answers) if at <= asked + 1), self.answers[0][1])
        self.send_response(400 if '"error"' in body else 200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        del args


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


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
                                            ("ifInErrors", "core-router-9", "swp1", now - 5, "900")]))]
    code, output = localize(prometheus, window="0")
    assert code == 0, output
    report = json.loads(output)
    assert report["suspects"] == []
    assert any("stale series" in n and "comp-leaf001 swp5" in n for n in report["notes"])
    assert any("core-router-9 swp1" in n for n in report["notes"])


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
