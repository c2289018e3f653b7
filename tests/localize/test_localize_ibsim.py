"""Counters through the real ibqueryerrors on the simulated default example: a surge of symbol
errors on one switch port names that cable first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from typer.testing import CliRunner

from gpunet.api.fabric import LocalizeSource, localize
from gpunet.cli.main import app
from gpunet.lab.ibsim import apply_fault, ibsim_down, ibsim_up, missing_tools, run_tool
from gpunet.lab.ibsim_state import IbFault, IbsimState
from gpunet.monitor import ExporterOptions, build_registry
from gpunet.monitor.fabric import fabric_reader
from tests.render.rendered import example_plan

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(bool(missing_tools()), reason=f"needs {', '.join(missing_tools())} (.ci/run installs "
                                                               "them)")]
SIM = "zn"
runner = CliRunner()


@pytest.fixture(scope="module")
def sim() -> Iterator[IbsimState]:
    try:
        yield ibsim_up(example_plan("scalable-unit"), SIM)
    finally:
        ibsim_down(SIM)


def test_a_symbol_error_surge_names_that_cable_first(sim: IbsimState, tmp_path: Path) -> None:
    before = tmp_path / "before.txt"
    before.write_text(run_tool(SIM, ["ibqueryerrors"]).stdout)
    assert localize(LocalizeSource(ibsim=SIM), before=before).suspects == ()
    apply_fault(SIM, IbFault(kind="counter", end="comp-spine003:17", value="PortCounters.SymbolErrorCounter=5000"))
    apply_fault(SIM, IbFault(kind="counter", end="comp-leaf006:2", value="PortCounters.PortXmitWait=99999"))
    report = localize(LocalizeSource(ibsim=SIM), before=before)
    assert [s.cable for s in report.named][:1] == ["comp-leaf003:49 comp-spine003:17"]
    assert any("congestion, not damage: comp-leaf006:2" in n for n in report.notes)
    result = runner.invoke(app, ["localize", "--ibsim", SIM, "--before", str(before), "--json"])
    assert result.exit_code == 1, result.output
    assert '"comp-leaf003:49 comp-spine003:17"' in result.stdout


def test_a_bad_before_file_is_refused_by_file_and_line(sim: IbsimState, tmp_path: Path) -> None:
    bad = tmp_path / "before.txt"
    bad.write_text('Errors for 0x1 "comp-leaf001"\n   GUID 0x1 port 3 [SymbolErrorCounter = 4]\n')
    result = runner.invoke(app, ["localize", "--ibsim", SIM, "--before", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}: line 2:" in result.output


def test_the_fabric_exporter_serves_the_simulators_counters_per_cable(sim: IbsimState) -> None:
    apply_fault(SIM, IbFault(kind="counter", end="comp-leaf002:40", value="PortCounters.LinkDownedCounter=7"))
    reader = fabric_reader(lambda: run_tool(SIM, ["ibqueryerrors"], timeout=60))
    registry, _ = build_registry(ExporterOptions(plan=example_plan("scalable-unit"), node="login01", root=Path("/x"),
                                                 fabric=reader))
    metrics = generate_latest(registry).decode()
    cable = next(f"{link.a.device}:{link.a.port} {link.b.device}:{link.b.port}"
                 for link in example_plan("scalable-unit").links
                 if (link.a.device, link.a.port) == ("comp-leaf002", "40"))
    assert f'gpunet_fabric_port_errors_total{{cable="{cable}",counter="LinkDownedCounter"' in metrics
    assert 'gpunet_collector_success{collector="fabric"} 1.0' in metrics
