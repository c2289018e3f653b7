"""The exporter's HTTP(S) endpoint: /metrics behind the web config's TLS and basic auth.

Connections are read by one asyncio loop, and only a request whose head has fully arrived takes
a worker thread (basic auth's bcrypt, collection). A client that trickles its headers (slowloris)
therefore costs a socket, not a thread, and is closed when the head deadline passes however
steadily it sends. Open connections are capped below the file limit; at the cap the connection
that has waited longest for its request head is closed to admit the new one, so a flood of idle
sockets cannot lock Prometheus out. EMFILE on accept backs off (asyncio retries after a second)
instead of spinning."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import logging
import resource
import socket
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http import HTTPStatus
from http.client import HTTPException, HTTPMessage, parse_headers
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector, CollectorRegistry

from gpunet.errors import UsageError
from gpunet.monitor.exposition import generate_openmetrics, generate_text
from gpunet.monitor.webconfig import BasicAuth, WebConfig, tls_context

log = logging.getLogger("gpunet.exporter")
LANDING = b"<html><head><title>gpunet exporter</title></head><body><a href='/metrics'>metrics</a></body></html>"
MAX_HEAD_BYTES = 16 * 1024  # request line and headers; a scrape sends a few hundred
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"
ACCEPT_BACKLOG = 64  # asyncio accepts up to this many connections per pass of the loop
# The kernel's queue of connections not yet accepted (clamped to net.core.somaxconn). A full queue
# drops the SYN and the client retries a second later: a flood of reconnecting idle sockets past
# the cap would cost every scrape 1 s, then 3 s.
LISTEN_BACKLOG = 4096


@dataclass(frozen=True)
class Limits:
    """What one client may hold: time to send a request head (from its first byte or from the
    previous response), connections open at once, and threads working on requests."""

    head_deadline_s: float = 10.0
    max_connections: int = 256
    workers: int = 4
    write_deadline_s: float = 30.0


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    version: str
    headers: HTTPMessage


@dataclass
class _Connection:
    writer: asyncio.StreamWriter
    waiting_since: float | None = field(default_factory=time.monotonic)  # None while a request is served


def connection_cap(wanted: int) -> int:
    """The cap, kept below the process's file limit by more than one pass of accepts, the workers'
    and collectors' reads and the loop's own descriptors."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    headroom = 2 * ACCEPT_BACKLOG + 64
    return max(1, min(wanted, soft - headroom)) if soft != resource.RLIM_INFINITY else wanted


