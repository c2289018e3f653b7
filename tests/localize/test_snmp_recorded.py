"""`gpunet localize --prometheus` on RECORDED snmp_exporter answers: a real net-snmp agent walked by
Debian's snmp_exporter, scraped by a real Prometheus with the snmp job gpunet renders, and asked the
very query localize asks (tests/fixtures/snmp_exporter_answers/SOURCE.md says how; re-record with
tools/record_snmp_answers.py). A loopback stand-in serves the recorded bytes for the times they were
recorded at, and the clock localize reads is set to the later one, so the answers are judged as
they were recorded.

The recorded counters are all zero (veth ports make no errored frames): a surge is added, in code,
to one port's ifInErrors in the later answer (as test_eth_counters.py's `grown()` does to a recorded
`ip -s -s -j link`)."""

from __future__ import annotations

import json
import time
import types
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

import gpunet.localize.run
from gpunet.api import plan_spec
from gpunet.cli.main import app
from gpunet.model.plan import Plan
from tests.localize.stand_in import Answering, serving

FIXTURES = Path(__file__).parent.parent / "fixtures"
SMALL = FIXTURES / "lab" / "small.yaml"
ANSWERS = FIXTURES / "snmp_exporter_answers"
VARIANTS = ("name", "address", "address_port")  # what `instance` holds: SOURCE.md's table
SWITCH = "comp-leaf001"  # the switch recorded: small.yaml's, at 198.18.0.253 (its agent answered on 127.0.0.1)
WINDOW = 60  # seconds between the two recorded answers (SOURCE.md)
CABLE_OF = {"swp6": "comp-leaf001:6 comp-spine001:2", "swp1": "gpu1:ens1 comp-leaf001:1"}
runner = CliRunner()


def recorded(variant: str, name: str) -> str:
    return (ANSWERS / variant / f"{name}.json").read_text()


def recorded_at(answer: str) -> float:
    """The time an answer was asked for: Prometheus stamps an instant query's samples with it."""
    return float(json.loads(answer)["data"]["result"][0]["value"][0])


def grown(answer: str, if_name: str, errors: int) -> str:
    """The answer with `errors` more on one port's ifInErrors (the port by its ifName)."""
    document = json.loads(answer)
    for series in document["data"]["result"]:
        if series["metric"]["__name__"] == "ifInErrors" and series["metric"].get("ifName") == if_name:
            series["value"][1] = str(int(series["value"][1]) + errors)
    return json.dumps(document)


class RecordedPrometheus(Answering):
    """/api/v1/query answered with the answer recorded for the time asked; any other time is
    answered as Prometheus answers a query it cannot serve (status error, HTTP 400)."""

    answers: ClassVar[dict[float, str]] = {}
    asked: ClassVar[list[float]] = []

    def do_GET(self) -> None:
        params = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        at = float(params["time"][0])
        self.asked.append(at)
        body = next((text for when, text in self.answers.items() if abs(when - at) < 0.001), None)
        if body is None:
            body = json.dumps({"status": "error", "errorType": "bad_data", "error": f"no answer recorded at {at}"})
        self.answer(200 if '"success"' in body else 400, body)


@pytest.fixture
def prometheus() -> Iterator[str]:
    RecordedPrometheus.asked = []
    with serving(RecordedPrometheus) as url:
        yield url


def serve(monkeypatch: pytest.MonkeyPatch, earlier: str, later: str, earlier_at: float | None = None) -> None:
    """The two answers served at their recorded times (the earlier at `earlier_at` where it holds no
    sample to tell), and localize's clock at the later one."""
    at = recorded_at(earlier) if earlier_at is None else earlier_at
    RecordedPrometheus.answers = {at: earlier, recorded_at(later): later}
    clock = types.SimpleNamespace(time=lambda: recorded_at(later), monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(gpunet.localize.run, "time", clock)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_spec(SMALL)


def unmanaged(plan: Plan, directory: Path) -> Path:
    """small.yaml's plan with no switch management address: what names a switch by address names
    none of its switches."""
    switches = tuple(s.model_copy(update={"management": None}) for s in plan.switches)
    path = directory / "plan.json"
    path.write_text(plan.model_copy(update={"switches": switches}).model_dump_json())
    return path


def localize(url: str, plan: Path, *more: str) -> tuple[int, str]:
    result = runner.invoke(app, ["localize", "--prometheus", url, "--plan", str(plan), "--window", str(WINDOW),
                                 "--json", *more])
    return result.exit_code, result.output


def test_the_recorded_answers_are_what_gpunet_asks_for() -> None:
    """Each variant's two answers: 60 s apart, every IF-MIB counter of every interface of the agent
    (lo, swp1..8 and their veth peers), labelled as snmp_exporter's if_mib module labels them."""
    for variant in VARIANTS:
        earlier, later = (json.loads(recorded(variant, n)) for n in ("earlier", "later"))
        assert recorded_at(json.dumps(later)) - recorded_at(json.dumps(earlier)) == pytest.approx(WINDOW)
        metrics = {(s["metric"]["__name__"], s["metric"]["ifName"]) for s in later["data"]["result"]}
        interfaces = {"lo"} | {f"swp{n}{peer}" for n in range(1, 9) for peer in ("", "p")}
        assert metrics == {(m, i) for m in ("ifInErrors", "ifOutErrors", "ifInDiscards", "ifOutDiscards")
                           for i in interfaces}, variant
        swp6 = next(s["metric"] for s in later["data"]["result"] if s["metric"]["ifName"] == "swp6")
        assert (swp6["ifDescr"], swp6["ifAlias"]) == ("swp6", "comp-spine001:2")


@pytest.mark.parametrize("variant", VARIANTS)
def test_unchanged_recorded_answers_name_no_suspect_and_say_what_they_covered(
        prometheus: str, monkeypatch: pytest.MonkeyPatch, variant: str) -> None:
    earlier, later = recorded(variant, "earlier"), recorded(variant, "later")
    serve(monkeypatch, earlier, later)
    code, output = localize(prometheus, SMALL)
    assert code == 0, output
    report = json.loads(output)
    assert report["suspects"] == []
    assert "IF-MIB series for 1 of 5 planned switches and 8 of 32 cabled switch ports" in report["notes"]
    assert sorted(RecordedPrometheus.asked) == [recorded_at(earlier), recorded_at(later)]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("if_name", "errors"), [("swp6", 480), ("swp1", 35)])
