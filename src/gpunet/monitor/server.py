"""The exporter's HTTP(S) endpoint, configured by a web config file in the Prometheus
exporter-toolkit format (the file node_exporter's --web.config.file reads), so one file serves
both: TLS from tls_server_config, basic auth from bcrypt hashes in basic_auth_users."""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import socket
import ssl
import sys
import threading
from base64 import b64decode
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import bcrypt
import yaml
from prometheus_client.exposition import MetricsHandler
from prometheus_client.registry import CollectorRegistry
from pydantic import Field, ValidationError

from gpunet.errors import UsageError
from gpunet.model.base import Frozen

TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
log = logging.getLogger("gpunet.exporter")
BCRYPT_HASH = re.compile(r"\$2[abxy]?\$\d{2}\$[./A-Za-z0-9]{53}")
HANDLER_TIMEOUT_S = 10  # a client that connects and says nothing gives its thread back after this
LANDING = b"<html><head><title>gpunet exporter</title></head><body><a href='/metrics'>metrics</a></body></html>"


class TlsServerConfig(Frozen):
    cert_file: Path
    key_file: Path
    client_auth_type: Literal["NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"] = \
        "NoClientCert"
    client_ca_file: Path | None = None
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"
    max_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] | None = None


class HttpServerConfig(Frozen):
    headers: dict[str, str] = Field(default_factory=dict)


class WebConfig(Frozen):
    tls_server_config: TlsServerConfig | None = None
    http_server_config: HttpServerConfig = HttpServerConfig()
    basic_auth_users: dict[str, str] = Field(default_factory=dict)  # user -> bcrypt hash


def load_web_config(path: Path) -> WebConfig:
    """Read and check the file; relative certificate paths are relative to it (as exporter-toolkit does)."""
    data = _read_yaml(path)
    try:
        config = WebConfig.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise UsageError(f"{path}: {where}: {problem['msg']}") from None
    for user, digest in config.basic_auth_users.items():
        if not BCRYPT_HASH.fullmatch(digest):
            raise UsageError(f"{path}: basic_auth_users.{user}: not a bcrypt hash (make one with "
                             f"`htpasswd -nBC 10 {user}`, the part after the colon)")
    return _resolved(config, path.parent)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not YAML: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of tls_server_config, http_server_config, basic_auth_users")
    return data or {}


def _resolved(config: WebConfig, base: Path) -> WebConfig:
    tls = config.tls_server_config
    if tls is None:
        return config
    paths = {key: base / value for key in ("cert_file", "key_file", "client_ca_file")
             if (value := getattr(tls, key)) is not None}
    for key, value in paths.items():
        if not value.is_file():
            raise UsageError(f"tls_server_config.{key}: {value} is not a file")
    return config.model_copy(update={"tls_server_config": tls.model_copy(update=paths)})