class ExporterServer:
    """serve_forever() runs the loop in the calling thread; shutdown() (from any thread) stops it."""

    def __init__(self, registry: CollectorRegistry, sock: socket.socket, config: WebConfig,
                 tls: ssl.SSLContext | None, limits: Limits) -> None:
        self.registry, self.socket, self.tls, self.limits = registry, sock, tls, limits
        self.auth = BasicAuth(config.basic_auth_users)
        self.extra_headers = config.http_server_config.headers
        self.cap = connection_cap(limits.max_connections)
        self.server_address: tuple[Any, ...] = sock.getsockname()
        self._open: dict[asyncio.StreamWriter, _Connection] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopped, self._serving = threading.Event(), threading.Event()
        self._lock, self._closing = threading.Lock(), False
        self.workers = ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="gpunet-scrape")

    def serve_forever(self, on_serving: Callable[[], None] | None = None) -> None:
        self._stopped.clear()
        self._serving.set()
        try:
            asyncio.run(self._serve(on_serving))
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serve_forever (called from another thread), also when it has not started yet."""
        with self._lock:
            self._closing = True
            if self._loop is not None and self._stop is not None:
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._serving.is_set():
            self._stopped.wait(10)

    def server_close(self) -> None:
        self.workers.shutdown(wait=False, cancel_futures=True)
        self.socket.close()

    @property
    def open_connections(self) -> int:
        return len(self._open)

    async def _serve(self, on_serving: Callable[[], None] | None = None) -> None:
        with self._lock:  # shutdown() either saw this loop, or set _closing before it
            if self._closing:
                return
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._loop.set_exception_handler(_log_loop_error)
        server = await asyncio.start_server(self._client, sock=self.socket, ssl=self.tls, limit=MAX_HEAD_BYTES,
                                            backlog=ACCEPT_BACKLOG,
                                            ssl_handshake_timeout=self.limits.head_deadline_s if self.tls else None)
        self.socket.listen(LISTEN_BACKLOG)  # asyncio set the queue to its per-pass accept count
        if on_serving is not None:  # said once the loop answers: not while it is still being built
            on_serving()
        async with server:
            await self._stop.wait()
            for writer in list(self._open):
                writer.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._open) >= self.cap:
            self._evict_longest_waiting()
        connection = self._open[writer] = _Connection(writer)
        try:
            await self._requests(reader, connection)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # the client went away, stalled or sent too much: its connection ends, nothing else
        finally:
            self._open.pop(writer, None)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _evict_longest_waiting(self) -> None:
        waiting = [c for c in self._open.values() if c.waiting_since is not None]
        if waiting:
            oldest = min(waiting, key=lambda c: c.waiting_since or 0.0)
            self._open.pop(oldest.writer, None)
            oldest.writer.transport.abort()

    async def _requests(self, reader: asyncio.StreamReader, connection: _Connection) -> None:
        """Requests on one connection, each head within the deadline, until either side closes."""
        while True:
            connection.waiting_since = time.monotonic()
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.limits.head_deadline_s)
            connection.waiting_since = None
            request = parse_request(head)
            if request is None:
                await self._send(connection.writer, _response(400, b"Bad request\n", {}, close=True))
                return
            keep = _keeps_alive(request)
            status, headers, body = await asyncio.get_running_loop().run_in_executor(
                self.workers, self.respond_safely, request)
            await self._send(connection.writer, _response(status, body, headers | self.extra_headers,
                                                          close=not keep, head=request.method == "HEAD"))
            if not keep:
                return

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await asyncio.wait_for(writer.drain(), self.limits.write_deadline_s)

    def respond_safely(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        """respond(), with anything it did not foresee answered 500 and logged in one line: a
        request always gets a response."""
        try:
            return self.respond(request)
        except Exception as exc:  # the client gets 500, the log gets the reason
            log.warning("request %r failed: %s: %s", request.target[:100], type(exc).__name__, exc)
            return 500, {}, b"Internal server error\n"

    def respond(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one request (a worker thread: bcrypt and collection block)."""
        if request.method not in ("GET", "HEAD"):
            return 405, {"Allow": "GET, HEAD"}, b"Method not allowed\n"
        if not self.auth.allows(request.headers.get("Authorization")):
            return 401, {"WWW-Authenticate": 'Basic realm="gpunet"'}, b"Unauthorized\n"
        try:
            path = urlsplit(request.target).path
        except ValueError:
            return 400, {}, b"Bad request target\n"
        if path == "/":
            return 200, {"Content-Type": "text/html"}, LANDING
        if path != "/metrics":
            return 404, {}, b"Not found\n"
        if request.method == "HEAD":  # health checks: the status of a GET, without collecting
            return 200, {}, b""
        return self._metrics(request)

    def _metrics(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        """The text exposition (or OpenMetrics, as negotiated), gzipped when the client asks."""
        encoder, content_type = negotiate(request.headers.get_all("Accept") or [])
        names = parse_qs(urlsplit(request.target).query).get("name[]")
        registry = self.registry.restricted_registry(names) if names else self.registry
        body = encoder(registry)
        headers = {"Content-Type": content_type}
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
        return 200, headers, body


def negotiate(accept: list[str]) -> tuple[Callable[[Collector], bytes], str]:
    """OpenMetrics 1.0.0 when the client lists it, else the text format 0.0.4. The response's
    Content-Type is one of these two constants: nothing of the request is echoed back."""
    media = {part.split(";")[0].strip().lower() for header in accept for part in header.split(",")}
    if "application/openmetrics-text" in media:
        return generate_openmetrics, openmetrics.CONTENT_TYPE_LATEST
    return generate_text, TEXT_FORMAT


def parse_request(head: bytes) -> Request | None:
    """The request line and headers of an HTTP/1.x request head; None when it is not one."""
    line, _, rest = head.partition(b"\r\n")
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return None
    try:
        headers = parse_headers(io.BytesIO(rest))
    except (HTTPException, ValueError):
        return None
    lengths = headers.get_all("Content-Length") or []
    if any(length.strip() != "0" for length in lengths) or len(lengths) > 1 or "Transfer-Encoding" in headers:
        return None  # GET and HEAD carry no body; one would be read as the next request
    return Request(parts[0], parts[1], parts[2], headers)


def _keeps_alive(request: Request) -> bool:
    wanted = request.headers.get("Connection", "").lower()
    return wanted == "keep-alive" if request.version == "HTTP/1.0" else wanted != "close"


def _response(status: int, body: bytes, headers: dict[str, str], *, close: bool, head: bool = False) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines += ["Connection: close"] if close else []
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else body)


def _log_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """One line per bad client (plain HTTP to the TLS port, a dropped handshake), not a traceback."""
    del loop
    log.warning("connection failed: %r", {k: v for k, v in context.items() if k in ("message", "exception")})


def make_server(registry: CollectorRegistry, address: str, port: int, config: WebConfig,
                limits: Limits = Limits()) -> ExporterServer:
    """Bound and ready; the caller runs serve_forever() (and shutdown() to stop)."""
    tls = tls_context(config.tls_server_config) if config.tls_server_config else None  # refused before binding
    return ExporterServer(registry, _listening_socket(address, port), config, tls, limits)


def _listening_socket(address: str, port: int) -> socket.socket:
    """IPv4, or IPv6 for an address with ':'; `::` (the `:PORT` of --listen) is dual-stack."""
    sock = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if address == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((address, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {address}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock
