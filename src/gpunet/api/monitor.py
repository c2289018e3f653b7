"""`gpunet exporter`: a Prometheus exporter of this node (interfaces, TCP, bonds, InfiniBand and
RoCE counters, drift from the Plan) and, on one host attached to it, the fabric's port counters
per planned cable."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from gpunet.api.bench_regular import PERIODS
from gpunet.bench.metrics import bench_collector
from gpunet.bench.slices import period_seconds
from gpunet.errors import UsageError
from gpunet.monitor import ExporterOptions, build_registry, default_listen, parse_listen
from gpunet.monitor.collectors import Collect
from gpunet.monitor.fabric import fabric_reader
from gpunet.monitor.peers import PeerProber
from gpunet.monitor.server import ExporterServer, make_server
from gpunet.monitor.webconfig import WebConfig, load_web_config
from gpunet.reach import Reach
from gpunet.spec.plan import plan_of

__all__ = ["Exporter", "ExporterSettings", "exporter"]


@dataclass(frozen=True)
class ExporterSettings:
    plan: Path | None = None
    node: str | None = None
    listen: str | None = None
    web_config: Path | None = None
    root: Path = Path("/")
    include_virtual: bool = False
    timeout: float = 5.0
    probe_peers: bool = False
    probe_interval: float = 10.0
    fabric_here: bool = False  # ibqueryerrors on this host at each scrape
    ibsim: str | None = None  # the same from a simulated fabric
    bench_db: Path | None = None  # also serve the regular fabric tests' results from this bench database
    bench_period: str = "week"


@dataclass(frozen=True)
class Exporter:
    """A bound server, ready to serve_forever(), and the background prober to start and stop."""

    server: ExporterServer
    prober: PeerProber | None
    url: str


def _bench(settings: ExporterSettings) -> dict[str, Collect]:
    if settings.bench_db is None:
        return {}
    if settings.bench_period not in PERIODS:
        raise UsageError(f"--bench-period {settings.bench_period[:20]!r}: one of {', '.join(PERIODS)}")
    return {"bench": bench_collector(settings.bench_db, period_seconds(settings.bench_period))}


def exporter(settings: ExporterSettings) -> Exporter:
    if settings.fabric_here and settings.ibsim:
        raise UsageError("give one of --fabric-ibqueryerrors, --ibsim")
    loaded = plan_of(settings.plan) if settings.plan else None
    name = settings.node or socket.gethostname().split(".")[0]
    fabric = None
    if settings.fabric_here or settings.ibsim:
        reached = Reach.of_ibsim(settings.ibsim) if settings.ibsim else Reach()
        fabric = fabric_reader(lambda: reached.infiniband_tool(["ibqueryerrors"], timeout=60))
    registry, prober = build_registry(ExporterOptions(
        plan=loaded, node=name if loaded else None, root=settings.root, include_virtual=settings.include_virtual,
        timeout=settings.timeout, probe_peers=settings.probe_peers, probe_interval=settings.probe_interval,
        fabric=fabric, extra=_bench(settings)))
    config = load_web_config(settings.web_config) if settings.web_config else WebConfig()
    address, port = parse_listen(settings.listen) if settings.listen else default_listen(loaded,
                                                                                      name if loaded else None)
    server = make_server(registry, address, port, config)
    scheme = "https" if config.tls_server_config else "http"
    host = f"[{address}]" if ":" in address else address
    return Exporter(server=server, prober=prober, url=f"{scheme}://{host}:{port}/metrics")
