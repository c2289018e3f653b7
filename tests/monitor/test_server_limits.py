"""The exporter endpoint under a slowloris attack: 400 connections that each send a header line
every 5 s (and reconnect when closed) beside one Prometheus-like scraper, on loopback."""

from __future__ import annotations

import http.client
import math
import multiprocessing
import re
import selectors
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gpunet.errors import UsageError
from gpunet.monitor.server import Limits
from gpunet.monitor.webconfig import WebConfig, load_web_config
from tests.monitor.test_server import serving

ATTACKERS = 400
LINE_EVERY_S = 5.0  # a header line every 5 s: under any per-read idle timeout, forever
RUN_S = 14.0  # past the 10 s head deadline, so attackers are cut off and come back
SCRAPE_TIMEOUT_S = 10.0  # Prometheus's default scrape_timeout


class Slowloris:
    """ATTACKERS sockets sending one header line each LINE_EVERY_S, reconnecting when closed.

    The attacker runs in its own process, as it would on another host: in the exporter's process
    its reconnect loop would compete for the exporter's GIL and measure the test, not the server."""

    def __init__(self, port: int) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process that has threads
        self.stop, self.ready, self._reconnects = context.Event(), context.Event(), context.Value("i", 0)
        self.process = context.Process(target=_attack, args=(port, self.stop, self.ready, self._reconnects),
                                       daemon=True)

    @property
    def reconnects(self) -> int:
        return int(self._reconnects.value)


def _attack(port: int, stop: Any, ready: Any, reconnects: Any) -> None:
    """The attacker process: open ATTACKERS sockets (then `ready`), trickle a line down each, replace
    the closed ones."""
    attack = _Trickler(port, reconnects)
    attack.step()  # the first line down each
    ready.set()
    while not stop.is_set():
        attack.step()
    attack.close()


class _Trickler:
    def __init__(self, port: int, reconnects: Any) -> None:
        self.port, self.reconnects = port, reconnects
        self.selector = selectors.DefaultSelector()
        for _ in range(ATTACKERS):
            self._connect()

    def step(self) -> None:
        for key, _ in self.selector.select(timeout=0.2):  # readable: the server closed it
            self._replace(key.fileobj)
        now = time.monotonic()
        for key in list(self.selector.get_map().values()):
            if key.data["next"] <= now:
                self._trickle(key)

    def close(self) -> None:
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]

    def _connect(self) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", self.port))
        self.selector.register(sock, selectors.EVENT_READ, {"sent": 0, "next": time.monotonic()})

    def _trickle(self, key: selectors.SelectorKey) -> None:
        line = b"GET /metrics HTTP/1.1\r\n" if key.data["sent"] == 0 else f"X-{key.data['sent']}: a\r\n".encode()
        try:
            key.fileobj.send(line)  # type: ignore[union-attr]
        except OSError:
            self._replace(key.fileobj)
            return
        key.data["sent"] += 1
        key.data["next"] = time.monotonic() + LINE_EVERY_S

    def _replace(self, sock: Any) -> None:
        self.selector.unregister(sock)
        sock.close()
        self.reconnects.value += 1
        self._connect()


def _threads() -> int:
    """Threads of this process, less the collectors' deadline pool (a fixed 4 per collector)."""
    return sum(not t.name.startswith("gpunet-collect") for t in threading.enumerate())


def _scrape(port: int) -> float:
    """Seconds to a full answer, infinite past SCRAPE_TIMEOUT_S (counted as slow, not an error: a
    reset or a wrong answer still is one)."""
    start = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=SCRAPE_TIMEOUT_S)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        body = response.read()
    except TimeoutError:
        return math.inf
    finally:
        connection.close()
    assert response.status == 200 and b"gpunet_collector_success" in body
    return time.monotonic() - start


