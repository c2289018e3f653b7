"""The Prometheus exporter: collectors that read a node at scrape time (docs/metrics.md), Plan drift,
optional Pingmesh-style peer probes, served over HTTP(S) with the exporter-toolkit web config."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from prometheus_client.registry import CollectorRegistry

from gpunet.errors import UsageError
from gpunet.model.flows import GPUNET_EXPORTER_PORT
from gpunet.model.plan import Node, Plan
from gpunet.monitor.collectors import Collect, NodeView
from gpunet.monitor.exporter import DEFAULT_TIMEOUT_S, GpunetCollector, node_collectors
from gpunet.monitor.fabric import FabricReader, collect_fabric
from gpunet.monitor.peers import PeerProber, ping_probes, system_ping
from gpunet.probe.node import read_addresses

UNPLANNED_LISTEN = "127.0.0.1"  # without a Plan there is no management address to prefer: stay local


@dataclass(frozen=True)
class ExporterOptions:
    plan: Plan | None = None
    node: str | None = None
    root: Path = Path("/")
    include_virtual: bool = False
    timeout: float = DEFAULT_TIMEOUT_S
    probe_peers: bool = False
    probe_interval: float = 10.0
    probes_per_round: int = 32
    fabric: FabricReader | None = None  # ibqueryerrors' output: this exporter also serves fabric port counters
    extra: dict[str, Collect] = field(default_factory=dict)  # more collectors by name (the bench database's)


def planned_node(plan: Plan | None, name: str | None) -> Node | None:
    if plan is None:
        return None
    found = plan.node(name)
    if found is None:
        raise UsageError(f"node {name!r} is not in the plan; pass --node with one of its nodes")
    return found


def build_registry(options: ExporterOptions) -> tuple[CollectorRegistry, PeerProber | None]:
    """The registry to serve and, with probe_peers, the prober the caller starts (and stops)."""
    node = planned_node(options.plan, options.node)
    view = NodeView(root=options.root, planned=node.interfaces if node else (),
                    include_virtual=options.include_virtual, addresses=read_addresses)
    collectors = node_collectors(view, with_plan=node is not None)
    prober = None
    if options.probe_peers:
        if options.plan is None or node is None:
            raise UsageError("--probe-peers needs --plan (the peers come from it)")
        prober = PeerProber(ping_probes(options.plan, node), system_ping(), options.probe_interval,
                            options.probes_per_round)
        collectors["peers"] = prober.collect
    if options.fabric is not None:
        if options.plan is None:
            raise UsageError("the fabric counters need --plan (ports are named by the Plan's cables)")
        collectors["fabric"] = partial(collect_fabric, options.plan, options.fabric)
    collectors |= options.extra
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GpunetCollector(collectors, options.timeout))
    return registry, prober


def default_listen(plan: Plan | None, node: str | None) -> tuple[str, int]:
    """The node's management address (exporters are scraped over the management plane), else loopback."""
    found = planned_node(plan, node)
    return (found.management_ip if found and found.management_ip else UNPLANNED_LISTEN), GPUNET_EXPORTER_PORT


def parse_listen(text: str) -> tuple[str, int]:
    """'ADDR:PORT', '[v6]:PORT' or ':PORT' (all addresses, IPv6 and IPv4, said explicitly)."""
    host, sep, port = text.rpartition(":")
    if not sep or not re.fullmatch(r"[0-9]{1,5}", port) or not 0 < int(port) < 65536:
        raise UsageError(f"--listen {text!r}: expected ADDRESS:PORT, e.g. 10.0.0.5:{GPUNET_EXPORTER_PORT}")
    return host.strip("[]") or "::", int(port)