def test_errors_grown_on_a_recorded_port_name_its_cable_first(
        prometheus: str, monkeypatch: pytest.MonkeyPatch, variant: str, if_name: str, errors: int) -> None:
    serve(monkeypatch, recorded(variant, "earlier"), grown(recorded(variant, "later"), if_name, errors))
    code, output = localize(prometheus, SMALL)
    assert code == 1, output
    suspect = json.loads(output)["suspects"][0]
    port = f"{SWITCH}:{if_name.removeprefix('swp')}"
    assert (suspect["cable"], suspect["named"]) == (CABLE_OF[if_name], True)
    assert suspect["evidence"] == [f"{port}: rx_errors +{errors} in {WINDOW} s"]


@pytest.mark.parametrize("variant", ["address", "address_port"])
def test_an_address_the_plan_does_not_give_the_switch_cannot_be_judged_and_names_the_label(
        prometheus: str, monkeypatch: pytest.MonkeyPatch, plan: Plan, tmp_path: Path, variant: str) -> None:
    """Series naming comp-leaf001 by its address, against a plan that gives no switch one: none
    names a planned switch, surge or not."""
    serve(monkeypatch, recorded(variant, "earlier"), grown(recorded(variant, "later"), "swp6", 480))
    code, output = localize(prometheus, unmanaged(plan, tmp_path))
    assert code == 3, output
    assert "no IF-MIB series names a planned switch" in output and "`instance` label" in output
    instance = "198.18.0.253" if variant == "address" else "198.18.0.253:161"
    assert f"{instance} lo" in output and "--switch-label" in output


def test_the_label_the_message_points_to_names_the_switch(
        prometheus: str, monkeypatch: pytest.MonkeyPatch, plan: Plan, tmp_path: Path) -> None:
    """gpunet's rendered targets label each switch `switch`: where instance is an address the plan
    lacks, --switch-label switch names it."""
    serve(monkeypatch, recorded("address_port", "earlier"), grown(recorded("address_port", "later"), "swp6", 480))
    code, output = localize(prometheus, unmanaged(plan, tmp_path), "--switch-label", "switch")
    assert code == 1, output
    assert json.loads(output)["suspects"][0]["cable"] == CABLE_OF["swp6"]


def test_a_window_reaching_back_before_the_first_scrape_cannot_be_judged(
        prometheus: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Prometheus' answer for a time before it scraped anything is an empty vector: the later totals
    (errors since the agent started) are no growth in the window. Before this was fixed they were
    named as one: "rx_errors +480 in 60 s"."""
    later = grown(recorded("name", "later"), "swp6", 480)
    serve(monkeypatch, recorded("name", "unscraped"), later, earlier_at=recorded_at(later) - WINDOW)
    code, output = localize(prometheus, SMALL)
    assert code == 3, output
    assert "no IF-MIB series of a planned switch 60 s ago" in output and "shorter --window" in output


def without(answer: str, if_name: str) -> str:
    """The answer without one port's series (as before an interface came up or was renamed)."""
    document = json.loads(answer)
    document["data"]["result"] = [s for s in document["data"]["result"] if s["metric"].get("ifName") != if_name]
    return json.dumps(document)


def test_a_port_with_no_earlier_series_is_left_out_and_said(prometheus: str, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(monkeypatch, without(recorded("name", "earlier"), "swp6"), grown(recorded("name", "later"), "swp6", 480))
    code, output = localize(prometheus, SMALL)
    assert code == 0, output
    report = json.loads(output)
    assert report["suspects"] == []
    assert "1 port(s) had no reading 60 s earlier, left out (their counts are totals, not growth): " \
           "comp-leaf001 swp6" in report["notes"]
