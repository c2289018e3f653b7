"""The exporter's scrape: every collector runs in a worker thread under one deadline, so a stuck
sysfs read (a wedged NIC driver) costs a scrape its timeout, never a hang; a collector that fails
or overruns is reported as gpunet_collector_success 0 and the rest are served. Concurrent
scrapes share a collector run already in flight instead of stacking up behind a stuck one."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from functools import partial

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gpunet.monitor.collectors import (
    Collect,
    NodeView,
    collect_bonding,
    collect_netdev,
    collect_netstat,
)
from gpunet.monitor.drift import collect_plan
from gpunet.monitor.ethtool import collect_ethtool
from gpunet.monitor.infiniband import collect_infiniband

DEFAULT_TIMEOUT_S = 5.0  # well under Prometheus's default 10 s scrape timeout
log = logging.getLogger("gpunet.exporter")


def node_collectors(view: NodeView, with_plan: bool) -> dict[str, Collect]:
    """The collectors for a node: always netdev, netstat, bonding, infiniband, ethtool (flow control);
    plan drift with a Plan."""
    collectors: dict[str, Collect] = {
        "netdev": partial(collect_netdev, view), "netstat": partial(collect_netstat, view),
        "bonding": partial(collect_bonding, view), "infiniband": partial(collect_infiniband, view),
        "ethtool": partial(collect_ethtool, view),
    }
    if with_plan:
        collectors["plan"] = partial(collect_plan, view)
    return collectors


class GpunetCollector(Collector):
    def __init__(self, collectors: dict[str, Collect], timeout: float = DEFAULT_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.collectors, self.timeout, self.clock = collectors, timeout, clock
        # One worker per collector at least, plus room for runs left stuck on a hung read.
        self._pool = ThreadPoolExecutor(max_workers=4 * max(1, len(collectors)), thread_name_prefix="gpunet-collect")
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[tuple[list[Metric], float]]] = {}

    def collect(self) -> Iterator[Metric]:
        futures = {name: self._start(name) for name in self.collectors}
        wait(futures.values(), timeout=self.timeout)
        success = GaugeMetricFamily("gpunet_collector_success", "1 when the collector read its sources in time.",
                                    labels=["collector"])
        duration = GaugeMetricFamily("gpunet_collector_duration_seconds", "How long the collector took.",
                                     labels=["collector"])
        for name, future in futures.items():
            families, took, ok = self._outcome(name, future)
            yield from families
            success.add_metric([name], 1 if ok else 0)
            duration.add_metric([name], took)
        yield success
        yield duration

    def _start(self, name: str) -> Future[tuple[list[Metric], float]]:
        with self._lock:
            running = self._inflight.get(name)
            if running is None or running.done():
                running = self._pool.submit(self._timed, self.collectors[name])
                self._inflight[name] = running
            return running

    def _timed(self, collect: Collect) -> tuple[list[Metric], float]:
        started = self.clock()
        families = list(collect())
        return families, self.clock() - started

    def _outcome(self, name: str, future: Future[tuple[list[Metric], float]]) -> tuple[Iterable[Metric], float, bool]:
        if not future.done():
            log.warning("collector %s still running after %.1f s", name, self.timeout)
            return (), self.timeout, False
        if (error := future.exception()) is not None:
            log.warning("collector %s failed: %s", name, error)
            return (), 0.0, False
        families, took = future.result()
        return families, took, True
