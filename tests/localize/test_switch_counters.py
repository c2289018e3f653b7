"""Switch port counters read from the switches themselves (issue 26): two samples of what each
switch printed — `ip -s -s -j link` (any Linux NOS; recorded in a lab switch) or SONiC's portstat
(recorded from real switches, tests/fixtures/portstat/) — mapped to the Plan's cables by port; a
port whose errors surge between the samples is named first with its cable; an output neither tool
printed is refused and said; none read is no verdict."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpunet.api import plan_spec
from gpunet.api.fabric import LocalizeSource
from gpunet.cli.main import app
from gpunet.errors import CannotJudge, ParseError, UsageError
from gpunet.fabric.counters import parse_ip_link_stats, parse_portstat, parse_switch_counters, sonic_alias
from gpunet.localize.run import SwitchSample, localize_switches
from gpunet.model.plan import Plan

FIXTURES = Path(__file__).parent.parent / "fixtures"
SMALL = FIXTURES / "lab" / "small.yaml"
IP_LINK = (FIXTURES / "ip_link_stats_json" / "lab-leaf-ip-s-s-j-link" / "output.txt").read_text()
PORTSTAT = (FIXTURES / "portstat" / "sonic-7389-acl-drops" / "output.txt").read_text()
runner = CliRunner()


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_spec(SMALL)


def ip_link_grown(port: str, **more: int) -> str:
    """The recorded `ip -s -s -j link` with `more` added to one port's rx counters."""
    links = json.loads(IP_LINK)
    for link in links:
        if link["ifname"] == port:
            for name, value in more.items():
                link["stats64"]["rx"][name] += value
    return json.dumps(links)


def portstat_grown(errors: int) -> str:
    """The recorded portstat table with RX_ERR of its one port (Ethernet4) set to `errors`."""
    header, rule, row = PORTSTAT.splitlines()[1:4]
    start, end = header.index("RX_OK") + 20, header.index("RX_ERR") + len("RX_ERR")
    return "\n".join([header, rule, row[:start] + f"{errors:,}".rjust(end - start) + row[end:]]) + "\n"


def samples(*readings: SwitchSample) -> Iterator[SwitchSample]:
    yield from readings


def test_a_surge_of_errors_between_two_samples_names_the_cable_first(plan: Plan) -> None:
    quiet = SwitchSample({"comp-leaf001": IP_LINK, "comp-leaf002": IP_LINK}, {})
    surge = SwitchSample({"comp-leaf001": ip_link_grown("p6", crc_errors=4990, errors=4990),
                          "comp-leaf002": ip_link_grown("p7", crc_errors=2)}, {})
    taken = samples(quiet, surge)
    report = localize_switches(plan, lambda: next(taken), 0.01, asked=4)
    assert report.suspects[0].cable == "comp-leaf001:6 comp-spine001:2" and report.suspects[0].named
    assert report.suspects[0].evidence[0].startswith("comp-leaf001:6: rx_crc_errors +4990, rx_errors +4990 in")
    assert "switch port counters read over SSH from 2 of 4 switches" in report.notes


def test_a_sonic_switch_is_read_by_front_panel_port(plan: Plan) -> None:
    taken = samples(SwitchSample({"comp-leaf001": PORTSTAT}, {}),
                    SwitchSample({"comp-leaf001": portstat_grown(1200)}, {"comp-spine001": "timed out"}))
    report = localize_switches(plan, lambda: next(taken), 0.01, asked=2)
    # Ethernet4 at 100G (4 lanes) is the second front-panel port: gpu2's cable
    assert [s.cable for s in report.named] == ["gpu2:ens1 comp-leaf001:2"]
    assert any(n.startswith("1 switch(es) not read: comp-spine001 (timed out)") for n in report.notes)


def test_sonic_names_by_lane_and_json_reads_as_the_table() -> None:
    assert [sonic_alias(n, 8) for n in ("Ethernet0", "Ethernet8", "Ethernet4", "swp3")] == [
        "etp1", "etp2", "Ethernet4", "swp3"]  # Ethernet4 at 8 lanes is a breakout: left as named
    as_json = json.dumps({"Ethernet4": {"STATE": "U", "RX_OK": "10", "RX_ERR": "0", "RX_DRP": "10", "RX_OVR": "0",
                                        "TX_OK": "3", "TX_ERR": "0", "TX_DRP": "0", "TX_OVR": "0"}})
    assert parse_portstat(as_json, "leaf", 4) == parse_portstat(PORTSTAT, "leaf", 4)
    assert parse_switch_counters(IP_LINK, "leaf") == parse_ip_link_stats(IP_LINK, "leaf")  # a list: ip's


@pytest.mark.parametrize("text", ["", "[]x", '{"Ethernet0": {"STATE": "U"}}', '{"Ethernet0": {"RX_ERR": "-1"}}',
                                  "Error: command not found", "IFACE STATE\n----- -----\nEthernet0 U\n"])
def test_what_neither_tool_printed_is_refused(text: str) -> None:
    with pytest.raises(ParseError):
        parse_switch_counters(text, "leaf", 4)


def test_an_output_not_understood_is_said_and_no_switch_read_cannot_be_judged(plan: Plan) -> None:
    taken = samples(SwitchSample({"comp-leaf001": "Permission denied"}, {"comp-leaf002": "timed out"}))
    with pytest.raises(CannotJudge, match="no switch's port counters could be read over SSH"):
        localize_switches(plan, lambda: next(taken), 0, asked=2)


def test_switches_need_a_plan_and_a_known_plane() -> None:
    assert runner.invoke(app, ["localize", "--switches"]).exit_code == 2
    result = runner.invoke(app, ["localize", "--switches", "--plan", str(SMALL), "--plane", "nosuch"])
    assert result.exit_code == 2 and "no plane nosuch" in result.output
    both = runner.invoke(app, ["localize", "--switches", "--prometheus", "http://127.0.0.1:9", "--plan", str(SMALL)])
    assert both.exit_code == 2 and "exactly one of" in both.output


def test_a_lab_with_switches_is_its_switches_over_ssh_and_nothing_else_combines() -> None:
    assert LocalizeSource(lab="ab", switches=True).chosen() == "--lab --switches"
    assert LocalizeSource(lab="ab").chosen() == "--lab"
    for other in ({"ibsim": "ab"}, {"prometheus": "http://127.0.0.1:9"}):
        with pytest.raises(UsageError, match="exactly one of"):
            LocalizeSource(lab="ab", switches=True, **other).chosen()  # type: ignore[arg-type]
    missing = runner.invoke(app, ["localize", "--lab", "nol", "--switches"])
    assert missing.exit_code == 2 and "no lab 'nol'" in missing.output


def test_probing_a_real_fabric_needs_a_plan_and_an_ip_plane() -> None:
    assert runner.invoke(app, ["localize", "--probe"]).exit_code == 2
    result = runner.invoke(app, ["localize", "--probe", "--plan", str(SMALL), "--plane", "nosuch"])
    assert result.exit_code == 2 and "no plane nosuch" in result.output
    both = runner.invoke(app, ["localize", "--probe", "--switches", "--plan", str(SMALL)])
    assert both.exit_code == 2 and "exactly one of" in both.output


def test_an_infiniband_plane_is_not_probed() -> None:
    spec = Path(__file__).parent.parent.parent / "src/gpunet/spec/examples/scalable-unit.yaml"
    result = runner.invoke(app, ["localize", "--probe", "--plan", str(spec), "--plane", "compute"])
    assert result.exit_code == 2 and "InfiniBand switches answer no IP probe" in result.output
