"""The fabric collector: ibqueryerrors (recorded on the simulated default example) as counters per
Plan cable, promtool-clean; a broken output fails the collector, not the scrape."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from gpunet.monitor import ExporterOptions, build_registry
from gpunet.monitor.collectors import CollectorError
from gpunet.monitor.fabric import collect_fabric
from tests.render.rendered import example_plan

FAULTS = (Path(__file__).parent.parent / "fixtures" / "ibqueryerrors" /
          "ibsim-0.10-switch-symbol-errors-ca-rcv-errors-xmit-wait" / "output.txt").read_text()


def scrape(text: str) -> str:
    registry, _ = build_registry(ExporterOptions(plan=example_plan("scalable-unit"), node="login01", root=Path("/x"),
                                                 fabric=lambda: text))
    return generate_latest(registry).decode()


def test_errored_ports_are_counted_on_their_cables() -> None:
    metrics = scrape(FAULTS)
    assert ('gpunet_fabric_port_errors_total{cable="comp-leaf003:40 comp-spine001:24",counter="SymbolErrorCounter",'
            'device="comp-leaf003",plane="compute",port="40"} 250.0') in metrics
    assert ('gpunet_fabric_port_errors_total{cable="gpu007:ib2 comp-leaf003:7",counter="PortRcvErrors",'
            'device="gpu007",plane="compute",port="ib2"} 17.0') in metrics
    assert "gpunet_fabric_unmapped_ports 0.0" in metrics
    assert 'gpunet_collector_success{collector="fabric"} 1.0' in metrics


def test_ports_the_plan_does_not_have_are_counted_as_unmapped() -> None:
    families = collect_fabric(example_plan("two-servers-direct"), lambda: FAULTS)
    assert [s.value for s in families[1].samples] == [3]


def test_a_broken_output_fails_the_collector_only() -> None:
    with pytest.raises(CollectorError):
        collect_fabric(example_plan("scalable-unit"), lambda: 'Errors for 0x1 "x"\n   garbage here\n')
    metrics = scrape('Errors for 0x1 "x"\n   garbage here\n')
    assert 'gpunet_collector_success{collector="fabric"} 0.0' in metrics
    assert 'gpunet_collector_success{collector="netdev"}' in metrics


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool missing (Debian package prometheus)")
def test_promtool_check_metrics_is_clean() -> None:
    done = subprocess.run(["promtool", "check", "metrics"], input=scrape(FAULTS), capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