@pytest.mark.slow
def test_a_scraper_is_served_promptly_beside_400_slowloris_connections() -> None:
    limits = Limits()  # the defaults: 10 s head deadline, 256 connections, 4 workers
    baseline_threads = _threads()
    with serving(WebConfig(), limits=limits) as server:
        _scrape(server.server_address[1])  # the collectors' first run, as a served exporter has had it
        attack = Slowloris(server.server_address[1])
        attack.process.start()
        # every attacker connected and holding a connection (a spawned interpreter: seconds when loaded)
        assert attack.ready.wait(60), "the attacker did not start"
        time.sleep(0.5)
        latencies, peak_threads, peak_open = [], 0, 0
        deadline = time.monotonic() + RUN_S
        while time.monotonic() < deadline:
            latencies.append(_scrape(server.server_address[1]))
            peak_threads = max(peak_threads, _threads())
            peak_open = max(peak_open, server.open_connections)
            time.sleep(0.1)
        attack.stop.set()
        attack.process.join(10)
    # inclusive: with ~40 scrapes the default (exclusive) method extrapolates past the slowest one
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98]
    print(f"{len(latencies)} scrapes beside {ATTACKERS} slowloris connections: p50 "
          f"{statistics.median(latencies) * 1e3:.0f} ms, p99 {p99 * 1e3:.0f} ms, max {max(latencies) * 1e3:.0f} ms; "
          f"{attack.reconnects} attacker connections closed by the server; peak {peak_open} open connections "
          f"(cap {server.cap}); peak threads {peak_threads} (baseline {baseline_threads})")
    # A server that let the attackers hold its workers would answer a scrape only as the attackers'
    # head deadline cut them off (10 s), or the scrape would time out: that is what is ruled out.
    # The typical scrape stays quick; single scrapes on a starved 2-core host (the suite's four
    # workers beside two busy loops) have taken up to 4.8 s (p50 0.2 s) from the CPU alone, and on
    # CI's host one outlasted the client's 10 s: one in twenty may be that slow, never the typical one.
    assert statistics.median(latencies) < 1.0
    slow = [t for t in latencies if t >= 0.8 * limits.head_deadline_s]
    assert len(slow) <= max(1, len(latencies) // 20), f"{len(slow)} of {len(latencies)} scrapes slow; p99 {p99:.2f} s"
    assert attack.reconnects >= ATTACKERS - server.cap  # the cap evicted them, and the head deadline
    assert peak_open <= server.cap
    # the test's own (server loop, the attacker process's feeder), the scrape workers: never one per connection
    assert peak_threads <= baseline_threads + 2 + limits.workers


def test_the_head_deadline_ends_a_connection_that_keeps_sending() -> None:
    with serving(WebConfig(), limits=Limits(head_deadline_s=1.0)) as server, \
            socket.create_connection(("127.0.0.1", server.server_address[1])) as slow:
        slow.settimeout(5)
        start = time.monotonic()
        slow.send(b"GET /metrics HTTP/1.1\r\n")
        closed = False
        for i in range(150):  # a header line every 0.2 s: each read is prompt, the head never ends
            try:
                slow.send(f"X-{i}: a\r\n".encode())
            except OSError:
                closed = True
                break
            time.sleep(0.2)
        closed = closed or slow.recv(1) == b""
        # closed at the 1 s deadline, however steadily it sent (a loaded host's loop comes late;
        # without the deadline it would have stayed open the whole 30 s)
        assert closed and 1.0 <= time.monotonic() - start < 15


def test_a_head_over_the_size_limit_ends_the_connection() -> None:
    with serving(WebConfig()) as server, socket.create_connection(("127.0.0.1", server.server_address[1])) as big:
        big.settimeout(5)
        big.sendall(b"GET /metrics HTTP/1.1\r\nX-a: " + b"a" * 70_000)
        assert big.recv(1) == b""


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(10)
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_nothing_of_the_request_is_echoed_into_the_response_headers() -> None:
    """Accept values (a folded header line, a version prometheus_client would echo or choke on)
    choose between two fixed Content-Types."""
    with serving(WebConfig()) as server:
        port = server.server_address[1]
        for accept in (b"application/openmetrics-text; version=2.x\r\n Set-Cookie: injected=1",
                       b"application/openmetrics-text; version=1.0.x", b"text/plain; version=9; escaping=x"):
            answer = _raw(port, b"GET /metrics HTTP/1.1\r\nAccept: " + accept + b"\r\nConnection: close\r\n\r\n")
            head = answer.split(b"\r\n\r\n")[0]
            assert head.startswith(b"HTTP/1.1 200") and b"injected" not in head and b"Set-Cookie" not in head
            assert re.search(rb"Content-Type: (text/plain; version=0\.0\.4|application/openmetrics-text; "
                             rb"version=1\.0\.0); charset=utf-8\r", head), head


@pytest.mark.parametrize("request_bytes", [
    b"GET http://[x/metrics HTTP/1.1\r\nConnection: close\r\n\r\n",  # urlsplit: Invalid IPv6 URL
    b"GET /metrics HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nGET /",  # a body smuggled past
])
def test_a_malformed_request_gets_400_and_the_connection_ends(request_bytes: bytes) -> None:
    with serving(WebConfig()) as server:
        answer = _raw(server.server_address[1], request_bytes)
    assert answer.startswith(b"HTTP/1.1 400") and answer.count(b"HTTP/1.1") == 1


@pytest.mark.parametrize(("text", "message"), [
    ("http_server_config:\n  headers:\n    X-A: \"ok\\r\\nSet-Cookie: evil=1\"\n", "headers.X-A"),
    ("http_server_config:\n  headers:\n    \"X A\": ok\n", "headers.X A"),
    ("http_server_config:\n  headers:\n    X-A: \"caf\\u00e9\"\n", "headers.X-A"),
    ("basic_auth_users:\n  u: '$2y$03$" + "a" * 53 + "'\n", "cost 3 is outside 4-14"),
    ("basic_auth_users:\n  u: '$2y$20$" + "a" * 53 + "'\n", "cost 20 is outside 4-14"),
])
def test_a_web_config_the_response_could_not_carry_is_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "web.yml").write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        load_web_config(tmp_path / "web.yml")
