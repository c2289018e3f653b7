"""A loopback HTTP stand-in for a Prometheus server's query API: the tests' handlers choose the
answer, this serves it and shuts down promptly."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer


class Answering(BaseHTTPRequestHandler):
    """A handler that answers JSON and logs nothing."""

    def answer(self, status: int, body: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        del args


@contextmanager
def serving(handler: type[Answering]) -> Iterator[str]:
    """The stand-in's URL while it serves on 127.0.0.1 (a free port), shut down within 50 ms after."""
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
