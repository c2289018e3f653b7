"""Suspects from ibqueryerrors samples recorded on the simulated default example."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpunet.errors import ParseError
from gpunet.fabric.counters import parse_ibqueryerrors
from gpunet.localize.counters import counter_suspects
from gpunet.model.plan import Plan
from tests.render.rendered import example_plan

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ibqueryerrors"
CLEAN = parse_ibqueryerrors((FIXTURES / "ibsim-0.10-default-example-clean" / "output.txt").read_text())
FAULTS = parse_ibqueryerrors(
    (FIXTURES / "ibsim-0.10-switch-symbol-errors-ca-rcv-errors-xmit-wait" / "output.txt").read_text())


@pytest.fixture(scope="module")
def plan() -> Plan:
    return example_plan("scalable-unit")


def test_the_port_with_symbol_errors_names_its_cable_first(plan: Plan) -> None:
    reading = counter_suspects(plan, CLEAN, FAULTS, seconds=30)
    assert [s.cable for s in reading.suspects] == ["comp-leaf003:40 comp-spine001:24", "gpu007:ib2 comp-leaf003:7"]
    first = reading.suspects[0]
    assert first.source == "counters" and first.confidence > 0.9
    assert first.evidence == ("comp-leaf003:40: LinkDownedCounter +3, SymbolErrorCounter +250 in 30 s",)


def test_transmit_wait_is_congestion_said_not_blamed(plan: Plan) -> None:
    reading = counter_suspects(plan, CLEAN, FAULTS)
    assert not any("comp-spine002:9 " in s.cable + " " for s in reading.suspects)
    assert any(n.startswith("congestion, not damage: comp-spine002:9 PortXmitWait +123456") for n in reading.notes)


def test_counts_that_did_not_grow_name_nothing(plan: Plan) -> None:
    assert counter_suspects(plan, FAULTS, FAULTS).suspects == []


def test_one_sample_says_it_has_totals_not_rates(plan: Plan) -> None:
    reading = counter_suspects(plan, None, FAULTS)
    assert reading.suspects[0].cable == "comp-leaf003:40 comp-spine001:24"
    assert any("one sample" in n for n in reading.notes)


def test_cleared_counters_are_said(plan: Plan) -> None:
    later = [p.model_copy(update={"counters": {k: 1 for k in p.counters}}) for p in FAULTS]
    reading = counter_suspects(plan, FAULTS, later)
    assert any("cleared" in n for n in reading.notes)


def test_ports_the_plan_does_not_have_are_skipped_by_name(plan: Plan) -> None:
    stranger = FAULTS[1].model_copy(update={"description": "MF0;lab-switch-9:MQM8700/U1"})
    reading = counter_suspects(plan, [], [stranger])
    assert reading.suspects == []
    assert any("MF0;lab-switch-9:MQM8700/U1 port 40" in n for n in reading.notes)


def test_a_mellanox_description_names_the_planned_switch(plan: Plan) -> None:
    renamed = FAULTS[1].model_copy(update={"description": "MF0;comp-leaf003:MQM9700/U1"})
    assert counter_suspects(plan, [], [renamed]).suspects[0].cable == "comp-leaf003:40 comp-spine001:24"


@pytest.mark.parametrize(("text", "line"), [
    ("   GUID 0x1 port 3: [SymbolErrorCounter == 4]\n", 1),
    ('Errors for 0x1 "s1"\n   GUID 0x1 port 3: SymbolErrorCounter is 4\n', 2),
    ('Errors for 0x1 "s1"\n   something else entirely\n', 2),
])
def test_malformed_output_raises_a_located_parse_error(text: str, line: int) -> None:
    with pytest.raises(ParseError) as caught:
        parse_ibqueryerrors(text)
    assert caught.value.line == line


def test_warnings_between_records_are_skipped() -> None:
    text = ("ibwarn: [123] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1,3)\n"
            'Errors for 0x1 "s1"\n   GUID 0x1 port 3: [SymbolErrorCounter == 4]\n')
    assert parse_ibqueryerrors(text)[0].counters == {"SymbolErrorCounter": 4}
