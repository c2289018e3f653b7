"""The fabric's own port counters per Plan cable, for the exporter of one host attached to the
fabric (the subnet manager's, say): `ibqueryerrors` at scrape time, each errored port mapped to
the planned cable at it. Only ports over ibqueryerrors' thresholds are listed, so a cable's
series appears once it counts errors: absent means under the threshold, not unknown."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from functools import partial

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpunet.errors import ParseError
from gpunet.fabric.cabling import cable_name
from gpunet.fabric.counters import parse_ibqueryerrors
from gpunet.fabric.observed import Names, cables_by_end
from gpunet.localize.counters import port_end
from gpunet.model.plan import Plan
from gpunet.monitor.collectors import CollectorError

FabricReader = Callable[[], str]  # ibqueryerrors' output, however it is run


def collect_fabric(plan: Plan, read: FabricReader) -> list[Metric]:
    try:
        ports = parse_ibqueryerrors(read())
    except ParseError as exc:
        raise CollectorError(f"ibqueryerrors: {exc}") from None
    names = Names(plan)
    cable_at = cables_by_end(plan)
    errors = CounterMetricFamily("gpunet_fabric_port_errors", "A switch or HCA port's counter as ibqueryerrors "
                                 "reports it (over its threshold), on the Plan's cable at that port.",
                                 labels=["cable", "plane", "device", "port", "counter"])
    unmapped = 0
    for port in ports:
        end = port_end(names, port)
        link = cable_at.get(end) if end else None
        if end is None or link is None:
            unmapped += 1
            continue
        for counter, value in sorted(port.counters.items()):
            errors.add_metric([cable_name(link), link.plane, end.device, end.port, counter], value)
    missing = GaugeMetricFamily("gpunet_fabric_unmapped_ports", "Errored ports on no planned cable (a device the "
                                "Plan cannot name: set node descriptions).")
    missing.add_metric([], unmapped)
    return [errors, missing]


def fabric_reader(run: Callable[[], subprocess.CompletedProcess[str]]) -> FabricReader:
    """ibqueryerrors' output at each scrape, run however the caller's reach runs it (on this host
    attached to the fabric, or against a simulated one)."""
    return partial(_ibqueryerrors, run)


def _ibqueryerrors(run: Callable[[], subprocess.CompletedProcess[str]]) -> str:
    done = run()
    if "## Summary" not in done.stdout:  # it exits 1 when it found errors: the summary says it finished
        raise CollectorError(f"ibqueryerrors exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout
