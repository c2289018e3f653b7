"""`gpunet exporter`: serve /metrics (docs/metrics.md) until stopped."""

from __future__ import annotations

import gc
import logging
import signal
import socket
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from gpunet import api
from gpunet.cli.console import stderr
from gpunet.cli.errors import handles_errors
from gpunet.monitor import ExporterOptions, build_registry, default_listen, parse_listen
from gpunet.monitor.fabric import fabric_reader
from gpunet.monitor.server import make_server
from gpunet.monitor.webconfig import WebConfig, load_web_config

GC_YOUNG_THRESHOLD = 20_000  # live objects allocated since the last collection (default 700)


@handles_errors
def exporter(
    plan: Annotated[Path | None, typer.Option("--plan", help="plan.json or spec: adds Plan drift and the planes.")]
    = None,
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
    fabric_ibsim: Annotated[str | None, typer.Option(
        "--fabric-ibsim", help="The same from a simulated fabric (gpunet ibsim).")] = None,
) -> None:
    """Prometheus exporter: interfaces, TCP, bonds, InfiniBand/RoCE counters and drift from the Plan."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    loaded = api.load_plan(plan) if plan else None
    name = node or socket.gethostname().split(".")[0]
    registry, prober = build_registry(ExporterOptions(
        plan=loaded, node=name if loaded else None, root=root, include_virtual=include_virtual, timeout=timeout,
        probe_peers=probe_peers, probe_interval=probe_interval,
        fabric=fabric_reader(fabric_ibqueryerrors, fabric_ibsim)))
    config = load_web_config(web_config) if web_config else WebConfig()
    address, port = parse_listen(listen) if listen else default_listen(loaded, name if loaded else None)
    server = make_server(registry, address, port, config)
    signal.signal(signal.SIGTERM, _stop)
    scheme = "https" if config.tls_server_config else "http"
    stderr.print(f"gpunet exporter serving {scheme}://{_url_host(address)}:{port}/metrics")
    if prober:
        prober.start()
    # What start-up built lives as long as the process: out of every collection. A 200-interface
    # scrape makes ~3 000 container objects and frees the previous scrape's: under the threshold,
    # scrapes alone never start a collection (at the default, 700, each started ~5).
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if prober:
            prober.stop()
        server.server_close()


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # leaves serve_forever() through the same clean path as Ctrl-C


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address