def tls_context(tls: TlsServerConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except ssl.SSLError as exc:
        raise UsageError(f"{tls.cert_file} / {tls.key_file}: {exc.reason or exc}") from None
    context.minimum_version = TLS_VERSIONS[tls.min_version]
    if tls.max_version:
        context.maximum_version = TLS_VERSIONS[tls.max_version]
    context.verify_mode = CLIENT_AUTH[tls.client_auth_type]
    if tls.client_auth_type != "NoClientCert":
        if tls.client_ca_file is None:
            raise UsageError(f"tls_server_config: client_auth_type {tls.client_auth_type} needs client_ca_file")
        context.load_verify_locations(tls.client_ca_file)
    return context


class BasicAuth:
    """Checks `Authorization: Basic` against bcrypt hashes; a success is remembered (as a keyed
    digest, not the password) so a scrape every 15 s does not pay bcrypt's deliberate cost. An
    unknown user is checked against a dummy hash of the same cost, so timing does not tell which
    users exist."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = {name: digest.encode() for name, digest in users.items()}
        self._key = hashlib.sha256(repr(sorted(users.items())).encode()).digest()
        self._accepted: set[bytes] = set()
        self._lock = threading.Lock()
        cost = int(next(iter(users.values())).split("$")[2]) if users else 4
        self._dummy = bcrypt.hashpw(b"gpunet: no such user", bcrypt.gensalt(rounds=cost))

    def allows(self, header: str | None) -> bool:
        if not self.users:
            return True
        user, password = _basic_credentials(header)
        if user is None:
            return False
        token = hmac.new(self._key, f"{user}:{password}".encode(), hashlib.sha256).digest()
        with self._lock:
            if token in self._accepted:
                return True
        if not _checkpw(password, self.users.get(user, self._dummy)) or user not in self.users:
            return False
        with self._lock:
            self._accepted.add(token)
        return True


def _checkpw(password: str, digest: bytes) -> bool:
    """False, not an exception, for what bcrypt refuses (a password over 72 bytes)."""
    try:
        return bcrypt.checkpw(password.encode(), digest)
    except ValueError:
        return False


def _basic_credentials(header: str | None) -> tuple[str | None, str]:
    scheme, _, encoded = (header or "").partition(" ")
    if scheme.lower() != "basic":
        return None, ""
    try:
        user, sep, password = b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None, ""
    return (user, password) if sep else (None, "")


def make_server(registry: CollectorRegistry, address: str, port: int, config: WebConfig) -> ThreadingHTTPServer:
    """Bound and ready; the caller runs serve_forever() (and shutdown() to stop)."""
    handler = _handler(registry, BasicAuth(config.basic_auth_users), config.http_server_config.headers)
    server_class = _IPv6Server if ":" in address else _Server
    try:
        server = server_class((address, port), handler)
    except OSError as exc:
        raise UsageError(f"cannot listen on {address}:{port}: {exc.strerror or exc}") from None
    if config.tls_server_config:
        # The handshake happens in the request's thread, so a slow client cannot stall accept().
        server.socket = tls_context(config.tls_server_config).wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False)
    return server


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line per bad client (plain HTTP to the TLS port, a dropped handshake), not a traceback."""
        log.warning("request from %s failed: %s", client_address[0], sys.exc_info()[1])


class _IPv6Server(_Server):
    """IPv6, and IPv4 too on `::` (the `:PORT` of --listen): a dual-stack socket."""

    address_family = socket.AF_INET6

    def server_bind(self) -> None:
        if self.server_address[0] == "::":
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def _handler(registry: CollectorRegistry, auth: BasicAuth, headers: dict[str, str]) -> type[MetricsHandler]:
    return type("Handler", (ExporterHandler,), {"registry": registry, "auth": auth, "extra_headers": headers})


class ExporterHandler(MetricsHandler):
    """prometheus_client's handler (content negotiation, gzip) behind basic auth, on /metrics only."""

    auth: BasicAuth
    extra_headers: dict[str, str]
    timeout = HANDLER_TIMEOUT_S

    def do_HEAD(self) -> None:
        """Health checks of load balancers: the status of a GET, no body, no collection."""
        if not self.auth.allows(self.headers.get("Authorization")):
            self._reply(401, b"", {"WWW-Authenticate": 'Basic realm="gpunet"'})
        else:
            self._reply(200 if self.path.split("?")[0] in ("/", "/metrics") else 404, b"", {})

    def do_GET(self) -> None:
        if not self.auth.allows(self.headers.get("Authorization")):
            self._reply(401, b"Unauthorized\n", {"WWW-Authenticate": 'Basic realm="gpunet"'})
        elif self.path.split("?")[0] == "/metrics":
            super().do_GET()
        elif self.path == "/":
            self._reply(200, LANDING, {"Content-Type": "text/html"})
        else:
            self._reply(404, b"Not found\n", {})

    def end_headers(self) -> None:
        for name, value in self.extra_headers.items():
            self.send_header(name, value)
        super().end_headers()

    def _reply(self, code: int, body: bytes, extra: dict[str, str]) -> None:
        self.send_response(code)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
