"""`gpunet exporter`: serve /metrics (docs/metrics.md) until stopped."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from typing import Annotated

import typer

from gpunet.api.monitor import ExporterSettings
from gpunet.api.monitor import exporter as make_exporter
from gpunet.cli.console import stderr
from gpunet.cli.errors import handles_errors
from gpunet.cli.options import IbsimOpt, PlanOpt

GC_YOUNG_THRESHOLD = 20_000  # live objects allocated since the last collection (default 700)


@handles_errors
def exporter(
    plan: PlanOpt = None,
    node: Annotated[str | None, typer.Option("--node", help="This node's name in the Plan (default: hostname).")]
    = None,
    listen: Annotated[str | None, typer.Option(
        "--listen", help="ADDRESS:PORT (default: the node's management address, port 9842; 127.0.0.1 without a "
                         "Plan; ':9842' for all addresses).")] = None,
    web_config: Annotated[Path | None, typer.Option(
        "--web-config", help="exporter-toolkit web config: tls_server_config, basic_auth_users.")] = None,
    root: Annotated[Path, typer.Option(help="Read /sys and /proc under this root (a recorded tree).")] = Path("/"),
    include_virtual: Annotated[bool, typer.Option(
        "--include-virtual", help="Export virtual interfaces (veth, bridge, lo) the Plan does not name.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds a collector may take before it is reported failed.",
                                           min=0.1)] = 5.0,
    probe_peers: Annotated[bool, typer.Option(
        "--probe-peers", help="Ping peers on every plane in the background (RTT histograms, loss).")] = False,
    probe_interval: Annotated[float, typer.Option(help="Seconds between rounds of peer probes.", min=1)] = 10.0,
    fabric_ibqueryerrors: Annotated[bool, typer.Option(
        "--fabric-ibqueryerrors", help="Also serve the fabric's port counters per Plan cable (ibqueryerrors at each "
                                       "scrape: run on one host attached to the fabric).")] = False,
    ibsim: IbsimOpt = None,
    bench_db: Annotated[Path | None, typer.Option(
        "--bench-db", help="Also serve the regular fabric tests' results from this bench database "
                           "(gpunet_bench_*: the latest per pair class, rail and leaf–spine group, with its age).")]
    = None,
    bench_period: Annotated[str, typer.Option(
        "--bench-period", help="day or week: the period every pair class should be measured within.")] = "week",
) -> None:
    """Prometheus exporter: interfaces, TCP, bonds, InfiniBand/RoCE counters and drift from the Plan;
    with --fabric-ibqueryerrors or --ibsim also the fabric's port counters per planned cable."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    made = make_exporter(ExporterSettings(
        plan=plan, node=node, listen=listen, web_config=web_config, root=root, include_virtual=include_virtual,
        timeout=timeout, probe_peers=probe_peers, probe_interval=probe_interval, fabric_here=fabric_ibqueryerrors,
        ibsim=ibsim, bench_db=bench_db, bench_period=bench_period))
    if made.prober:
        made.prober.start()
    # What start-up built lives as long as the process: out of every collection. A 200-interface
    # scrape makes ~3 000 container objects and frees the previous scrape's: under the threshold,
    # scrapes alone never start a collection (at the default, 700, each started ~5).
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD)
    try:  # TERM or INT leaves serve_forever() through handles_errors' one clean exit (130 or 143)
        made.server.serve_forever(on_serving=lambda: stderr.print(f"gpunet exporter serving {made.url}"))
    finally:
        if made.prober:
            made.prober.stop()
        made.server.server_close()
